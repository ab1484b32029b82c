"""Playground executions run by a real task worker process (django-tasks-db's ``db_worker`` on a
SQLite file database), the loopback Anthropic fake counting what reaches the provider:

* executions stored by one process are run by the worker to their end;
* Stop pressed in another process (a "web" process) while the worker's call waits for its first
  byte: no request reaches the provider after it, not even the SDK's retries;
* ``kill -9`` of the worker mid-stream: the task row runs again (its lease expired: put back to
  READY as ``manage.py worker`` does for a dead worker's tasks) and the execution ends ``failed``
  with the reason in words, without a second request to the provider.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.loopback import after_stop

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]

SETUP = """
import django; django.setup()
from django.contrib.auth import get_user_model
from runs.models import Workspace
from playground.models import ModelEntry, ProviderConfig
ws = Workspace.objects.create(slug="acme", name="Acme")
get_user_model().objects.create_user(username="alice", password="pw-123456789")
p = ProviderConfig(workspace=ws, name="Fake", kind="anthropic", base_url={url!r}, max_retries=2, timeout_seconds=2.0)
p.set_api_key("test-anthropic-key")
p.save()
ModelEntry.objects.create(workspace=ws, provider=p, model_id="claude-sonnet-4-6", display_name="S")
"""

SUBMIT = """
import django, json, sys; django.setup()
from django.contrib.auth import get_user_model
from django.db import transaction
from playground import compose as c, execute
from playground.models import ModelEntry
entry = ModelEntry.objects.get(workspace__slug="acme")
ids = []
with transaction.atomic():
    for prompt in sys.argv[1:]:
        ex = execute.submit(workspace=entry.workspace, user=get_user_model().objects.get(), entry=entry,
                            composition=c.compose(c.Session(prompt=prompt), entry.spec()))
        ids.append(str(ex.pk))
print(json.dumps(ids))
"""

CANCEL = """
import django, sys; django.setup()
from playground import execute
from playground.models import Execution
sys.stdin.readline()  # started ahead: Stop is pressed when the test says so
print(execute.cancel(Execution.objects.get(pk=sys.argv[1]), actor="user:alice"), flush=True)
"""


@pytest.fixture
def world(tmp_path):
    with FakeAnthropic() as fake:
        env = {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
            "DJANGO_SETTINGS_MODULE": "workbench.settings",
            "SECRET_KEY": "execution-worker-secret-key-0123456789abcdef",
            "WORKBENCH_VAR_DIR": str(tmp_path),
            "DEBUG": "1",
            "PYTHONPATH": str(REPO),
            "WORKBENCH_TASKS_BACKEND": "database",
            "WORKBENCH_EGRESS_ALLOW": "127.0.0.0/8",
        }
        env.pop("REDIS_URL", None)
        python(env, "manage.py", "migrate", "-v0")
        python(env, "-c", SETUP.format(url=fake.url))
        yield fake, env, tmp_path / "db.sqlite3"


def python(env, *args: str) -> str:
    done = subprocess.run([sys.executable, *args], cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def submit(env, *prompts: str) -> list[str]:
    return json.loads(python(env, "-c", SUBMIT, *prompts).strip().splitlines()[-1])


def worker(env, *extra: str) -> subprocess.Popen:
    argv = ["manage.py", "db_worker", "--queue-name", "default", "--interval", "0.1", "--no-startup-delay"]
    return subprocess.Popen(
        [sys.executable, *argv, "--no-reload", *extra],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def row(db: Path, execution_id: str) -> dict:
    with sqlite3.connect(db) as conn:
        conn.row_factory = sqlite3.Row
        found = conn.execute(
            "SELECT status, error_code, error_message, partial_text, response_text, run_id "
            "FROM playground_execution WHERE id = ?",
            (execution_id.replace("-", ""),),
        ).fetchone()
    return dict(found)


def wait_for(predicate, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


def test_a_worker_process_runs_executions_stored_by_another(world):
    fake, env, db = world
    ids = submit(env, "q0", "q1")
    with sqlite3.connect(db) as conn:
        queued = conn.execute(
            "SELECT count(*) FROM django_tasks_database_dbtaskresult WHERE task_path = ? AND status = 'READY'",
            ("playground.execute.execution_task",),
        ).fetchone()[0]
    assert queued == 2  # durable rows, written when the executions were committed
    batch = worker(env, "--batch")
    out = batch.communicate(timeout=120)[0]
    assert batch.returncode == 0, out
    assert [row(db, i)["response_text"] for i in ids] == ["Echo: q0", "Echo: q1"]
    assert {row(db, i)["status"] for i in ids} == {"completed"} and len(fake.requests) == 2


def test_stop_in_another_process_reaches_the_worker_and_nothing_more_is_sent(world):
    fake, env, db = world
    fake.script({"misbehave": "slow", "delay": 5})  # silent past the 2 s timeout; 2 retries allowed
    (execution_id,) = submit(env, "stop me")
    web = subprocess.Popen(
        [sys.executable, "-c", CANCEL, execution_id],
        cwd=REPO,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    proc = worker(env)
    try:
        wait_for(lambda: len(fake.server.received) == 1)
        time.sleep(0.2)  # the request is out; its answer is not
        web.stdin.write("stop\n")
        web.stdin.flush()
        assert web.stdout.readline().strip() == "True"  # Stop, pressed in another process
        stopped_at = time.monotonic()
        web.wait(timeout=30)
        time.sleep(4.5)  # past the timeout and the SDK's back-off: a retry would have arrived by now
        assert after_stop(fake.server.received, stopped_at) == []
        assert len(fake.server.received) == 1
        assert row(db, execution_id)["status"] == "cancelled"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)


def test_kill9_mid_stream_the_task_runs_again_and_the_call_is_not_sent_twice(world):
    fake, env, db = world
    fake.chunk_delay = 0.1
    (execution_id,) = submit(env, " ".join(f"word{i}" for i in range(300)))
    proc = worker(env)
    wait_for(lambda: len(row(db, execution_id)["partial_text"]) > 20)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert row(db, execution_id)["status"] == "processing"
    assert len(fake.requests) == 1
    with sqlite3.connect(db) as conn:  # the dead worker's lease expired: its task is READY again
        released = conn.execute(
            "UPDATE django_tasks_database_dbtaskresult SET status = 'READY' WHERE status = 'RUNNING'"
        ).rowcount
    assert released == 1
    again = worker(env, "--batch")
    out = again.communicate(timeout=120)[0]
    assert again.returncode == 0, out
    ended = row(db, execution_id)
    assert ended["status"] == "failed" and ended["error_code"] == "EXECUTION_INTERRUPTED"
    assert "not sent again" in ended["error_message"]
    assert ended["response_text"].startswith("Echo: word0")  # what had arrived stays shown
    assert len(fake.requests) == 1  # no second provider call
    with sqlite3.connect(db) as conn:
        status = conn.execute("SELECT status FROM runs_run WHERE run_id = ?", (ended["run_id"],)).fetchone()[
            0
        ]
    assert status == "failed"
