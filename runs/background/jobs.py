"""The periodic jobs of the runs app, run by the workers (``runs.background.periodic``).

Each is a sweep over durable rows, so it is idempotent: a second run at once finds nothing more.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from runs.actions import responsecache
from runs.actions.importjobs import recover_import_jobs
from runs.actions.monitors import evaluate_monitors
from runs.actions.retention import do_prune_runs
from runs.notifications.tasks import schedule as schedule_deliveries
from runs.telemetry import transcript_log
from runs.telemetry.otlp_sweep import sweep_once

log = logging.getLogger("workbench.periodic")

PERIODIC_TASK = "runs.background.periodic.periodic"


def look_at_outbox() -> None:
    """One look at the notification outbox on its queue: deliveries whose task was lost go out."""
    schedule_deliveries()


def monitors() -> int:
    """Every enabled monitor evaluated once from the rollups; returns how many changed state."""
    return sum(1 for done in evaluate_monitors() if done.changed)


def end_quiet_traces() -> int:
    return sweep_once()


def recover_jobs() -> int:
    return recover_import_jobs()


def retention() -> None:
    """Retention, as ``prune_runs`` and ``prune_replay_data`` do it with their defaults: ended runs
    older than ``WORKBENCH_RUN_RETENTION_DAYS`` (0: keep all), expired cached responses, the
    transcripts of deleted runs, and finished task rows older than ``WORKBENCH_TASK_RESULT_DAYS``."""
    days = getattr(settings, "WORKBENCH_RUN_RETENTION_DAYS", 0)
    if days:
        report = do_prune_runs(before=timezone.now() - timedelta(days=days))
        if report.runs:
            log.info("retention: %d run(s) deleted", report.runs)
    if settings.WORKBENCH_REPLAY_CACHE_DAYS:
        responsecache.prune()
    transcript_log.sweep_orphans()
    now = timezone.now()
    finished = DBTaskResult.objects.finished()
    finished.filter(finished_at__lt=now - timedelta(days=settings.WORKBENCH_TASK_RESULT_DAYS)).delete()
    # the periodic runs themselves (one every few seconds for the OTLP sweep): an hour is enough
    finished.filter(task_path=PERIODIC_TASK, finished_at__lt=now - timedelta(hours=1)).delete()
