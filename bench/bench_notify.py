"""Notifications: what a webhook adds to an append, and commit-to-receiver latency.

1. Median time of one append (`do_command`, one event per transaction) in a workspace with
   - no webhook and nobody's e-mail choice (the common case: one small EXISTS query),
   - an enabled webhook, the append notifying nobody (an annotation: the watcher compares),
   - an enabled webhook and every append writing an outbox row (a gate requested each time),
     with the task recorded by the dummy backend, and with django-tasks-db's task row as well.
2. Commit-to-receiver latency of gate.requested in the embedded profile (django-tasks-db's task
   row, run by `manage.py worker`'s loop with its default 4 threads and 0.5 s poll, here on threads
   of this process) to a loopback receiver, p50 / p99 over BENCH_NOTIFY_MESSAGES messages.

Environment: BENCH_NOTIFY_APPENDS (default 400), BENCH_NOTIFY_MESSAGES (default 200),
BENCH_NOTIFY_DB (default: a SQLite file in a temporary directory; a postgres:// URL works too).
Figures only; no target is asserted.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

APPENDS = int(os.environ.get("BENCH_NOTIFY_APPENDS", "400"))
MESSAGES = int(os.environ.get("BENCH_NOTIFY_MESSAGES", "200"))
TMP = Path(tempfile.mkdtemp(prefix="bench_notify_"))
os.environ["DATABASE_URL"] = os.environ.get("BENCH_NOTIFY_DB") or f"sqlite:///{TMP / 'notify.sqlite3'}"
os.environ.setdefault("WORKBENCH_VAR_DIR", str(TMP))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
os.environ.setdefault("DEBUG", "0")
os.environ.setdefault("SECRET_KEY", "bench-notify-not-secret-" + "x" * 40)
os.environ["WORKBENCH_TASKS_BACKEND"] = "dummy"  # each phase below picks its backend
os.environ["WORKBENCH_EGRESS_ALLOW"] = "127.0.0.0/8"  # the receiver listens on loopback
os.environ["WORKBENCH_TRANSCRIPTS"] = "0"

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.tasks import task_backends  # noqa: E402
from django.utils.module_loading import import_string  # noqa: E402

from runs import actions  # noqa: E402
from runs.actions.webhooks import do_create_webhook  # noqa: E402
from runs.actions.workspaces import get_or_create_workspace  # noqa: E402
from runs.background.worker import Worker  # noqa: E402
from runs.engine import commands as c  # noqa: E402
from runs.models import Delivery  # noqa: E402
from tests.fakes.webhook_receiver import Receiver  # noqa: E402

WORKFLOW = {
    "id": "wf-notify",
    "version": 1,
    "steps": [{"id": "work"}, {"id": "review", "gatePolicy": "PAUSE_BEFORE"}],
    "edges": [{"id": "e1", "from": "work", "to": "review"}],
}


def use_backend(path: str) -> None:
    task_backends["default"] = import_string(path)(
        alias="default", params={"BACKEND": path, "QUEUES": ["default", "notifications"]}
    )


def timed_pair(a: tuple, b: tuple, commands_for, *, every: int = 1) -> tuple[float, float]:
    """Median seconds of one append to run a and to run b, interleaved (a, b, a, b ...) so that
    the machine's load drifts over both alike; commands_for(i) -> the i-th command of each run;
    only every ``every``-th append is counted."""
    samples: dict[int, list[float]] = {0: [], 1: []}
    for i in range(APPENDS):
        command = commands_for(i)
        for k, (workspace, run_id) in enumerate((a, b)):
            started = time.perf_counter()
            actions.do_command(workspace=workspace, run_id=run_id, command=command, actor="bench")
            if i % every == 0:
                samples[k].append(time.perf_counter() - started)
    return statistics.median(samples[0]), statistics.median(samples[1])


def gate_cycle(i: int):
    # even: the gate starts waiting (one outbox row); odd: it is decided (nothing subscribed)
    if i % 2 == 0:
        return c.RequestGate(step_id="work", gate="CHECKPOINT", checkpoint=f"c{i}")
    return c.ResolveGate(step_id="work", gate="CHECKPOINT", checkpoint=f"c{i - 1}", decision="approved")


def append_costs() -> None:
    use_backend("django.tasks.backends.dummy.DummyBackend")
    quiet = get_or_create_workspace("quiet")
    hooked = get_or_create_workspace("hooked")
    do_create_webhook(workspace=hooked, url="http://127.0.0.1:9/never", events=["gate.requested"])
    for workspace in (quiet, hooked):
        for run_id in ("run_notes", "run_gates", "run_gates_db"):
            actions.do_start_run(workspace=workspace, workflow=WORKFLOW, run_id=run_id)
    base, watched = timed_pair(
        (quiet, "run_notes"), (hooked, "run_notes"), lambda i: c.Annotate(text=f"n{i}")
    )
    base_gates, rows = timed_pair((quiet, "run_gates"), (hooked, "run_gates"), gate_cycle, every=2)
    use_backend("django_tasks_db.DatabaseBackend")
    base_db, rows_db = timed_pair((quiet, "run_gates_db"), (hooked, "run_gates_db"), gate_cycle, every=2)
    Delivery.objects.all().delete()

    print(
        f"append (one event per transaction, median of {APPENDS}, {os.environ['DATABASE_URL'].split(':')[0]}):"
    )
    print(f"  annotation, no webhook                    {base * 1e3:7.3f} ms")
    print(
        f"  annotation, a webhook (nothing to say)    {watched * 1e3:7.3f} ms  (+{(watched - base) * 1e6:.0f} us)"
    )
    print(f"  a gate starts waiting, no webhook         {base_gates * 1e3:7.3f} ms")
    print(
        f"  a gate starts waiting, a webhook          {rows * 1e3:7.3f} ms  (+{(rows - base_gates) * 1e6:.0f} us:"
        " reads the hooks, writes the outbox row)"
    )
    print(
        f"  ... with django-tasks-db's task row too   {rows_db * 1e3:7.3f} ms  (+{(rows_db - base_db) * 1e6:.0f} us)"
    )


def latency() -> None:
    use_backend("django_tasks_db.DatabaseBackend")
    ws = get_or_create_workspace("latency")
    actions.do_start_run(workspace=ws, workflow=WORKFLOW, run_id="run_latency")
    worker = Worker(queues=["notifications"], threads=4, interval=0.5)
    worker.start()
    with Receiver() as rx:
        do_create_webhook(workspace=ws, url=rx.url, events=["gate.requested"])
        committed: list[float] = []
        for i in range(MESSAGES * 2):
            command = gate_cycle(i)
            actions.do_command(workspace=ws, run_id="run_latency", command=command, actor="bench")
            if i % 2 == 0:
                committed.append(time.time())
                rx.wait_for(len(committed), timeout=10)
        hits = rx.wait_for(MESSAGES, timeout=30)
    worker.stop(grace=5)
    order = {}
    for hit in hits:
        order[hit.json["data"]["gate"]["checkpoint"]] = hit.at
    waits = sorted(order[f"c{2 * n}"] - committed[n] for n in range(len(committed)) if f"c{2 * n}" in order)
    p50 = statistics.median(waits)
    p99 = waits[min(len(waits) - 1, int(len(waits) * 0.99))]
    print(
        f"commit -> receiver, gate.requested, embedded (task row + worker, 4 threads), {len(waits)} messages:"
    )
    print(f"  p50 {p50 * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms, max {waits[-1] * 1e3:.1f} ms")


def main() -> None:
    call_command("migrate", verbosity=0)
    append_costs()
    latency()


if __name__ == "__main__":
    main()
