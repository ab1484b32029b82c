"""An experiment never waits for a fork another executor runs: its task ends, a new task row for
it comes back later (``run_after``) and records the item once the fork stopped; the experiment
still ends ``completed`` (or cancelled) as before."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from evals import actions, runner
from evals.models import Experiment
from evals.runner import enqueue
from runs.background.worker import run_until_idle
from runs.execution.replay import run_fork
from runs.models import ForkStatus, RunFork
from tests.background.conftest import db_tasks  # noqa: F401  (the fixture)

ELSEWHERE = "another-worker"


@pytest.fixture
def claimed_elsewhere(monkeypatch):
    """Every fork the runner tries to run was claimed first by another executor (its own task)."""
    seen: list[int] = []

    def taken(fork_pk: int, *, task_id: str = ""):
        seen.append(fork_pk)
        RunFork.objects.filter(pk=fork_pk, status=ForkStatus.PENDING).update(
            status=ForkStatus.RUNNING, task_id=ELSEWHERE, started_at=timezone.now()
        )
        return None

    monkeypatch.setattr(runner, "run_fork", taken)
    return seen


def _rows(experiment: Experiment):
    return DBTaskResult.objects.filter(task_path=runner.run_experiment_task.module_path)


def _run_forks_elsewhere(experiment: Experiment) -> None:
    for fork in RunFork.objects.filter(run_id__in=experiment.items.values_list("run_id", flat=True)):
        assert run_fork(fork.pk, task_id=ELSEWHERE) is not None


def _due_now() -> None:
    DBTaskResult.objects.filter(status="READY").update(run_after=timezone.now() - timedelta(seconds=1))


@pytest.mark.django_db(transaction=True)
def test_a_fork_run_elsewhere_is_not_waited_for_the_task_comes_back(
    db_tasks,  # noqa: F811
    workspace,
    gate_dataset,
    fake,
    settings,
    monkeypatch,
    claimed_elsewhere,
):
    settings.WORKBENCH_EXPERIMENT_RECHECK_SECONDS = 60
    calls_before = len(fake.requests)
    experiment = actions.do_create_experiment(workspace=workspace, dataset=gate_dataset, name="c", change={})
    enqueue(experiment)
    first_row = experiment.task_id
    started = time.monotonic()
    run_until_idle(queues=["default"], limit=10)  # the experiment and its forks' tasks (not claimed)
    assert time.monotonic() - started < 30  # nobody sat polling a fork
    experiment.refresh_from_db()
    assert experiment.status == "running" and experiment.finished_at is None
    assert len(claimed_elsewhere) == 3  # every item got its fork; none was waited for
    assert {i.status for i in experiment.items.all()} == {"running"}
    assert all(i.run_id is not None for i in experiment.items.all())
    come_back = DBTaskResult.objects.get(id=experiment.task_id)
    assert str(come_back.id) != first_row and come_back.status == "READY"
    assert come_back.run_after >= timezone.now() + timedelta(seconds=50)
    assert DBTaskResult.objects.get(id=first_row).status == "SUCCESSFUL"
    assert runner.recover_experiments(grace_seconds=0) == 0  # its task row lives: not lost

    # due while the forks still run elsewhere: it comes back once more, records nothing
    _due_now()
    run_until_idle(queues=["default"], limit=10)
    experiment.refresh_from_db()
    assert experiment.status == "running" and str(come_back.id) != experiment.task_id
    assert {i.status for i in experiment.items.all()} == {"running"}
    assert _rows(experiment).filter(status="READY").count() == 1  # one row in charge, never a pile

    monkeypatch.setattr(runner, "run_fork", run_fork)
    _run_forks_elsewhere(experiment)
    _due_now()
    run_until_idle(queues=["default"], limit=10)
    experiment.refresh_from_db()
    assert experiment.status == "completed" and experiment.error == ""
    assert {i.status for i in experiment.items.all()} == {"completed"}
    assert all(i.score is not None for i in experiment.items.all())
    assert len(fake.requests) == calls_before  # a replay: every answer from the cache
    assert not _rows(experiment).filter(status="READY").exists()  # finished: no row comes back


@pytest.mark.django_db(transaction=True)
def test_a_cancelled_experiment_records_its_forks_run_elsewhere_and_stays_cancelled(
    db_tasks,  # noqa: F811
    workspace,
    gate_dataset,
    fake,
    settings,
    monkeypatch,
    claimed_elsewhere,
):
    settings.WORKBENCH_EXPERIMENT_RECHECK_SECONDS = 60
    experiment = actions.do_create_experiment(workspace=workspace, dataset=gate_dataset, name="x", change={})
    enqueue(experiment)
    run_until_idle(queues=["default"], limit=10)
    actions.do_cancel_experiment(experiment, actor="user:alice")
    monkeypatch.setattr(runner, "run_fork", run_fork)
    _run_forks_elsewhere(experiment)  # each stops at once: its run was cancelled
    _due_now()
    run_until_idle(queues=["default"], limit=10)
    experiment.refresh_from_db()
    assert experiment.status == "failed" and experiment.error == "CANCELLED: cancelled by alice"
    assert {i.status for i in experiment.items.all()} == {"failed"}  # none left running
    assert all(i.error.startswith("CANCELLED") for i in experiment.items.all())
    assert not _rows(experiment).filter(status="READY").exists()
