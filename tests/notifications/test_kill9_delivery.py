"""kill -9 of the delivery worker mid-delivery: the delivery is not lost, and the retry carries
the same webhook-id (receivers dedupe on it).

A real worker process (`manage.py notify_worker --once`) on a SQLite file database posts to a
loopback receiver that holds the request open; the test SIGKILLs the worker while it waits for
the answer. The row is still pending under the dead worker's lease: a worker started at once
leaves it alone, one started after the lease sends it again, same id, same body.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from tests.fakes.webhook_receiver import Answer, Receiver

REPO = Path(__file__).resolve().parents[2]
LEASE = 10  # seconds (WORKBENCH_NOTIFY_LEASE_SECONDS): longer than a worker takes to start

SETUP = """
import django; django.setup()
from runs import actions
from runs.actions.webhooks import do_create_webhook
from runs.engine import commands as c
from runs.models import Workspace
from tests.conftest import LINEAR_WORKFLOW
ws = Workspace.objects.create(slug="acme", name="Acme")
do_create_webhook(workspace=ws, url={url!r}, events=["gate.requested"])
actions.do_start_run(workspace=ws, workflow=LINEAR_WORKFLOW, run_id="run_k9", actor="user:alice")
actions.do_commands(workspace=ws, run_id="run_k9", commands=[c.BeginStep(step_id="parse"), c.CompleteStep(step_id="parse")])
"""


def _env(tmp: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
        "DJANGO_SETTINGS_MODULE": "workbench.settings",
        "SECRET_KEY": "kill9-delivery-secret-key-0123456789abcdef",
        "WORKBENCH_VAR_DIR": str(tmp),
        "DEBUG": "1",
        "PYTHONPATH": str(REPO),
        "WORKBENCH_TASKS_BACKEND": "dummy",
        "WORKBENCH_EGRESS_ALLOW": "127.0.0.0/8",
        "WORKBENCH_NOTIFY_LEASE_SECONDS": str(LEASE),
        "WORKBENCH_NOTIFY_READ_TIMEOUT": "60",
        "WORKBENCH_NOTIFY_DEADLINE": "5",  # the lease outlasts it
    }
    env.pop("REDIS_URL", None)
    return env


def _row(tmp: Path) -> tuple:
    with sqlite3.connect(tmp / "db.sqlite3") as db:
        return db.execute("SELECT public_id, status, attempts FROM runs_delivery").fetchone()


def _worker(env) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "manage.py", "notify_worker", "--once"],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def test_kill9_mid_delivery_is_retried_with_the_same_webhook_id(tmp_path):
    answers = iter([Answer(200, delay=60), Answer(200), Answer(200)])
    with Receiver(lambda hit: next(answers)) as rx:
        env = _env(tmp_path)
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=REPO, env=env, check=True)
        subprocess.run([sys.executable, "-c", SETUP.format(url=rx.url)], cwd=REPO, env=env, check=True)
        message_id, status, attempts = _row(tmp_path)
        assert (status, attempts) == ("pending", 0)

        worker = _worker(env)
        hits = rx.wait_for(1, timeout=30)
        assert len(hits) == 1, worker.communicate(timeout=5)[0]
        os.kill(worker.pid, signal.SIGKILL)  # mid-delivery: the receiver has not answered
        worker.wait(timeout=10)
        assert worker.returncode == -signal.SIGKILL
        assert _row(tmp_path) == (message_id, "pending", 1)  # not lost, not marked delivered

        soon = _worker(env)  # within the dead worker's lease: nobody sends it twice at once
        assert b"0 delivery attempt(s)" in soon.communicate(timeout=60)[0]
        assert len(rx.hits) == 1

        time.sleep(max(0.0, hits[0].at + LEASE + 0.5 - time.time()))
        after = _worker(env)
        out = after.communicate(timeout=60)[0]
        assert after.returncode == 0, out
        second = rx.wait_for(2, timeout=10)[1]
    assert second.headers["webhook-id"] == hits[0].headers["webhook-id"] == message_id
    assert second.body == hits[0].body
    assert _row(tmp_path) == (message_id, "delivered", 2)


def test_kill9_of_the_task_worker_mid_delivery_keeps_the_webhook_id(tmp_path):
    """The same with the one worker command (`manage.py worker`, deliveries as django.tasks tasks
    on django-tasks-db): the delivery row outlives the killed process and the next worker sends it
    again after the leases, with the same webhook-id and body."""
    answers = iter([Answer(200, delay=60), Answer(200), Answer(200)])
    with Receiver(lambda hit: next(answers)) as rx:
        env = {**_env(tmp_path), "WORKBENCH_TASKS_BACKEND": "database", "WORKBENCH_WORKER_LEASE_SECONDS": "3"}
        subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=REPO, env=env, check=True)
        subprocess.run([sys.executable, "-c", SETUP.format(url=rx.url)], cwd=REPO, env=env, check=True)
        message_id, status, attempts = _row(tmp_path)
        assert (status, attempts) == ("pending", 0)

        def task_worker() -> subprocess.Popen:
            return subprocess.Popen(
                [sys.executable, "manage.py", "worker"],
                cwd=REPO,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
            )

        worker = task_worker()
        try:
            hits = rx.wait_for(1, timeout=60)
            assert len(hits) == 1
            os.kill(worker.pid, signal.SIGKILL)  # mid-delivery: the receiver has not answered
            assert worker.wait(timeout=10) == -signal.SIGKILL
            assert _row(tmp_path) == (message_id, "pending", 1)  # not lost, not marked delivered
            worker = task_worker()
            second = rx.wait_for(2, timeout=120)[1]
            deadline = time.monotonic() + 30
            while _row(tmp_path)[1] != "delivered" and time.monotonic() < deadline:
                time.sleep(0.2)
        finally:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait(timeout=5)
    assert second.headers["webhook-id"] == hits[0].headers["webhook-id"] == message_id
    assert second.body == hits[0].body
    assert _row(tmp_path) == (message_id, "delivered", 2)
    assert len(rx.hits) == 2  # sent again once, not twice
