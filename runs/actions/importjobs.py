"""Large bundle imports as background jobs (Django's tasks framework), with progress.

:func:`do_create_import_job` keeps the bundle in ``var/imports`` (0600 files in a 0700 folder) and
enqueues ``import_bundle_task`` in the same transaction (the task row is django-tasks-db's: the
job and its task are committed together, or neither is); the task (:func:`run_import_job`) imports it with the streamed path
(:func:`runs.actions.bigimport.do_import_bundle_file`: bounded memory, COPY on PostgreSQL, one
transaction) and records the outcome on the :class:`~runs.models.ImportJob` row. Progress (events
stored, bytes read) is written by a thread of its own, on its own database connection, at most
once a second: the import's transaction holds its rows until the end, the job row does not wait
for it. On SQLite (one writer at a time) progress is written only when the job ends.

A failed job stored nothing (the import's transaction rolled back) and says why with the code
the synchronous import would answer. The bundle file is removed when the job ends either way.
A job whose worker died is taken over by the same task row when the worker's lease expires
(``runs.background.worker``); after ``MAX_ATTEMPTS`` starts, or when its task row is gone
(:func:`recover_import_jobs`, a periodic task), it ends ``failed`` with the reason in words.

Cancel (:func:`do_cancel_import_job`): a queued job ends ``failed`` at once (code ``CANCELLED``,
"cancelled by <user>"); a running one is told through a file beside its bundle
(``<job>.cancel``, 0600), which the import looks at after every batch and once more before it
commits: the import's transaction may hold SQLite's one write lock until its end, so a flag in
the database could not reach it. The import rolls back (nothing stored) and deletes its files.
"""

from __future__ import annotations

import logging
import os
import threading
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.db.models import F, Q
from django.tasks import TaskContext, task
from django.utils import timezone
from django_tasks_db.compat import TaskResultStatus
from django_tasks_db.models import DBTaskResult

from runs.actions.bigimport import NotStreamable, do_import_bundle_file
from runs.actions.bundles import do_import_bundle
from runs.actions.core import ActionError
from runs.models import Event, ImportJob, ImportJobStatus, Workspace
from runs.protocol.errors import ErrorCode
from runs.protocol.values import new_id

log = logging.getLogger("workbench.imports")


MAX_ATTEMPTS = 3
WORKER_LOST = "WORKER_LOST"
CANCELLED = "CANCELLED"
OPEN = (ImportJobStatus.QUEUED, ImportJobStatus.RUNNING)


class ImportCancelled(Exception):
    """Raised inside the import's transaction once Cancel was pressed: it rolls back."""

    def __init__(self, by: str) -> None:
        super().__init__(by)
        self.by = by


def import_dir() -> Path:
    """``var/imports``: uploads and bundles waiting for their job, readable by this user only."""
    path = Path(settings.VAR_DIR) / "imports"
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    if path.stat().st_mode & 0o777 != 0o700:
        path.chmod(0o700)
    return path


def open_private(path: Path):
    """Open ``path`` for writing as a new 0600 file (whatever the umask)."""
    return open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb")


def async_threshold() -> int:
    """Bundles from this many bytes on are imported as a job (``WORKBENCH_IMPORT_ASYNC_BYTES``)."""
    return int(getattr(settings, "WORKBENCH_IMPORT_ASYNC_BYTES", 8 * 1024 * 1024))


def do_create_import_job(
    *, workspace: Workspace, data: bytes | None = None, path: Path | None = None, actor: str = "",
    as_new_id: bool = False,
) -> ImportJob:  # fmt: skip
    """Keep the bundle (``data``, or the file at ``path``, moved) and queue its import."""
    job_id = new_id("imp")
    target = import_dir() / f"{job_id}.json"
    if path is not None:
        Path(path).replace(target)
        target.chmod(0o600)
    else:
        with open_private(target) as out:
            out.write(data or b"")
    try:
        with transaction.atomic():
            job = ImportJob.objects.create(
                job_id=job_id,
                workspace=workspace,
                file=target.name,
                size=target.stat().st_size,
                as_new_id=as_new_id,
                created_by=actor[:200],
            )
            result = import_bundle_task.enqueue(job.pk)  # a row in this transaction
            job.task_id = str(result.id)
            job.save(update_fields=["task_id"])
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    return job


@task(takes_context=True)
def import_bundle_task(context: TaskContext, job_pk: int) -> str:
    """Import one bundle job.

    Idempotent: the job is claimed by this task row (``ImportJob.task_id``) with a conditional
    update, so another row for the same job finds it taken and does nothing; a re-run of this row
    after its worker died takes it over (the dead attempt's transaction rolled back: nothing was
    stored); the run and the job's ``succeeded`` are committed in one transaction, so a job is
    never imported twice."""
    return run_import_job(job_pk, task_id=str(context.task_result.id)).status


def cancel_marker(job: ImportJob) -> Path:
    """The file that tells a running import its Cancel (its content: who pressed it)."""
    return import_dir() / f"{job.job_id}.cancel"


def cancelled_by(job: ImportJob) -> str | None:
    """Who cancelled ``job`` while it ran (None: nobody)."""
    try:
        return cancel_marker(job).read_text(encoding="utf-8").strip() or "someone"
    except FileNotFoundError:
        return None


def _cancel_message(by: str) -> str:
    return f"cancelled by {by.removeprefix('user:') or 'someone'}; nothing was stored"


def do_cancel_import_job(job: ImportJob, *, actor: str) -> ImportJob:
    """Cancel ``job``: a queued one ends ``failed`` (``CANCELLED``) now and its bundle is deleted;
    a running one is told (:func:`cancel_marker`) and ends so at its next batch, storing nothing.
    A job that already ended is refused with ``CONFLICT`` (nothing changes)."""
    job.refresh_from_db()
    if job.status not in OPEN:
        raise ActionError("CONFLICT", f"the import already ended ({job.status}): there is nothing to cancel")
    who = actor[:200] or "someone"
    ended = 0
    if job.status == ImportJobStatus.QUEUED:  # a running one is not written to: see the module's notes
        ended = ImportJob.objects.filter(pk=job.pk, status=ImportJobStatus.QUEUED).update(
            status=ImportJobStatus.FAILED, error_code=CANCELLED, error_message=_cancel_message(who),
            events=0, finished_at=timezone.now(),
        )  # fmt: skip
    if ended:
        (import_dir() / job.file).unlink(missing_ok=True)
    else:
        marker = cancel_marker(job)
        with open_private(marker) as out:
            out.write(who.encode())
        job.refresh_from_db()
        if job.status not in OPEN:  # it ended meanwhile: nobody will read the marker
            marker.unlink(missing_ok=True)
    job.refresh_from_db()
    return job


class _ProgressWriter:
    """Writes (events, bytes) to the job row from a thread of its own, at most once a second;
    every report also looks for the job's Cancel (:class:`ImportCancelled`)."""

    def __init__(self, job_pk: int, marker: Path) -> None:
        self.job_pk = job_pk
        self.marker = marker
        self.latest: tuple[int, int] | None = None
        self.done = threading.Event()
        self.live = connection.vendor != "sqlite"
        self.thread = threading.Thread(target=self._loop, name="import-progress", daemon=True)
        if self.live:
            self.thread.start()

    def __call__(self, events: int, bytes_read: int) -> None:
        self.latest = (events, bytes_read)
        self.check()

    def check(self) -> None:
        """Raise :class:`ImportCancelled` when Cancel was pressed (one stat of the marker file)."""
        if self.marker.exists():
            raise ImportCancelled(self.marker.read_text(encoding="utf-8").strip() or "someone")

    def _loop(self) -> None:
        written = None
        try:
            while not self.done.wait(1.0):
                latest = self.latest
                if latest is not None and latest != written:
                    ImportJob.objects.filter(pk=self.job_pk).update(events=latest[0], bytes_read=latest[1])
                    written = latest
        finally:
            close_old_connections()
            connection.close()

    def stop(self) -> None:
        self.done.set()
        if self.live:
            self.thread.join()


def run_import_job(job_pk: int, *, task_id: str = "") -> ImportJob:
    """Import a queued job's bundle (the task's body; a job that is not queued is left alone,
    unless it is running under this same task row: a re-run after its worker died)."""
    claim = Q(status=ImportJobStatus.QUEUED)
    if task_id:
        claim |= Q(status=ImportJobStatus.RUNNING, task_id=task_id)
    claimed = ImportJob.objects.filter(claim, pk=job_pk).update(
        status=ImportJobStatus.RUNNING, started_at=timezone.now(), attempts=F("attempts") + 1,
        **({"task_id": task_id} if task_id else {}),
    )  # fmt: skip
    job = ImportJob.objects.select_related("workspace").get(pk=job_pk)
    path = import_dir() / job.file
    if not claimed:
        if job.status in (ImportJobStatus.SUCCEEDED, ImportJobStatus.FAILED):
            path.unlink(missing_ok=True)  # ended by an attempt killed before it deleted the file
            cancel_marker(job).unlink(missing_ok=True)
        return job
    if job.attempts > MAX_ATTEMPTS:
        fail_job(
            job,
            f"the import was started {MAX_ATTEMPTS} times and its worker stopped each time "
            "(killed, or out of memory); nothing was stored",
        )
        job.refresh_from_db()
        return job
    progress = _ProgressWriter(job.pk, cancel_marker(job))
    fields: dict[str, object] = {}
    try:
        with transaction.atomic():  # the run and the job's outcome: committed together
            progress.check()
            try:
                run = do_import_bundle_file(
                    workspace=job.workspace, path=path, actor=job.created_by, as_new_id=job.as_new_id,
                    progress=progress,
                )  # fmt: skip
            except NotStreamable:  # an older protocol version: the in-memory path migrates it
                run = do_import_bundle(
                    workspace=job.workspace,
                    data=path.read_bytes(),
                    actor=job.created_by,
                    as_new_id=job.as_new_id,
                )
            progress.check()  # a Cancel pressed during the last batch: still nothing stored
            fields = {"status": ImportJobStatus.SUCCEEDED, "run_id": run.run_id, "events": run.last_seq}
            ImportJob.objects.filter(pk=job.pk).update(
                **fields, bytes_read=job.size, finished_at=timezone.now()
            )
    except ImportCancelled as exc:
        fields = {
            "status": ImportJobStatus.FAILED,
            "error_code": CANCELLED,
            "error_message": _cancel_message(exc.by),
        }
    except ActionError as exc:
        fields = {
            "status": ImportJobStatus.FAILED,
            "error_code": exc.code,
            "error_message": exc.message[:2000],
        }
    except OSError as exc:
        fields = {
            "status": ImportJobStatus.FAILED,
            "error_code": ErrorCode.INVALID_INPUT,
            "error_message": f"the uploaded bundle cannot be read: {exc.strerror}",
        }
    except Exception:
        log.exception("import job %s failed", job.job_id)
        fields = {
            "status": ImportJobStatus.FAILED,
            "error_code": "INTERNAL_ERROR",
            "error_message": "the import failed on the server; nothing was stored",
        }
    finally:
        progress.stop()
        path.unlink(missing_ok=True)
        progress.marker.unlink(missing_ok=True)
        if fields.get("status") != ImportJobStatus.SUCCEEDED:
            if not fields:  # interrupted (the worker stops): the next attempt, or recovery, ends it
                fields = {
                    "status": ImportJobStatus.FAILED,
                    "error_code": WORKER_LOST,
                    "error_message": "the import was interrupted (its worker stopped); nothing was stored",
                }
            fields["events"] = 0  # the transaction rolled back: nothing is stored
            fields["bytes_read"] = (progress.latest or (0, 0))[1]
            fields["finished_at"] = timezone.now()
            ImportJob.objects.filter(pk=job.pk).update(**fields)
    if fields.get("status") == ImportJobStatus.SUCCEEDED:
        settle_events_table(n if isinstance(n := fields.get("events"), int) else 0)
    job.refresh_from_db()
    return job


def settle_events_table(events: int) -> bool:
    """After an import stored ``events`` events: on PostgreSQL, from ``WORKBENCH_IMPORT_VACUUM_EVENTS``
    on, ``VACUUM (ANALYZE)`` the event table. Until a vacuum sets its visibility map, every
    index-only read of the new rows also reads their heap pages (the run page of a 1M-event import
    counts its step starts that way: 397 ms, 57 ms after a 1.2 s vacuum), and until an analyze the
    planner knows nothing of them. Autovacuum would do both, minutes later. Returns whether it ran."""
    threshold = int(getattr(settings, "WORKBENCH_IMPORT_VACUUM_EVENTS", 100_000))
    if not threshold or events < threshold or connection.vendor != "postgresql" or connection.in_atomic_block:
        return False
    try:
        with connection.cursor() as cursor:
            cursor.execute(f"VACUUM (ANALYZE) {connection.ops.quote_name(Event._meta.db_table)}")
    except Exception:  # the import is stored: a vacuum that could not run is autovacuum's to do
        log.warning("VACUUM after an import of %d events failed", events, exc_info=True)
        return False
    return True


def fail_job(job: ImportJob, reason: str) -> bool:
    """End a job that is not done ``failed`` with ``reason``, and delete its bundle file."""
    ended = ImportJob.objects.filter(
        pk=job.pk, status__in=[ImportJobStatus.QUEUED, ImportJobStatus.RUNNING]
    ).update(
        status=ImportJobStatus.FAILED, error_code=WORKER_LOST, error_message=reason[:2000], events=0,
        finished_at=timezone.now(),
    )  # fmt: skip
    (import_dir() / job.file).unlink(missing_ok=True)
    cancel_marker(job).unlink(missing_ok=True)
    return bool(ended)


def recover_import_jobs(*, grace_seconds: float = 60) -> int:
    """Jobs whose task row is gone or finished while the job is not: end them ``failed`` with the
    reason (the periodic ``jobs`` task). A job younger than ``grace_seconds`` is left alone.
    Idempotent: a job already ended is not touched again. Returns the jobs ended."""
    horizon = timezone.now() - timedelta(seconds=grace_seconds)
    jobs = list(
        ImportJob.objects.filter(
            status__in=[ImportJobStatus.QUEUED, ImportJobStatus.RUNNING], created_at__lt=horizon
        )
    )
    if not jobs:
        return 0
    alive = {
        str(pk)
        for pk in DBTaskResult.objects.filter(
            id__in=[job.task_id for job in jobs if job.task_id],
            status__in=[TaskResultStatus.READY, TaskResultStatus.RUNNING],
        ).values_list("id", flat=True)
    }
    ended = 0
    for job in jobs:
        if job.task_id in alive:
            continue
        reason = (
            "the import's task was lost before it ran (queued before an upgrade, or its task row was "
            "deleted); upload the bundle again"
            if job.status == ImportJobStatus.QUEUED
            else "the worker running the import stopped before it finished; nothing was stored"
        )
        ended += fail_job(job, reason)
    return ended
