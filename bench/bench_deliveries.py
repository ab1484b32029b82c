"""Delivery latency while other hooks hang (issue 47): commit -> receiver of workspace A's
gate.requested, p50 / p99, with

1. no other hook, and
2. 4 hooks of workspace B at a loopback server that accepts every connection and never answers
   (4 deliveries to B before each of A's).

One worker thread runs the notification task (``deliver_notifications``) again and again, as a
worker with one thread would; the settings are the defaults (16 attempts in flight per task, 2 per
hook, 8 per host, a 15 s deadline), so B's attempts hang for the whole measurement. A's receiver
is a fast loopback one. Environment: BENCH_DELIVERIES_MESSAGES (default 100), BENCH_DELIVERIES_DB
(default: a SQLite file in a temporary directory; a postgres:// URL works too).
Figures only; no target is asserted.
"""

from __future__ import annotations

import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MESSAGES = int(os.environ.get("BENCH_DELIVERIES_MESSAGES", "100"))
TMP = Path(tempfile.mkdtemp(prefix="bench_deliveries_"))
os.environ["DATABASE_URL"] = (
    os.environ.get("BENCH_DELIVERIES_DB") or f"sqlite:///{TMP / 'deliveries.sqlite3'}"
)
os.environ.setdefault("WORKBENCH_VAR_DIR", str(TMP))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
os.environ.setdefault("DEBUG", "0")
os.environ.setdefault("SECRET_KEY", "bench-deliveries-not-secret-" + "x" * 40)
os.environ["WORKBENCH_TASKS_BACKEND"] = "dummy"  # the worker thread below runs the task
os.environ["WORKBENCH_EGRESS_ALLOW"] = "127.0.0.0/8"  # the receivers listen on loopback
os.environ["WORKBENCH_TRANSCRIPTS"] = "0"

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import close_old_connections  # noqa: E402

from runs import actions  # noqa: E402
from runs.actions.webhooks import do_create_webhook  # noqa: E402
from runs.actions.workspaces import get_or_create_workspace  # noqa: E402
from runs.engine import commands as c  # noqa: E402
from runs.notifications.tasks import deliver_notifications  # noqa: E402
from tests.fakes.webhook_receiver import Receiver  # noqa: E402

WORKFLOW = {
    "id": "wf-deliveries",
    "version": 1,
    "steps": [{"id": "work"}, {"id": "review", "gatePolicy": "PAUSE_BEFORE"}],
    "edges": [{"id": "e1", "from": "work", "to": "review"}],
}


class Hang:
    """Accepts every connection and never answers."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                self.held.append(self.sock.accept()[0])
            except OSError:
                return

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def close(self) -> None:
        self.sock.close()
        for conn in self.held:
            conn.close()


def worker(stop: threading.Event) -> None:
    try:
        while not stop.is_set():
            deliver_notifications.call()
            stop.wait(0.02)
    finally:
        close_old_connections()


def gate(workspace, run_id: str, i: int, decide: bool = False) -> None:
    command = (
        c.ResolveGate(step_id="work", gate="CHECKPOINT", checkpoint=f"c{i}", decision="approved")
        if decide
        else c.RequestGate(step_id="work", gate="CHECKPOINT", checkpoint=f"c{i}")
    )
    actions.do_command(workspace=workspace, run_id=run_id, command=command, actor="bench")


def measure(label: str, hanging: int) -> None:
    a = get_or_create_workspace(f"a-{hanging}")
    b = get_or_create_workspace(f"b-{hanging}")
    actions.do_start_run(workspace=a, workflow=WORKFLOW, run_id="run_a")
    actions.do_start_run(workspace=b, workflow=WORKFLOW, run_id="run_b")
    hang = Hang()
    stop = threading.Event()
    thread = threading.Thread(target=worker, args=(stop,), daemon=True)
    try:
        with Receiver() as rx:
            do_create_webhook(workspace=a, url=rx.url, events=["gate.requested"])
            for n in range(hanging):
                do_create_webhook(workspace=b, url=f"{hang.url}/b{n}", events=["gate.requested"])
            thread.start()
            committed: dict[str, float] = {}
            for i in range(MESSAGES):
                gate(b, "run_b", i)
                gate(a, "run_a", i)
                committed[f"c{i}"] = time.time()
                time.sleep(0.05)
                gate(a, "run_a", i, decide=True)
                gate(b, "run_b", i, decide=True)
            hits = rx.wait_for(MESSAGES, timeout=60)
    finally:
        stop.set()
        hang.close()
        thread.join(timeout=settings.WORKBENCH_NOTIFY_DEADLINE + 10)
    waits = sorted(hit.at - committed[hit.json["data"]["gate"]["checkpoint"]] for hit in hits)
    p50 = statistics.median(waits)
    p99 = waits[min(len(waits) - 1, int(len(waits) * 0.99))]
    print(
        f"  {label:34} {len(waits):4d} messages  p50 {p50 * 1e3:7.1f} ms  p99 {p99 * 1e3:7.1f} ms"
        f"  max {waits[-1] * 1e3:7.1f} ms  ({len(hang.held)} hanging connections)"
    )


def main() -> None:
    call_command("migrate", verbosity=0)
    print(
        f"commit -> receiver, workspace A's gate.requested, one worker thread, {os.environ['DATABASE_URL'].split(':')[0]}"
        f" (deadline {settings.WORKBENCH_NOTIFY_DEADLINE:g} s, {settings.WORKBENCH_NOTIFY_CONCURRENCY} in flight"
        f" per task, {settings.WORKBENCH_NOTIFY_PER_HOOK} per hook, {settings.WORKBENCH_NOTIFY_PER_HOST} per host):"
    )
    measure("no other hook", 0)
    measure("4 hooks of B that never answer", 4)


if __name__ == "__main__":
    main()
