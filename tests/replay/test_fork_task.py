"""Forks as django.tasks tasks: enqueued once the fork commits, claimed by their task row, and a
task row run again after its worker died (kill -9 mid-replay) resumes the fork without appending
any event twice or asking the provider again for an answer it already gave."""

from __future__ import annotations

import pytest
from django.tasks import TaskContext, task_backends

from runs.actions.forks import determinism_report, do_fork_with_history
from runs.engine.divergence import comparable, is_marker
from runs.execution import replay
from runs.models import Event, ForkStatus, RunFork
from tests.replay.test_replay import bodies, fake, pipeline, recorded  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db


class WorkerKilled(BaseException):  # noqa: N818 (what SIGKILL is to the code: nothing after it runs)
    """Raised in the step code to stand for the worker process dying there: like a kill, it is
    not an ``Exception``, so nothing in the fork's task catches it and nothing is written after."""


def run_task(task_result, fork_pk: int) -> str:
    return replay.fork_task.call(TaskContext(task_result=task_result), fork_pk)


def kill_at_second_call(monkeypatch, pipeline):  # noqa: F811
    real = pipeline.ask
    calls = []

    def ask(s, step, text, correlation):
        calls.append(step)
        if len(calls) == 2:
            raise WorkerKilled()
        return real(s, step, text, correlation)

    monkeypatch.setattr(pipeline, "ask", ask)
    return calls


def test_the_fork_task_is_enqueued_on_commit_and_claimed_by_its_row(
    workspace,
    recorded,  # noqa: F811
    fake,  # noqa: F811
    django_capture_on_commit_callbacks,
):
    backend = task_backends["default"]  # the suite's dummy backend records tasks
    backend.clear()
    with django_capture_on_commit_callbacks(execute=True):
        fork = do_fork_with_history(workspace=workspace, source_run_id=recorded.run_id, mode="replay")
    (queued,) = [r for r in backend.results if r.task.module_path == "runs.execution.replay.fork_task"]
    assert queued.args == [fork.pk]
    other = replay.fork_task.enqueue(fork.pk)  # a second row for the same fork
    before = len(fake.requests)
    assert run_task(queued, fork.pk) == ForkStatus.COMPLETED
    assert run_task(other, fork.pk) == "not claimed"
    fork.refresh_from_db()
    assert fork.task_id == str(queued.id) and fork.attempts == 1
    assert len(fake.requests) == before  # a replay answers from the cache


@pytest.mark.parametrize("mode", ["replay", "branch"])
def test_a_fork_whose_worker_died_mid_way_resumes_without_doing_anything_twice(
    workspace,
    recorded,  # noqa: F811
    pipeline,  # noqa: F811
    fake,  # noqa: F811
    monkeypatch,
    mode,
):
    fork = do_fork_with_history(workspace=workspace, source_run_id=recorded.run_id, mode=mode, from_seq=1)
    result = replay.fork_task.enqueue(fork.pk)
    calls = kill_at_second_call(monkeypatch, pipeline)
    before = len(fake.requests)
    with pytest.raises(WorkerKilled):
        run_task(result, fork.pk)
    fork.refresh_from_db()
    assert fork.status == ForkStatus.RUNNING  # left as the dead worker left it
    half = Event.objects.filter(run=fork.run).count()
    first_requests = len(fake.requests) - before
    assert first_requests == (1 if mode == "branch" else 0)  # the draft's call; a replay asks none

    monkeypatch.undo()  # the next worker has no fault
    assert run_task(result, fork.pk) == ForkStatus.COMPLETED  # the same task row, run again
    fork.refresh_from_db()
    assert fork.attempts == 2 and fork.run.status == "completed"
    own = [e for e in bodies(fork.run) if not is_marker(e)]
    assert len(own) > half

    # nothing twice: the fork's events are the source's, one for one (a branch's new answers
    # carry other ids, the same kinds of events in the same order)
    def shape(e):
        return (e["type"], e.get("stepId"), e.get("direction"), e.get("name"), e.get("status"))

    assert [shape(e) for e in own] == [shape(e) for e in bodies(recorded)]
    if mode == "replay":
        assert [comparable(e) for e in own] == [comparable(e) for e in bodies(recorded)]
    assert len({e["id"] for e in own}) == len(own)
    # the draft was answered once: resumed from the recorded answer, never asked again
    assert len(fake.requests) - before == (2 if mode == "branch" else 0)
    assert calls == ["draft", "publish"]
    if mode == "replay":
        assert determinism_report(fork)["score"] == 1.0


def test_a_fork_whose_workers_keep_dying_ends_failed_in_words(
    workspace,
    recorded,  # noqa: F811
    fake,  # noqa: F811
):
    fork = do_fork_with_history(workspace=workspace, source_run_id=recorded.run_id, mode="replay")
    result = replay.fork_task.enqueue(fork.pk)
    RunFork.objects.filter(pk=fork.pk).update(
        status=ForkStatus.RUNNING, task_id=str(result.id), attempts=replay.MAX_ATTEMPTS
    )
    assert run_task(result, fork.pk) == ForkStatus.FAILED
    fork.refresh_from_db()
    assert fork.error_code == "WORKER_LOST" and "stopped 3 times" in fork.error_message
    assert fork.run.status == "failed"
