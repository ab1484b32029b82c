"""The server's OTLP worker starts with the server, not on the first OTLP request (issue 53), by
default in the embedded profile: a bare ``daphne workbench.asgi:application`` too (issue 47)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runs.telemetry import otlp_worker
from tests.testdb import REPO, copy_migrated_sqlite


@pytest.fixture
def queued(settings):
    settings.WORKBENCH_OTLP_QUEUE = True
    settings.WORKBENCH_OTLP_WORKER_INPROCESS = True
    otlp_worker.stop_worker()
    yield settings
    otlp_worker.stop_worker()


@pytest.mark.slow
def test_workbench_serve_starts_the_worker_before_any_request(queued):
    queued.WORKBENCH_OTLP_WORKER_AT_START = True  # what `workbench serve` sets for daphne
    otlp_worker.start_with_server()
    assert otlp_worker.worker_pid() is not None


def test_a_process_that_only_imports_the_app_starts_none_while_nothing_waits(queued, tmp_path):
    queued.WORKBENCH_OTLP_WORKER_AT_START = False
    queued.WORKBENCH_OTLP_SPOOL_DIR = tmp_path  # nothing queued
    otlp_worker.start_with_server()
    assert otlp_worker.worker_pid() is None


def _children(pid: int) -> list[int]:
    pids: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            pids += [int(p) for p in (task / "children").read_text().split()]
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
    return pids


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except FileNotFoundError:
        return ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):  # a TCP connect, no request
            return True
    except OSError:
        return False


@pytest.mark.parametrize("at_start", [None, "0"], ids=["default", "set-off"])
def test_a_bare_daphne_of_the_embedded_profile_starts_its_worker_before_any_request(tmp_path, at_start):
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "WORKBENCH_VAR_DIR": str(tmp_path),
        "DEBUG": "1",
        "DJANGO_SETTINGS_MODULE": "workbench.settings",
        "PYTHONPATH": str(REPO),
    }
    for name in ("REDIS_URL", "WORKBENCH_OTLP_WORKER_AT_START", "WORKBENCH_OTLP_QUEUE"):
        env.pop(name, None)
    if at_start is not None:
        env["WORKBENCH_OTLP_WORKER_AT_START"] = at_start
    copy_migrated_sqlite(tmp_path / "db.sqlite3", env)
    port = _free_port()
    daphne = Path(sys.executable).with_name("daphne")
    command = [str(daphne), "-b", "127.0.0.1", "-p", str(port), "workbench.asgi:application"]
    with open(tmp_path / "daphne.log", "w") as log:
        server = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 90
        while not _listening(port):
            assert server.poll() is None, (tmp_path / "daphne.log").read_text()
            assert time.monotonic() < deadline, "daphne did not listen"
            time.sleep(0.2)
        workers = [p for p in _children(server.pid) if "otlp_worker" in _cmdline(p)]
        if at_start == "0":
            assert workers == []  # set off: started by the first OTLP request (nothing waits)
        else:
            assert len(workers) == 1, "no OTLP worker before the first request"
            assert f"--parent {server.pid}" in _cmdline(workers[0])
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
