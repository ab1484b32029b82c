"""Experiments as tasks that cannot be lost: a re-run of the task row after its worker died takes
the experiment over (items the dead attempt left running end failed with the reason, pending ones
run); one whose task row is gone ends failed with the reason."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from evals import actions
from evals.models import Experiment
from evals.runner import enqueue, recover_experiments, run_experiment
from runs.background.worker import recover_expired, run_until_idle
from runs.models import WorkerLease
from tests.background.conftest import db_tasks  # noqa: F401  (the fixture)


@pytest.mark.django_db(transaction=True)
def test_a_rerun_after_the_worker_died_ends_the_experiment(db_tasks, workspace, gate_dataset, fake):  # noqa: F811
    experiment = actions.do_create_experiment(workspace=workspace, dataset=gate_dataset, name="r", change={})
    enqueue(experiment)
    row = DBTaskResult.objects.get(id=experiment.task_id)
    row.claim("killed")  # the dead attempt: task row running, experiment running, one item running
    long_ago = timezone.now() - timedelta(minutes=5)
    DBTaskResult.objects.filter(id=row.id).update(started_at=long_ago)
    WorkerLease.objects.create(worker_id="killed", heartbeat_at=long_ago)
    Experiment.objects.filter(pk=experiment.pk).update(status="running", attempts=1)
    first = experiment.items.order_by("item_key").first()
    first.status = "running"
    first.save()
    assert recover_expired() == 1
    run_until_idle(queues=["default"], limit=5)
    experiment.refresh_from_db()
    assert experiment.status == "completed" and experiment.attempts == 2
    statuses = {i.pk: (i.status, i.error) for i in experiment.items.all()}
    assert statuses.pop(first.pk)[0] == "failed"
    assert "WORKER_LOST" in first.__class__.objects.get(pk=first.pk).error
    assert {s for s, _ in statuses.values()} == {"completed"}  # the others ran once


@pytest.mark.django_db
def test_an_experiment_whose_task_row_is_gone_ends_failed_with_the_reason(workspace, gate_dataset):
    experiment = actions.do_create_experiment(workspace=workspace, dataset=gate_dataset, name="g", change={})
    Experiment.objects.filter(pk=experiment.pk).update(
        task_id="00000000-0000-0000-0000-000000000000", created_at=timezone.now() - timedelta(minutes=2)
    )
    assert recover_experiments() == 1
    experiment.refresh_from_db()
    assert experiment.status == "failed" and experiment.error.startswith("WORKER_LOST")
    assert {i.status for i in experiment.items.all()} == {"failed"}
    assert recover_experiments() == 0
    # and the same experiment once finished is never run again by a late task row
    assert run_experiment(experiment.pk, task_id="late").status == "failed"
