"""The task worker behind ``manage.py worker``: django-tasks-db's own worker loop, on N threads,
with a lease per process.

What the library does and this module only reuses: task rows (``DBTaskResult``), claiming (a
``SELECT ... FOR UPDATE SKIP LOCKED`` on PostgreSQL, an exclusive transaction on SQLite), running
a task and recording its result (``django_tasks_db``'s ``Worker.run`` / ``Worker.run_task``).

What it adds, because django-tasks-db 0.13 has neither:

* **Threads.** Each process runs ``threads`` copies of the library's loop (each its own database
  connection), so one slow task never holds the others up.
* **A lease.** The process writes a :class:`~runs.models.WorkerLease` heartbeat every
  ``lease / 5`` seconds; a task row left ``RUNNING`` under a worker whose lease expired (killed,
  machine gone) is put back to ``READY`` by any live worker and runs again: at least once.
* **Graceful stop.** SIGTERM / SIGINT: claim nothing more, let the running tasks finish for up to
  ``grace`` seconds, then put what still runs back to ``READY`` and exit; a second signal does that
  at once.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
import time
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection
from django.tasks import task
from django.utils import timezone
from django.utils.crypto import get_random_string
from django_tasks_db.compat import TaskResultStatus
from django_tasks_db.management.commands.db_worker import Worker as LibraryWorker
from django_tasks_db.models import DBTaskResult

from runs.background import periodic
from runs.models import WorkerLease

log = logging.getLogger("workbench.worker")

DEFAULT_QUEUES = ("default", "notifications")


def lease_seconds() -> float:
    return float(getattr(settings, "WORKBENCH_WORKER_LEASE_SECONDS", 30))


def new_worker_id() -> str:
    host = socket.gethostname()[:40]
    return f"{host}-{os.getpid()}-{get_random_string(8)}"[-64:]


def running_under(worker_ids: set[str] | None = None, *, exclude: set[str] | None = None) -> list[Any]:
    """Ids of the task rows RUNNING whose last claim is by one of ``worker_ids`` (or by none of
    ``exclude``). Few rows are RUNNING at a time; their claims are read here, not in SQL (the
    last item of a JSON list is not portable between SQLite and PostgreSQL)."""
    ids: list[Any] = []  # the rows' primary keys (UUIDs)
    for pk, claims in DBTaskResult.objects.running().values_list("id", "worker_ids"):
        last = claims[-1] if claims else ""
        if (worker_ids is not None and last in worker_ids) or (exclude is not None and last not in exclude):
            ids.append(pk)
    return ids


def release(task_ids: list) -> int:
    """Put RUNNING task rows back to READY (the next worker to claim them runs them again)."""
    if not task_ids:
        return 0
    return DBTaskResult.objects.filter(id__in=task_ids, status=TaskResultStatus.RUNNING).update(
        status=TaskResultStatus.READY, started_at=None
    )


def recover_expired(now=None) -> int:
    """Tasks RUNNING under a worker whose lease expired (or that holds none and started more than
    a lease ago) go back to READY; the expired leases are deleted. Returns the tasks released."""
    now = now or timezone.now()
    horizon = now - timedelta(seconds=lease_seconds())
    WorkerLease.objects.filter(heartbeat_at__lt=horizon).delete()
    live = set(WorkerLease.objects.values_list("worker_id", flat=True))
    orphans = running_under(exclude=live)
    if orphans:
        # a task claimed a moment ago by a worker whose lease row is not written yet stays
        orphans = list(
            DBTaskResult.objects.filter(id__in=orphans, started_at__lt=horizon).values_list("id", flat=True)
        )
    released = release(orphans)
    if released:
        log.warning("released %d task(s) of worker(s) whose lease expired", released)
    return released


@task()
def ping() -> str:
    """Does nothing (the latency benchmark's probe). Idempotent: it changes nothing."""
    return "pong"


class _Loop(LibraryWorker):
    """The library's loop on one thread; ``running`` is cleared by the process on a signal."""

    current: DBTaskResult | None = None

    def run_task(self, db_task_result: DBTaskResult) -> None:
        self.current = db_task_result
        try:
            super().run_task(db_task_result)
        finally:
            self.current = None


class Worker:
    """One ``manage.py worker`` process: ``threads`` claim loops, a heartbeat, the periodic tasks."""

    def __init__(
        self,
        *,
        queues: list[str],
        threads: int = 4,
        interval: float = 0.5,
        grace: float = 30.0,
        worker_id: str | None = None,
        backend: str = "default",
    ) -> None:
        self.queues = queues
        self.worker_id = worker_id or new_worker_id()
        self.grace = grace
        self.stopping = threading.Event()
        self.loops = [
            _Loop(
                queue_names=queues,
                interval=interval,
                batch=False,
                backend_name=backend,
                startup_delay=False,
                max_tasks=None,
                worker_id=self.worker_id,
                excluded_queue_names=[],
            )
            for _ in range(max(1, threads))
        ]
        self.threads: list[threading.Thread] = []

    # -- lease
    def heartbeat(self) -> None:
        WorkerLease.objects.update_or_create(
            worker_id=self.worker_id,
            defaults={
                "heartbeat_at": timezone.now(),
                "hostname": socket.gethostname()[:200],
                "pid": os.getpid(),
                "queues": ",".join(self.queues)[:400],
                "threads": len(self.loops),
            },
        )

    def _keep_lease(self) -> None:
        beat = max(0.2, lease_seconds() / 5)
        last_periodic = 0.0
        while not self.stopping.wait(beat):
            try:
                self.heartbeat()
                recover_expired()
                if time.monotonic() - last_periodic > 60:  # a lost periodic chain is started again
                    periodic.ensure_scheduled()
                    last_periodic = time.monotonic()
            except Exception:  # the database is away or locked: try again at the next beat
                log.warning("worker %s: heartbeat failed", self.worker_id, exc_info=True)
            finally:
                close_old_connections()
        connection.close()

    # -- running
    def _thread_main(self, loop: _Loop, index: int) -> None:
        # staggered: idle threads poll one after the other, not together (a new task waits about
        # interval / threads, not interval / 2)
        time.sleep(index * loop.interval / len(self.loops))
        try:
            loop.run()
        except Exception:
            log.exception("worker %s: a task loop stopped", self.worker_id)
        finally:
            connection.close()

    def start(self) -> None:
        self.heartbeat()
        recover_expired()
        periodic.ensure_scheduled()
        close_old_connections()
        lease = threading.Thread(target=self._keep_lease, name="worker-lease", daemon=True)
        lease.start()
        self.threads = [lease]
        for index, loop in enumerate(self.loops):
            thread = threading.Thread(
                target=self._thread_main, args=(loop, index), name=f"worker-{index}", daemon=True
            )
            thread.start()
            self.threads.append(thread)
        log.info("worker %s: %d thread(s) on %s", self.worker_id, len(self.loops), ",".join(self.queues))

    def request_stop(self) -> None:
        for loop in self.loops:
            loop.running = False

    def busy(self) -> bool:
        return any(t.is_alive() for t in self.threads[1:])

    def stop(self, *, grace: float | None = None) -> int:
        """Stop claiming, wait up to ``grace`` seconds for running tasks, release the rest, drop
        the lease. Returns how many tasks were released."""
        self.request_stop()
        deadline = time.monotonic() + (self.grace if grace is None else grace)
        for thread in self.threads[1:]:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        self.stopping.set()
        close_old_connections()
        released = release(running_under({self.worker_id}))
        if released:
            log.warning("worker %s: released %d unfinished task(s)", self.worker_id, released)
        WorkerLease.objects.filter(worker_id=self.worker_id).delete()
        connection.close()
        return released

    def serve(self) -> int:
        """Run until SIGTERM/SIGINT (the process's main thread); returns the tasks released."""
        signals: list[int] = []

        def on_signal(signum, frame) -> None:
            signals.append(signum)
            self.request_stop()
            if len(signals) > 1:
                log.warning("worker %s: second signal, releasing running tasks", self.worker_id)

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, on_signal)
        self.start()
        while not signals and self.busy():
            time.sleep(0.2)
        if signals:
            log.info(
                "worker %s: stopping (waiting up to %.0f s for running tasks)", self.worker_id, self.grace
            )
        deadline = time.monotonic() + self.grace
        while self.busy() and len(signals) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        return self.stop(grace=0)


def run_once(*, queues: list[str] | tuple[str, ...] = DEFAULT_QUEUES, worker_id: str = "run-once") -> bool:
    """Claim and run one ready task in this thread (tests, scripts); False when none was ready."""
    loop = _Loop(
        queue_names=list(queues),
        interval=0,
        batch=True,
        backend_name="default",
        startup_delay=False,
        max_tasks=1,
        worker_id=worker_id,
        excluded_queue_names=[],
    )
    before = loop._run_tasks
    loop.run()
    return loop._run_tasks > before


def run_until_idle(*, queues: list[str] | tuple[str, ...] = DEFAULT_QUEUES, limit: int = 1000) -> int:
    """Run ready tasks in this thread until none is ready (tests); returns how many ran."""
    ran = 0
    while ran < limit and run_once(queues=queues):
        ran += 1
    return ran
