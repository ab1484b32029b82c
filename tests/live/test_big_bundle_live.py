"""A bundle over the 25 MiB body limit through a real daphne (issue 29): ``POST /api/bundles``
passes on its own limit (WORKBENCH_MAX_BUNDLE_BYTES), answers 202, the job stores every event,
and the server's memory does not grow with the body (daphne would queue a whole body in memory;
runs/web/uploads.py hands it over a chunk at a time, runs/web/spool.py copies it to disk). Any
other route still refuses 26 MiB with 413 and changes nothing."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import httpx
import pytest

from tests.bigbundle import generate_bundle
from tests.live.cluster import Cluster

MIB = 1024 * 1024
EVENTS = 50_000  # ~43 MB


def _peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def _chunks(path: Path):
    with path.open("rb") as f:
        while chunk := f.read(64 * 1024):
            yield chunk


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from tests.conftest import LINEAR_WORKFLOW

    bundle = tmp_path_factory.mktemp("big") / "big.json"
    generate_bundle(bundle, EVENTS)
    # default limits (25 MiB, 8 GiB for bundle imports); the job runs in a worker process
    with Cluster(database="sqlite", servers=1, workers=1) as cluster:
        seed = cluster.seed(workflow=LINEAR_WORKFLOW)
        yield cluster, seed, bundle


def test_a_43_mb_bundle_is_imported_by_a_job_and_the_server_does_not_hold_it(server):
    cluster, seed, bundle = server
    size = bundle.stat().st_size
    assert size > 40 * MIB
    pid = cluster.procs[0].pid
    headers = {"Authorization": f"Bearer {seed['token']}"}
    with httpx.Client(headers=headers, timeout=600) as http:
        assert http.get(cluster.url(0, "/api/runs")).status_code == 200
        before = _peak_rss(pid)
        response = http.post(
            cluster.url(0, "/api/bundles"),
            content=_chunks(bundle),
            headers={"Content-Type": "application/json", "Content-Length": str(size)},
        )
        assert response.status_code == 202, response.text[:300]
        assert response.json()["size"] == size
        # daphne got the whole body and the view copied it to disk: the server's peak memory
        # grew by far less than the body (it grew by more than the body before: daphne queued it)
        assert _peak_rss(pid) - before < size // 2
        url = cluster.url(0, response.json()["url"])
        deadline = time.monotonic() + 300
        while (job := http.get(url).json())["status"] in ("queued", "running"):
            assert time.monotonic() < deadline
            time.sleep(0.5)
        assert job["status"] == "succeeded", job
        assert job["events"] == EVENTS and job["bytesRead"] == size
        page = http.get(cluster.url(0, f"/api/runs/{job['runId']}/events"), params={"limit": 1})
        assert page.status_code == 200 and page.json()["lastSeq"] == EVENTS


def _declared(port: int, path: str, token: str | None, length: int) -> bytes:
    """Send a request's head declaring ``length`` bytes (with the bearer ``token`` unless None)
    and its first 64 KiB; the answer."""
    credential = f"Authorization: Bearer {token}\r\n" if token else ""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{credential}"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head.encode() + b'{"events": [' + b" " * (64 * 1024))
        chunks = []
        while data := sock.recv(65536):
            chunks.append(data)
    return b"".join(chunks)


def test_26_mib_on_another_route_is_refused_413_and_changes_nothing(server):
    cluster, seed, _ = server
    events = cluster.url(0, f"/api/runs/{seed['run_id']}/events")
    with httpx.Client(headers={"Authorization": f"Bearer {seed['token']}"}, timeout=120) as http:
        before = http.get(events).json()["lastSeq"]
        for path in (f"/api/runs/{seed['run_id']}/events", "/api/bundles/verify", "/v1/traces"):
            answer = _declared(cluster.ports[0], path, seed["token"], 26 * MIB)
            assert b" 413 " in answer.split(b"\r\n", 1)[0], (path, answer[:300])
            assert b"PAYLOAD_TOO_LARGE" in answer and b"WORKBENCH_MAX_BODY_BYTES" in answer
        assert http.get(events).json()["lastSeq"] == before


def test_a_bundle_import_without_a_credential_keeps_the_body_limit(server):
    """daphne's own door: the bundle limit is for a request that presents a credential; a stranger's
    26 MiB bundle is refused at the headers, not received into a file of up to 8 GiB."""
    cluster, _, _ = server
    answer = _declared(cluster.ports[0], "/api/bundles", None, 26 * MIB)
    assert b" 413 " in answer.split(b"\r\n", 1)[0], answer[:300]
    assert b"WORKBENCH_MAX_BODY_BYTES" in answer and b"WORKBENCH_MAX_BUNDLE_BYTES" in answer
