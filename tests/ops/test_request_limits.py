"""Long URLs and large headers are answered (414, 431) with a clear body, never a dropped
connection (issue 23 §5), inside Django and against a real daphne server."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runs.web.request_limits import MAX_URL_CHARS

ROOT = Path(__file__).resolve().parents[2]
LONG_QUERY = "q=" + "x" * 20_000


def test_django_answers_414_for_a_long_query_string(client):
    page = client.get("/accounts/login/?" + "q=" + "x" * MAX_URL_CHARS)
    assert page.status_code == 414 and "URI_TOO_LONG" in page.content.decode()
    api = client.get("/api/runs?" + "q=" + "x" * MAX_URL_CHARS)
    assert api.status_code == 414 and api.json()["code"] == "URI_TOO_LONG"
    assert client.get("/accounts/login/?q=" + "x" * 2000).status_code == 200  # long, not too long


@pytest.fixture(scope="module")
def daphne(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("limits")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
        "WORKBENCH_VAR_DIR": str(tmp),
        "DEBUG": "1",
        "DJANGO_SETTINGS_MODULE": "workbench.settings",
        "PYTHONPATH": str(ROOT),
    }
    env.pop("REDIS_URL", None)
    log = open(tmp / "daphne.log", "w")
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("daphne")),
            "-b",
            "127.0.0.1",
            "-p",
            str(port),
            "workbench.asgi:application",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    deadline = time.time() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                pytest.fail(f"daphne did not start: {(tmp / 'daphne.log').read_text()[-2000:]}")
            time.sleep(0.2)
    yield port
    proc.terminate()
    proc.wait(timeout=10)
    log.close()


def raw(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send ``request`` as is and read the whole answer (the server closes the connection)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
    assert data, "the connection was dropped without an answer"
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split(" ")[1]), headers, body


def get(path: str, extra: str = "") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}\r\n".encode()


@pytest.mark.parametrize("size", [20_000, 100_000])
def test_daphne_answers_414_for_a_long_query_string(daphne, size):
    status, headers, body = raw(daphne, get("/api/runs?q=" + "x" * size))
    assert status == 414 and headers["content-type"] == "application/json"
    assert json.loads(body)["code"] == "URI_TOO_LONG"
    status, headers, body = raw(daphne, get("/runs/?q=" + "x" * size))
    assert status == 414 and headers["content-type"].startswith("text/html")
    assert b"URI_TOO_LONG" in body and b"<h1>" in body


def test_daphne_answers_414_between_its_line_limit_and_ours(daphne):
    status, _, body = raw(daphne, get("/api/runs?q=" + "x" * (MAX_URL_CHARS + 10), "Connection: close\r\n"))
    assert status == 414 and json.loads(body)["code"] == "URI_TOO_LONG"


@pytest.mark.parametrize(
    "headers",
    [
        "Cookie: " + "a=" + "b" * 20_000 + "\r\n",  # one header line too long
        "".join(f"X-Filler-{i}: {'y' * 1000}\r\n" for i in range(40)),  # too much in all
        "".join(f"X-Many-{i}: 1\r\n" for i in range(300)),  # too many
    ],
    ids=["one-long-line", "too-much", "too-many"],
)
def test_daphne_answers_431_for_oversized_headers(daphne, headers):
    status, answer_headers, body = raw(daphne, get("/api/runs", headers))
    assert status == 431 and json.loads(body)["code"] == "HEADERS_TOO_LARGE"
    status, answer_headers, body = raw(daphne, get("/accounts/login/", headers))
    assert status == 431 and b"HEADERS_TOO_LARGE" in body


def test_ordinary_requests_still_pass(daphne):
    status, _, _ = raw(daphne, get("/.well-known/security.txt", "Connection: close\r\n"))
    assert status == 200
