"""Large bundle imports as background jobs (Django's tasks framework), with progress.

:func:`do_create_import_job` keeps the bundle in ``var/imports`` and enqueues ``import_bundle_task``
after the commit; the task (:func:`run_import_job`) imports it with the streamed path
(:func:`runs.actions.bigimport.do_import_bundle_file`: bounded memory, COPY on PostgreSQL, one
transaction) and records the outcome on the :class:`~runs.models.ImportJob` row. Progress (events
stored, bytes read) is written by a thread of its own, on its own database connection, at most
once a second: the import's transaction holds its rows until the end, the job row does not wait
for it. On SQLite (one writer at a time) progress is written only when the job ends.

A failed job stored nothing (the import's transaction rolled back) and says why with the code
the synchronous import would answer. The bundle file is removed when the job ends either way.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.tasks import task
from django.utils import timezone

from runs.actions.bigimport import NotStreamable, do_import_bundle_file
from runs.actions.bundles import do_import_bundle
from runs.actions.core import ActionError
from runs.models import Event, ImportJob, ImportJobStatus, Workspace
from runs.protocol.errors import ErrorCode
from runs.protocol.values import new_id

log = logging.getLogger("workbench.imports")


def import_dir() -> Path:
    path = Path(settings.VAR_DIR) / "imports"
    path.mkdir(parents=True, exist_ok=True)
    return path


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
    else:
        target.write_bytes(data or b"")
    job = ImportJob.objects.create(
        job_id=job_id,
        workspace=workspace,
        file=target.name,
        size=target.stat().st_size,
        as_new_id=as_new_id,
        created_by=actor[:200],
    )
    transaction.on_commit(lambda: _enqueue(job.pk))
    return job


def _enqueue(job_pk: int) -> None:
    try:
        import_bundle_task.enqueue(job_pk)
    except Exception:  # the job row stays queued: `manage.py bundle jobs --run` picks it up
        log.exception("could not enqueue import job %s", job_pk)


@task()
def import_bundle_task(job_pk: int) -> str:
    return run_import_job(job_pk).status


class _ProgressWriter:
    """Writes (events, bytes) to the job row from a thread of its own, at most once a second."""

    def __init__(self, job_pk: int) -> None:
        self.job_pk = job_pk
        self.latest: tuple[int, int] | None = None
        self.done = threading.Event()
        self.live = connection.vendor != "sqlite"
        self.thread = threading.Thread(target=self._loop, name="import-progress", daemon=True)
        if self.live:
            self.thread.start()

    def __call__(self, events: int, bytes_read: int) -> None:
        self.latest = (events, bytes_read)

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


def run_import_job(job_pk: int) -> ImportJob:
    """Import a queued job's bundle (the task's body; a job that is not queued is left alone)."""
    claimed = ImportJob.objects.filter(pk=job_pk, status=ImportJobStatus.QUEUED).update(
        status=ImportJobStatus.RUNNING, started_at=timezone.now()
    )
    job = ImportJob.objects.select_related("workspace").get(pk=job_pk)
    if not claimed:
        return job
    path = import_dir() / job.file
    progress = _ProgressWriter(job.pk)
    fields: dict[str, object] = {}
    try:
        try:
            run = do_import_bundle_file(
                workspace=job.workspace, path=path, actor=job.created_by, as_new_id=job.as_new_id,
                progress=progress,
            )  # fmt: skip
        except NotStreamable:  # an older protocol version: the in-memory path migrates it
            run = do_import_bundle(
                workspace=job.workspace, data=path.read_bytes(), actor=job.created_by, as_new_id=job.as_new_id
            )
        fields = {"status": ImportJobStatus.SUCCEEDED, "run_id": run.run_id, "events": run.last_seq}
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
        succeeded = fields.get("status") == ImportJobStatus.SUCCEEDED
        if not succeeded:
            fields["events"] = 0  # the transaction rolled back: nothing is stored
        fields["bytes_read"] = job.size if succeeded else (progress.latest or (0, 0))[1]
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
