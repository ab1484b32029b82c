"""The task worker (runs/background/worker.py): leases put a dead worker's tasks back, threads
keep a slow task from holding others, a stop releases what still runs, periodic jobs are one row
however many workers schedule them."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from runs.background import periodic
from runs.background.worker import Worker, recover_expired, run_until_idle
from runs.models import WorkerLease, Workspace
from tests.background.tasks import sleep_then_touch, touch

pytestmark = pytest.mark.django_db(transaction=True)


def _claimed_by(worker_id: str, *, minutes_ago: float = 0) -> DBTaskResult:
    row = DBTaskResult.objects.get(id=touch.enqueue("lost").id)
    row.claim(worker_id)
    DBTaskResult.objects.filter(id=row.id).update(started_at=timezone.now() - timedelta(minutes=minutes_ago))
    return row


def test_a_task_of_a_worker_whose_lease_expired_runs_again(db_tasks, settings):
    settings.WORKBENCH_WORKER_LEASE_SECONDS = 30
    WorkerLease.objects.create(worker_id="dead", heartbeat_at=timezone.now() - timedelta(seconds=31))
    row = _claimed_by("dead", minutes_ago=1)
    assert recover_expired() == 1
    row.refresh_from_db()
    assert row.status == "READY" and row.worker_ids == ["dead"]
    assert not WorkerLease.objects.filter(worker_id="dead").exists()
    assert run_until_idle(queues=["default"]) >= 1
    row.refresh_from_db()
    assert row.status == "SUCCESSFUL" and row.worker_ids == ["dead", "run-once"]  # at least once
    assert Workspace.objects.filter(slug="lost").exists()


def test_a_live_lease_keeps_its_tasks(db_tasks, settings):
    settings.WORKBENCH_WORKER_LEASE_SECONDS = 30
    WorkerLease.objects.create(worker_id="alive", heartbeat_at=timezone.now() - timedelta(seconds=5))
    row = _claimed_by("alive", minutes_ago=10)  # a long task: its worker still beats
    assert recover_expired() == 0
    row.refresh_from_db()
    assert row.status == "RUNNING"


def test_a_task_claimed_by_no_leased_worker_is_released_after_a_lease(db_tasks, settings):
    settings.WORKBENCH_WORKER_LEASE_SECONDS = 30
    fresh = _claimed_by("unregistered")  # just claimed: its worker may not have written its lease yet
    old = _claimed_by("unregistered", minutes_ago=1)
    assert recover_expired() == 1
    assert DBTaskResult.objects.get(id=fresh.id).status == "RUNNING"
    assert DBTaskResult.objects.get(id=old.id).status == "READY"


def test_threads_keep_a_slow_task_from_holding_the_others(db_tasks):
    sleep_then_touch.enqueue(3.0, "slow")
    for i in range(3):
        touch.enqueue(f"quick-{i}")
    worker = Worker(queues=["default"], threads=2, interval=0.05, worker_id="threads")
    worker.start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and Workspace.objects.filter(slug__startswith="quick-").count() < 3:
            time.sleep(0.05)
        quick_done = Workspace.objects.filter(slug__startswith="quick-").count()
        slow_done = Workspace.objects.filter(slug="slow").exists()
    finally:
        worker.stop(grace=10)
    assert quick_done == 3 and not slow_done  # the quick ones finished while the slow one slept
    assert Workspace.objects.filter(slug="slow").exists()  # and the stop let it finish


def test_a_stop_puts_back_what_still_runs(db_tasks):
    result = sleep_then_touch.enqueue(5.0, "interrupted")
    worker = Worker(queues=["default"], threads=1, interval=0.05, worker_id="stopping")
    worker.start()
    deadline = time.monotonic() + 10
    while DBTaskResult.objects.get(id=result.id).status != "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert WorkerLease.objects.filter(worker_id="stopping").exists()
    assert worker.stop(grace=0.2) == 1
    row = DBTaskResult.objects.get(id=result.id)
    assert row.status == "READY" and row.started_at is None  # the next worker runs it again
    assert not WorkerLease.objects.filter(worker_id="stopping").exists()


def test_periodic_jobs_are_one_row_however_many_workers_schedule_them(db_tasks):
    assert periodic.ensure_scheduled() == len(periodic.JOBS) >= 5
    assert periodic.ensure_scheduled() == 0  # a second worker starting adds nothing
    rows = DBTaskResult.objects.filter(task_path=periodic.periodic.module_path)
    names = sorted(row.args_kwargs["args"][0] for row in rows)
    assert names == sorted(periodic.JOBS)
    job = periodic.JOBS["outbox"]
    assert not periodic.schedule_next("outbox", job)  # one waits already: a doubled chain folds
    waiting = rows.get(args_kwargs__args__0="outbox")
    assert periodic.schedule_next("outbox", job, exclude=waiting.id)  # the run itself: the next one


def test_a_periodic_run_enqueues_its_next_run(db_tasks, settings):
    settings.WORKBENCH_RUN_RETENTION_DAYS = 0
    periodic.ensure_scheduled()
    before = timezone.now()
    run_until_idle(queues=["default"], limit=20)
    outbox = DBTaskResult.objects.filter(
        task_path=periodic.periodic.module_path, args_kwargs__args__0="outbox"
    )
    assert outbox.filter(status="SUCCESSFUL").count() == 1
    following = outbox.get(status="READY")
    assert following.run_after >= before + timedelta(seconds=29)
    # and the look it made is a notifications task
    assert DBTaskResult.objects.filter(task_path="runs.notifications.tasks.deliver_notifications").exists()


def test_retention_deletes_old_finished_task_rows_and_keeps_the_rest(db_tasks, settings):
    from runs.background.jobs import retention

    settings.WORKBENCH_RUN_RETENTION_DAYS = 0
    old = touch.enqueue("old").id
    recent = touch.enqueue("recent").id
    waiting = touch.enqueue("waiting").id
    run_until_idle(queues=["default"], limit=2)
    DBTaskResult.objects.filter(id=old).update(finished_at=timezone.now() - timedelta(days=8))
    DBTaskResult.objects.filter(id=waiting).update(status="READY", finished_at=None)
    retention()
    assert set(DBTaskResult.objects.values_list("id", flat=True)) >= {
        DBTaskResult.objects.get(id=recent).id,
        DBTaskResult.objects.get(id=waiting).id,
    }
    assert not DBTaskResult.objects.filter(id=old).exists()
