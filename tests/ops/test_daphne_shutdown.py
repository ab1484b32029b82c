"""daphne shuts down within 5 s on SIGTERM with a transcript follow stream and a websocket open
(issue 23 §5: it took more than 12 s): the follow stream ends cleanly, the websocket is closed
with 1001 "going away", the process exits 0."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SETUP = """
import json, django; django.setup()
from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.db import SessionStore
from accounts.tokens import create_token
from runs import actions
from runs.actions.workspaces import add_member, get_or_create_workspace
from tests.conftest import LINEAR_WORKFLOW
ws = get_or_create_workspace("acme")
actions.do_start_run(workspace=ws, workflow=LINEAR_WORKFLOW, actor="t", run_id="run_follow")
user = get_user_model().objects.create_user("rita", password="rita-password-123")
add_member(ws, user, "owner")
session = SessionStore()
session["_auth_user_id"] = str(user.pk)
session["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
session["_auth_user_hash"] = user.get_session_auth_hash()
session.create()
print(json.dumps({"token": create_token(workspace=ws, name="t", scopes=["read"]).secret, "session": session.session_key}))
"""


@pytest.fixture
def server(tmp_path):
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "WORKBENCH_VAR_DIR": str(tmp_path),
        "WORKBENCH_TRANSCRIPT_DIR": str(tmp_path / "transcripts"),
        "DEBUG": "1",
        "DJANGO_SETTINGS_MODULE": "workbench.settings",
        "PYTHONPATH": str(ROOT),
    }
    env.pop("REDIS_URL", None)
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    secrets = json.loads(
        subprocess.run(
            [sys.executable, "-c", SETUP], cwd=ROOT, env=env, check=True, capture_output=True, text=True
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(tmp_path / "daphne.log", "w")
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
    deadline = time.time() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if time.time() > deadline or proc.poll() is not None:
                pytest.fail(f"daphne did not start: {(tmp_path / 'daphne.log').read_text()[-2000:]}")
            time.sleep(0.2)
    yield proc, port, secrets
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    log.close()


def test_sigterm_with_a_follow_stream_and_a_websocket_open_exits_within_5_seconds(server):
    from websockets.sync.client import connect

    proc, port, secrets = server
    follow = socket.create_connection(("127.0.0.1", port), timeout=20)
    follow.sendall(
        b"GET /api/runs/run_follow/transcript.jsonl?follow=true HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        + f"Authorization: Bearer {secrets['token']}\r\n\r\n".encode()
    )
    received = b""
    while b"run.started" not in received:
        received += follow.recv(65536)
    assert received.startswith(b"HTTP/1.1 200")

    ws = connect(
        f"ws://127.0.0.1:{port}/ws/runs/run_follow/",
        origin=f"http://127.0.0.1:{port}",
        additional_headers={"Cookie": f"sessionid={secrets['session']}"},
        open_timeout=20,
    ).__enter__()  # closed by the server below
    closed: dict = {}

    def watch() -> None:
        try:
            for _ in ws:
                pass
        except Exception:
            pass
        closed["code"] = ws.close_code

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()

    started = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=30)
    took = time.monotonic() - started

    rest = b""
    while True:
        try:
            chunk = follow.recv(65536)
        except OSError:
            break
        if not chunk:
            break
        rest += chunk
    follow.close()
    watcher.join(timeout=10)
    print(f"daphne exited {code} {took:.2f} s after SIGTERM")
    assert code == 0
    assert took < 5, f"daphne took {took:.1f} s to stop"
    assert (received + rest).endswith(b"0\r\n\r\n"), "the follow stream was cut, not ended"
    assert closed.get("code") == 1001
