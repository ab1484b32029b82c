"""workbench_sdk.client against a real server on loopback (pytest-django's live_server): the host flow,
bundles, errors, and the retry policy (429 and network errors retried with the same
Idempotency-Key; other 4xx never retried; 5xx retried)."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from django.test import override_settings
from workbench_sdk.client import WorkbenchAPIError, WorkbenchClient, WorkbenchTransportError, make_event

from runs.models import Event
from runs.protocol.bundle import check_bundle


class CountingTransport(httpx.HTTPTransport):
    """A real HTTP transport that records requests and can lose the first N responses in transit."""

    def __init__(self, drop_responses: int = 0) -> None:
        super().__init__()
        self.drop = drop_responses
        self.requests: list[httpx.Request] = []
        self.statuses: list[int] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        response = super().handle_request(request)
        self.statuses.append(response.status_code)
        if self.drop > 0:
            self.drop -= 1
            response.read()
            response.close()
            raise httpx.ReadError("connection reset after the server answered", request=request)
        return response


@pytest.fixture
def token(transactional_db, workspace):
    from accounts.tokens import create_token

    return create_token(workspace=workspace, name="host", scopes=["read", "write", "review"]).secret


def _client(live_server, token, **kw) -> WorkbenchClient:
    kw.setdefault("sleep", lambda s: None)
    return WorkbenchClient(live_server.url, token, **kw)


def test_host_flow_over_http(live_server, token, workflow):
    with _client(live_server, token) as wb:
        assert wb.health()["status"] == "ok"
        run_id = wb.start_run(workflow=workflow, tags=["remote"])["runId"]
        result = wb.append_events(
            run_id,
            [
                make_event(run_id, "step_started", stepId="parse"),
                make_event(run_id, "step_completed", stepId="parse", ok=True),
            ],
        )
        assert result["seqs"] == [1, 2]
        gate = wb.resolve_gate(run_id, step_id="review", gate="PAUSE_BEFORE", decision="approved", note="ok")
        assert gate["lastSeq"] > 2
        wb.write_artifact(run_id, key="draft", type_id="json", data={"v": 1})
        wb.patch_artifact(
            run_id, key="draft", from_version=1, patch=[{"op": "replace", "path": "/v", "value": 2}]
        )
        wb.annotate(run_id, "from the client", tags=["t"])
        seqs = [seq for seq, _ in wb.iter_events(run_id, page_size=2)]
        assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) >= 6
        state, etag = wb.get_run_state(run_id)
        assert state["run"]["id"] == run_id and etag == f'"{state["revision"]}"'
        state["trace"].append(make_event(run_id, "annotation", text="via PUT"))
        assert wb.put_run_state(run_id, state, if_match=etag)["seqs"] == [len(seqs) + 1]
        with pytest.raises(WorkbenchAPIError) as stale:
            wb.put_run_state(run_id, state, if_match=etag)
        assert stale.value.status == 412 and stale.value.code == "PRECONDITION_FAILED"
        bundle = wb.export_bundle(run_id)
        assert check_bundle(bundle).ok and wb.verify_bundle(bundle)["ok"]
        copy = wb.import_bundle(bundle, as_new_id=True)
        assert copy["runId"] != run_id
        assert {m["id"] for m in wb.list_runs()} == {run_id, copy["runId"]}
        listed = wb.list_runs()
        assert [m["id"] for m in wb.iter_runs(page_size=1)] == [m["id"] for m in listed]  # 2 pages
        status = listed[0]["status"]
        same = [m["id"] for m in listed if m["status"] == status]
        assert [m["id"] for m in wb.iter_runs(page_size=1, status=status)] == same
        assert wb.cancel(run_id, reason="done")["status"] == "cancelled"
        wb.delete_run(copy["runId"])
        with pytest.raises(WorkbenchAPIError) as missing:
            wb.get_run_state(copy["runId"])
        assert missing.value.status == 404 and missing.value.code == "UNKNOWN_RUN"


def test_other_4xx_are_not_retried(live_server, token):
    transport = CountingTransport()
    with _client(live_server, token, transport=transport) as wb:
        with pytest.raises(WorkbenchAPIError) as exc:
            wb.append_events("run_missing", [make_event("run_missing", "annotation", text="x")])
    assert exc.value.status == 404 and len(transport.requests) == 1
    transport = CountingTransport()
    with _client(live_server, "wbt_bad", transport=transport) as wb:
        with pytest.raises(WorkbenchAPIError) as exc:
            wb.list_runs()
    assert exc.value.status == 401 and len(transport.requests) == 1


def test_lost_response_is_retried_with_the_same_idempotency_key(live_server, token, workflow, workspace):
    transport = CountingTransport()
    with _client(live_server, token, transport=transport) as wb:
        run_id = wb.start_run(workflow=workflow)["runId"]
        transport.drop = 1
        result = wb.append_events(run_id, [make_event(run_id, "annotation", text="exactly once")])
    posts = [r for r in transport.requests if r.method == "POST" and r.url.path.endswith("/events")]
    assert len(posts) == 2
    assert posts[0].headers["Idempotency-Key"] == posts[1].headers["Idempotency-Key"]
    assert result["seqs"] == [1]
    assert Event.objects.filter(run__run_id=run_id).count() == 1  # the retry did not append twice


def test_network_errors_are_retried_then_reported(token, workflow):
    sleeps: list[float] = []
    with WorkbenchClient("http://127.0.0.1:9", token, retries=3, sleep=sleeps.append, timeout=2) as wb:
        with pytest.raises(WorkbenchTransportError):
            wb.health()
    assert sleeps == [0.25, 0.5, 1.0]  # 250 ms x 2^n


@override_settings(WORKBENCH_RATE_LIMIT_PER_MINUTE=1, WORKBENCH_RATE_LIMIT_WINDOW_SECONDS=1)
def test_429_is_retried_after_retry_after(live_server, token):
    import time

    transport = CountingTransport()
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        time.sleep(seconds)

    with WorkbenchClient(live_server.url, token, transport=transport, sleep=sleep) as wb:
        wb.list_runs()
        wb.list_runs()  # over the limit: 429 with Retry-After: 1, then succeeds in the next window
    assert transport.statuses[0] == 200 and 429 in transport.statuses and transport.statuses[-1] == 200
    assert sleeps and all(s >= 1 for s in sleeps)


class _Flaky(BaseHTTPRequestHandler):
    """A loopback server answering 503 for the first two requests, then 200 with a health body."""

    count = 0
    keys: list[str] = []

    def do_POST(self) -> None:  # noqa: N802
        type(self).count += 1
        type(self).keys.append(self.headers.get("Idempotency-Key", ""))
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if type(self).count <= 2:
            body, status = b'{"error": "try later", "code": "STORAGE_UNAVAILABLE"}', 503
        else:
            body, status = (
                b'{"runId": "r", "revision": 1, "status": "running", "lastSeq": 1, "seqs": [1]}',
                200,
            )
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def test_5xx_is_retried_with_backoff():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Flaky)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        sleeps: list[float] = []
        with WorkbenchClient(f"http://127.0.0.1:{server.server_port}", "t", sleep=sleeps.append) as wb:
            assert wb.annotate("r", "x")["seqs"] == [1]
        assert _Flaky.count == 3 and sleeps == [0.25, 0.5]
        assert len(set(_Flaky.keys)) == 1 and _Flaky.keys[0]
        _Flaky.count, _Flaky.keys = 0, []
        with WorkbenchClient(
            f"http://127.0.0.1:{server.server_port}", "t", retries=1, sleep=sleeps.append
        ) as wb:
            with pytest.raises(WorkbenchAPIError) as exc:
                wb.annotate("r", "x")
        assert exc.value.status == 503 and exc.value.code == "STORAGE_UNAVAILABLE" and _Flaky.count == 2
    finally:
        server.shutdown()
        server.server_close()
