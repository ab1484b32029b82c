"""Periodic work as tasks: each job is one task row that runs it and enqueues the next (``run_after``).

A job is registered with :func:`register` (name, function, interval in seconds). Workers call
:func:`ensure_scheduled` when they start and once a minute: a job with no waiting or running
task row gets one. The check and the insert happen in one exclusive transaction (SQLite) or under
an advisory lock (PostgreSQL), so N workers starting together enqueue one row, not N; and a run
that finds another row of its job waiting enqueues no next one, so a chain doubled anyway folds
back into one.

Idempotence: every job here is a sweep over durable rows (the outbox, quiet OTLP runs, old rows to
prune, jobs whose task is gone); running one twice, or two at once, finds nothing more to do.
"""

from __future__ import annotations

import logging
import zlib
from dataclasses import dataclass
from datetime import timedelta

from django.db import connection
from django.tasks import TaskContext, task
from django.utils import timezone
from django.utils.module_loading import import_string
from django_tasks_db.compat import TaskResultStatus
from django_tasks_db.models import DBTaskResult
from django_tasks_db.utils import exclusive_transaction

log = logging.getLogger("workbench.periodic")

QUEUE = "default"


@dataclass(frozen=True)
class Job:
    name: str
    path: str  # the dotted path of a function taking no argument (imported when it runs)
    every: float | str  # seconds, or the dotted path of a function answering them

    def run(self) -> object:
        return import_string(self.path)()

    def interval(self) -> float:
        return float(import_string(self.every)() if isinstance(self.every, str) else self.every)


JOBS: dict[str, Job] = {}


def register(name: str, path: str, every: float | str) -> None:
    """Run the function at ``path`` every ``every`` seconds on the workers (AppConfig.ready;
    paths, not functions, so that registering imports nothing)."""
    JOBS[name] = Job(name, path, every)


@task(queue_name=QUEUE, takes_context=True)
def periodic(context: TaskContext, name: str) -> str:
    """Run the periodic job ``name``, then enqueue its next run (unless another row of it waits)."""
    job = JOBS.get(name)
    if job is None:
        return "unknown"
    try:
        job.run()
    finally:
        schedule_next(name, job, exclude=context.task_result.id)
    return "ok"


def _pending(name: str):
    return DBTaskResult.objects.filter(
        task_path=periodic.module_path,
        status__in=[TaskResultStatus.READY, TaskResultStatus.RUNNING],
        args_kwargs__args__0=name,
    )


def _lock(name: str) -> None:
    """Inside ``exclusive_transaction`` (SQLite: one writer at a time already), PostgreSQL's
    advisory transaction lock: two workers checking for the same job's row one after the other."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [zlib.crc32(f"periodic:{name}".encode())])


def schedule_next(name: str, job: Job, *, exclude=None) -> bool:
    """Enqueue the job's next run ``every`` seconds from now, unless another row of it waits."""
    with exclusive_transaction():
        _lock(name)
        if _pending(name).exclude(id=exclude).exists():
            return False
        periodic.using(run_after=timezone.now() + timedelta(seconds=job.interval())).enqueue(name)
    return True


def ensure_scheduled() -> int:
    """Give every registered job without a waiting or running row one, due now. Returns how many."""
    added = 0
    for name in sorted(JOBS):
        with exclusive_transaction():
            _lock(name)
            if not _pending(name).exists():
                periodic.enqueue(name)
                added += 1
    return added
