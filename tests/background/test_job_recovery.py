"""Imports and experiments as tasks that cannot be lost: a re-run of the task row after its worker
died takes the job over and ends it; a job whose task row is gone ends failed with the reason;
the bundle file is deleted either way, and kept 0600 in a 0700 folder until then."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from runs.actions.importjobs import MAX_ATTEMPTS, do_create_import_job, import_dir, recover_import_jobs
from runs.background.worker import recover_expired, run_until_idle
from runs.models import ImportJob, Run, WorkerLease
from tests.api.test_import_stream import _generated

pytestmark = pytest.mark.django_db(transaction=True)


def _die_while_running(job: ImportJob) -> DBTaskResult:
    """What a worker killed mid-import leaves: the task row RUNNING under it, the job running."""
    row = DBTaskResult.objects.get(id=job.task_id)
    row.claim("killed")
    long_ago = timezone.now() - timedelta(minutes=5)
    DBTaskResult.objects.filter(id=row.id).update(started_at=long_ago)
    ImportJob.objects.filter(pk=job.pk).update(status="running", started_at=long_ago, attempts=1)
    WorkerLease.objects.create(worker_id="killed", heartbeat_at=long_ago)
    return row


def test_an_import_whose_worker_died_is_run_again_and_ends_done(db_tasks, workspace):
    job = do_create_import_job(workspace=workspace, data=_generated(30))
    path = import_dir() / job.file
    assert path.stat().st_mode & 0o777 == 0o600 and import_dir().stat().st_mode & 0o777 == 0o700
    _die_while_running(job)
    assert recover_expired() == 1
    run_until_idle(queues=["default"], limit=5)
    job.refresh_from_db()
    assert job.status == "succeeded" and job.attempts == 2 and job.events == 30
    assert Run.unscoped.filter(workspace=workspace, run_id=job.run_id).count() == 1
    assert not path.exists()


def test_a_second_task_row_for_the_same_job_does_nothing(db_tasks, workspace):
    from runs.actions.importjobs import import_bundle_task

    job = do_create_import_job(workspace=workspace, data=_generated(10))
    import_bundle_task.enqueue(job.pk)  # a duplicate (a retry by hand, a script)
    run_until_idle(queues=["default"], limit=5)
    job.refresh_from_db()
    assert job.status == "succeeded" and job.attempts == 1
    assert Run.unscoped.filter(workspace=workspace).count() == 1


def test_an_import_that_kills_its_worker_every_time_ends_failed_with_the_reason(db_tasks, workspace):
    job = do_create_import_job(workspace=workspace, data=_generated(10))
    _die_while_running(job)
    ImportJob.objects.filter(pk=job.pk).update(attempts=MAX_ATTEMPTS)
    recover_expired()
    run_until_idle(queues=["default"], limit=5)
    job.refresh_from_db()
    assert job.status == "failed" and job.error_code == "WORKER_LOST"
    assert f"started {MAX_ATTEMPTS} times" in job.error_message
    assert not (import_dir() / job.file).exists() and not Run.unscoped.filter(workspace=workspace).exists()


def test_a_job_whose_task_row_is_gone_ends_failed_with_the_reason(db_tasks, workspace):
    job = do_create_import_job(workspace=workspace, data=_generated(10))
    DBTaskResult.objects.filter(id=job.task_id).delete()
    assert recover_import_jobs() == 0  # young: its task may be on its way
    ImportJob.objects.filter(pk=job.pk).update(created_at=timezone.now() - timedelta(minutes=2))
    assert recover_import_jobs() == 1
    job.refresh_from_db()
    assert job.status == "failed" and job.error_code == "WORKER_LOST" and "task was lost" in job.error_message
    assert not (import_dir() / job.file).exists()
    assert recover_import_jobs() == 0  # ended once


def test_a_job_and_its_task_row_commit_or_roll_back_together(db_tasks, workspace):
    from django.db import transaction

    with transaction.atomic():
        job = do_create_import_job(workspace=workspace, data=_generated(5))
        transaction.set_rollback(True)
    assert not ImportJob.objects.exists() and not DBTaskResult.objects.filter(id=job.task_id).exists()


def test_a_job_that_ended_before_its_worker_died_only_loses_its_file(db_tasks, workspace):
    job = do_create_import_job(workspace=workspace, data=_generated(10))
    _die_while_running(job)
    ImportJob.objects.filter(pk=job.pk).update(status="succeeded")  # committed, then killed
    recover_expired()
    run_until_idle(queues=["default"], limit=5)
    job.refresh_from_db()
    assert job.status == "succeeded" and not (import_dir() / job.file).exists()
    assert not Run.unscoped.filter(workspace=workspace).exists()  # not imported a second time
