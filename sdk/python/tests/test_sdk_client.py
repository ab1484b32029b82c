"""workbench_sdk.client against an httpx MockTransport: retries, idempotency, errors, configuration."""

from __future__ import annotations

import json

import httpx
import pytest

from workbench_sdk.cachekey import llm_cache_key, request_from_wire
from workbench_sdk.client import WorkbenchAPIError, WorkbenchClient, WorkbenchTransportError
from workbench_sdk.events import RecordedAnswer


class Server:
    """Answers scripted responses in order (the last one repeats) and keeps every request."""

    def __init__(self, *responses: httpx.Response | Exception) -> None:
        self.responses = list(responses)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.responses.pop(0) if len(self.responses) > 1 else self.responses[0]
        if isinstance(answer, Exception):
            raise answer
        return answer


def client(server: Server, **kw) -> tuple[WorkbenchClient, list[float]]:
    slept: list[float] = []
    wb = WorkbenchClient(
        kw.pop("base_url", "http://wb.test/"),
        kw.pop("token", "wbt_secret"),
        transport=httpx.MockTransport(server),
        sleep=slept.append,
        **kw,
    )
    return wb, slept


def test_a_write_is_retried_with_the_same_idempotency_key():
    server = Server(
        httpx.Response(503),
        httpx.Response(429, headers={"Retry-After": "2"}),
        httpx.Response(201, json={"runId": "run_1"}),
    )
    wb, slept = client(server, workspace="acme")
    assert wb.start_run(workflow={"id": "wf"}, tags=["nightly"]) == {"runId": "run_1"}
    keys = {r.headers["Idempotency-Key"] for r in server.requests}
    assert len(server.requests) == 3 and len(keys) == 1
    assert slept == [0.25, 2.0]
    first = server.requests[0]
    assert first.url == "http://wb.test/api/runs" and first.method == "POST"
    assert first.headers["Authorization"] == "Bearer wbt_secret" and first.headers["X-Workspace"] == "acme"
    assert json.loads(first.content) == {"workflow": {"id": "wf"}, "tags": ["nightly"]}


def test_other_client_errors_are_not_retried():
    server = Server(httpx.Response(409, json={"code": "REVISION_CONFLICT", "error": "stale"}))
    wb, slept = client(server)
    with pytest.raises(WorkbenchAPIError) as info:
        wb.append_events("run 1", [], idempotency_key="k1")
    assert (
        info.value.status == 409 and info.value.code == "REVISION_CONFLICT" and info.value.message == "stale"
    )
    assert len(server.requests) == 1 and slept == []
    assert server.requests[0].url.raw_path == b"/api/runs/run%201/events"
    assert server.requests[0].headers["Idempotency-Key"] == "k1"


def test_reads_carry_no_idempotency_key_and_errors_without_a_code():
    server = Server(httpx.Response(500, text="boom"))
    wb, slept = client(server, retries=1)
    with pytest.raises(WorkbenchAPIError) as info:
        wb.health()
    assert info.value.code == "HTTP_500" and len(server.requests) == 2 and slept == [0.25]
    assert "Idempotency-Key" not in server.requests[0].headers


def test_network_errors_after_the_retries():
    server = Server(httpx.ConnectError("refused"))
    wb, slept = client(server, retries=2, max_backoff=0.4)
    with pytest.raises(WorkbenchTransportError) as info:
        wb.list_runs()
    assert info.value.code == "NETWORK_ERROR" and slept == [0.25, 0.4]


def test_configuration_from_the_environment(monkeypatch):
    monkeypatch.setenv("WORKBENCH_URL", "http://env.test")
    monkeypatch.setenv("WORKBENCH_TOKEN", "wbt_env")
    server = Server(httpx.Response(200, json={"status": "ok"}))
    with WorkbenchClient(transport=httpx.MockTransport(server)) as wb:
        assert wb.health() == {"status": "ok"}
    request = server.requests[0]
    assert str(request.url) == "http://env.test/api/health"
    assert request.headers["Authorization"] == "Bearer wbt_env"
    monkeypatch.delenv("WORKBENCH_URL")
    with pytest.raises(ValueError, match="WORKBENCH_URL"):
        WorkbenchClient()


def test_run_state_etag_and_if_match():
    server = Server(httpx.Response(200, json={"run": {}}, headers={"ETag": '"3"'}))
    wb, _ = client(server)
    state, etag = wb.get_run_state("run_1")
    assert etag == '"3"'
    wb.put_run_state("run_1", state, if_match=3)
    assert server.requests[1].headers["If-Match"] == '"3"'


def test_iter_events_pages():
    pages = [
        httpx.Response(
            200, json={"events": [{"seq": 1, "event": {"id": "a"}}], "nextAfterSeq": 1, "hasMore": True}
        ),
        httpx.Response(
            200, json={"events": [{"seq": 2, "event": {"id": "b"}}], "nextAfterSeq": 2, "hasMore": False}
        ),
    ]
    server = Server(*pages)
    wb, _ = client(server)
    assert list(wb.iter_events("run_1", page_size=1)) == [(1, {"id": "a"}), (2, {"id": "b"})]
    assert server.requests[1].url.params["after_seq"] == "1"


REQUEST = {"model": "claude-haiku-4-5", "max_tokens": 32, "messages": [{"role": "user", "content": "Hi"}]}


def test_cached_response_sends_only_the_key():
    key = llm_cache_key(request_from_wire("anthropic", "claude-haiku-4-5", REQUEST))
    found = {
        "response": {"payload": {"id": "msg_1", "type": "message"}},
        "chunks": [{"payload": {"type": "x"}}],
    }
    server = Server(httpx.Response(200, json=found), httpx.Response(404, json={"code": "NOT_FOUND"}))
    wb, _ = client(server)
    replay = wb.replay_fn(prefer_run_id="run_src")
    answer = replay("anthropic", "claude-haiku-4-5", REQUEST)
    assert isinstance(answer, RecordedAnswer) and answer.body["id"] == "msg_1"
    assert answer.chunks == [{"type": "x"}]
    assert server.requests[0].url.path == f"/api/cache/{key}"
    assert server.requests[0].url.params["preferRunId"] == "run_src"
    assert wb.cached_response("anthropic", "claude-haiku-4-5", REQUEST) is None
