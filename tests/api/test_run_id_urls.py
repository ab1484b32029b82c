"""Every run id the protocol accepts round-trips through the REST URLs, percent-encoded.

Servers decode the path before routing (``%2F`` becomes ``/``), so the API routes from the path
the client sent: ASGI's ``raw_path`` (daphne, uvicorn) or WSGI's ``REQUEST_URI`` / ``RAW_URI``
(uwsgi, gunicorn). The tests send what such a server hands Django: the decoded path plus the raw one.
"""

from __future__ import annotations

import asyncio
import json
from urllib.parse import quote, unquote

import pytest
from django.test import AsyncClient

from runs.models import Run

HOSTILE_IDS = [
    "a/b",
    "/leading/and/trailing/",
    "runs/x/events",  # looks like a route
    "x:fork",
    "50%",
    "a%2Fb",  # a literal percent-escape inside the id
    "a%41",
    "what?x=1",
    "#fragment",
    "with space",
    "ünï/cødé ✓",
    "quote\"and'apostrophe",
    "...",  # three dots are no dot segment
    "a\\b",
]


def _url(run_id: str, suffix: str = "") -> str:
    return f"/api/runs/{quote(run_id, safe='')}{suffix}"


class RawPathClient:
    """The bearer client, sending the raw (undecoded) path the way WSGI servers do."""

    def __init__(self, api) -> None:
        self.api = api

    def call(self, method: str, path: str, body=None):
        headers = self.api._headers(None)
        data = b"" if body is None else json.dumps(body).encode()
        return self.api.client.generic(
            method, path, data=data, content_type="application/json", headers=headers, REQUEST_URI=path
        )


@pytest.mark.parametrize("run_id", HOSTILE_IDS)
def test_every_run_route_finds_a_run_whose_id_needs_encoding(api, workflow, run_id):
    raw = RawPathClient(api)
    created = raw.call("POST", "/api/runs", {"workflow": workflow, "runId": run_id})
    assert created.status_code == 201, created.content
    assert created.json()["runId"] == run_id

    got = raw.call("GET", _url(run_id))
    assert got.status_code == 200, got.content
    assert got.json()["run"]["id"] == run_id

    events = raw.call("GET", _url(run_id, "/events"))
    assert events.status_code == 200, events.content
    assert events.json()["runId"] == run_id

    note = raw.call("POST", _url(run_id, "/annotations"), {"text": "seen"})
    assert note.status_code == 200, note.content

    bundle = raw.call("GET", _url(run_id, "/bundle"))
    assert bundle.status_code == 200, bundle.content

    transcript = raw.call("GET", _url(run_id, "/transcript.jsonl"))
    assert transcript.status_code == 200, transcript.content

    fork = raw.call("POST", _url(run_id, ":fork"), {"mode": "replay"})
    assert fork.status_code == 201, fork.content
    assert fork.json()["sourceRunId"] == run_id
    fork_id = fork.json()["runId"]
    report = raw.call("GET", _url(fork_id, "/determinism"))
    assert report.status_code in (200, 409), report.content  # the branch's report, or "not a replay"
    assert report.json().get("code") != "NOT_FOUND"

    cancelled = raw.call("POST", _url(run_id, "/cancel"), {})
    assert cancelled.status_code == 200, cancelled.content

    deleted = raw.call("DELETE", _url(run_id))
    assert deleted.status_code == 204, deleted.content
    assert not Run.objects.filter(run_id=run_id).exists()


def test_an_id_that_looks_like_a_suffix_route_is_not_confused_with_it(api, workflow):
    raw = RawPathClient(api)
    for run_id in ("x", "x/events"):
        assert raw.call("POST", "/api/runs", {"workflow": workflow, "runId": run_id}).status_code == 201
    whole = raw.call("GET", _url("x/events"))
    assert whole.status_code == 200 and whole.json()["run"]["id"] == "x/events"
    events_of_x = raw.call("GET", "/api/runs/x/events")
    assert events_of_x.status_code == 200 and "events" in events_of_x.json()


def test_artifact_keys_in_the_path_are_decoded_once(api, workflow):
    raw = RawPathClient(api)
    run_id, key = "r/1", "report/v%1"
    assert raw.call("POST", "/api/runs", {"workflow": workflow, "runId": run_id}).status_code == 201
    written = raw.call(
        "POST", _url(run_id, "/artifacts"), {"artifactKey": key, "typeId": "note", "data": {"n": 1}}
    )
    assert written.status_code == 200, written.content
    patched = raw.call(
        "POST",
        _url(run_id, f"/artifacts/{quote(key, safe='')}/patch"),
        {"fromVersion": 1, "patch": [{"op": "replace", "path": "/n", "value": 2}]},
    )
    assert patched.status_code == 200, patched.content


async def _asgi_get(path: str, token: str) -> tuple[int, bytes]:
    """GET through Django's ASGI handler with the scope an ASGI server builds (decoded ``path``,
    undecoded ``raw_path``)."""
    from django.core.handlers.asgi import ASGIHandler

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": unquote(path),
        "raw_path": path.encode("ascii"),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver"), (b"authorization", f"Bearer {token}".encode())],
        "client": ("127.0.0.1", 1),
        "server": ("testserver", 80),
    }
    sent: list[dict] = []
    requests = [{"type": "http.request", "body": b"", "more_body": False}]
    done = asyncio.Event()

    async def receive() -> dict:
        if requests:
            return requests.pop()
        await done.wait()  # the client stays connected until the response is complete
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            done.set()

    await ASGIHandler()(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_asgi_servers_raw_path_routes_an_encoded_slash(full_token, workflow):
    client, auth = AsyncClient(), {"Authorization": f"Bearer {full_token}"}
    body = json.dumps({"workflow": workflow, "runId": "team/a b?#%:fork"})
    created = await client.post("/api/runs", body, content_type="application/json", headers=auth)
    assert created.status_code == 201, created.content
    status, content = await _asgi_get(_url("team/a b?#%:fork"), full_token)
    assert status == 200, content
    assert json.loads(content)["run"]["id"] == "team/a b?#%:fork"


def test_every_api_path_parameter_under_runs_uses_the_runid_converter():
    """A new route written as ``/{run_id}`` would get the raw-path form of the id (``a%2Fb``)."""
    from django.urls import URLPattern, URLResolver, get_resolver

    from runs.ids import RunIdConverter

    def walk(patterns, prefix=""):
        for p in patterns:
            if isinstance(p, URLResolver):
                yield from walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern):
                yield prefix + str(p.pattern), p.pattern

    checked = 0
    for route, pattern in walk(get_resolver().url_patterns):
        if not route.startswith("api/runs/"):
            continue
        for name, converter in getattr(pattern, "converters", {}).items():
            checked += 1
            assert isinstance(converter, RunIdConverter), f"{route}: <{name}> must be {{runid:{name}}}"
    assert checked >= 10
