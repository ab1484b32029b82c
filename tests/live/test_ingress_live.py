"""The ways in, against a real daphne on loopback: run ids with any character round-trip through
REST URLs percent-encoded once, and an oversized body is refused at the door before it is read."""

from __future__ import annotations

import json
import os
import socket
from urllib.parse import quote

import httpx
import pytest

from tests.live.cluster import Cluster

# A helper's own port range (COORD.md): 12a uses 8100-8109; others may override.
PORT = int(os.environ.get("WORKBENCH_TEST_PORT", "8101"))
HOSTILE = "team/a b?#%:fork ünï \"q'"


@pytest.fixture(scope="module")
def server(request):
    from tests.conftest import LINEAR_WORKFLOW

    with Cluster(
        database="sqlite",
        servers=0,
        extra_env={"WORKBENCH_MAX_BODY_BYTES": "65536", "WORKBENCH_MAX_BUNDLE_BYTES": "65536"},
    ) as cluster:
        cluster.start_server(0, port=PORT)
        seed = cluster.seed(workflow=LINEAR_WORKFLOW, run_id=HOSTILE)
        yield cluster, seed


def test_a_run_id_with_any_character_round_trips_through_rest_urls(server):
    cluster, seed = server
    auth = {"Authorization": f"Bearer {seed['token']}"}
    base = cluster.url(0, f"/api/runs/{quote(HOSTILE, safe='')}")
    with httpx.Client(headers=auth, timeout=30) as http:
        got = http.get(base)
        assert got.status_code == 200, got.text
        assert got.json()["run"]["id"] == HOSTILE
        events = http.get(base + "/events")
        assert events.status_code == 200 and events.json()["runId"] == HOSTILE
        note = http.post(base + "/annotations", json={"text": "over the wire"})
        assert note.status_code == 200, note.text
        fork = http.post(base + ":fork", json={"mode": "replay"})
        assert fork.status_code == 201, fork.text
        assert fork.json()["sourceRunId"] == HOSTILE
        events_url = fork.json()["eventsUrl"]  # the server's own link works as given
        assert http.get(cluster.url(0, events_url)).status_code == 200


def _raw_request(port: int, head: str, body: bytes = b"") -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head.encode() + body)
        chunks = []
        while True:
            try:
                data = sock.recv(65536)
            except TimeoutError:
                break
            if not data:
                break
            chunks.append(data)
            if b"\r\n\r\n" in b"".join(chunks) and b"PAYLOAD_TOO_LARGE" in b"".join(chunks):
                break
    return b"".join(chunks)


@pytest.mark.parametrize("path", ["/import/", "/api/bundles", "/v1/traces", "/api/mcp"])
def test_a_declared_oversized_body_is_answered_413_without_sending_it(server, path):
    cluster, seed = server
    # 200 MB announced, 10 bytes sent: the answer comes at once, the body is never waited for
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {seed['token']}\r\n"
        "Content-Type: application/json\r\nContent-Length: 200000000\r\n\r\n"
    )
    answer = _raw_request(cluster.ports[0], head, b'{"a": 1,  ')
    status_line = answer.split(b"\r\n", 1)[0]
    assert b" 413 " in status_line, answer[:300]
    assert b"PAYLOAD_TOO_LARGE" in answer


def test_a_chunked_oversized_body_is_cut_off(server):
    cluster, seed = server

    def chunks():
        for _ in range(64):  # 4 MB in 64 KB chunks against a 64 KB limit
            yield b"x" * 65536

    with httpx.Client(timeout=30) as http:
        try:
            response = http.post(
                cluster.url(0, "/api/bundles"),
                content=chunks(),
                headers={"Authorization": f"Bearer {seed['token']}", "Content-Type": "application/json"},
            )
        except httpx.HTTPError:  # the server may close while the client still sends
            return
    assert response.status_code == 413
    assert json.loads(response.content)["code"] == "PAYLOAD_TOO_LARGE"
