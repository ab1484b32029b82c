"""Cancel of a fork (a run like any: the run page's Cancel, POST /api/runs/{id}/cancel): the fork
re-executing it stops, its provider call under way is shut, and no request reaches the provider
after Cancel (counted at the loopback fake); it ends failed with CANCELLED and who cancelled it."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from runs.actions import do_cancel_tree
from runs.actions.forks import do_fork_with_history
from runs.execution.replay import run_fork
from runs.models import Event, ForkStatus, RunFork
from tests.replay.test_replay import fake, pipeline, recorded  # noqa: F401 (fixtures)


def _wait_for(condition, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.django_db(transaction=True)
def test_cancel_mid_call_shuts_it_and_nothing_more_reaches_the_provider(
    workspace,
    recorded,  # noqa: F811
    fake,  # noqa: F811
):
    fork = do_fork_with_history(
        workspace=workspace, source_run_id=recorded.run_id, mode="branch", from_seq=1, actor="user:alice"
    )
    before = len(fake.requests)
    fake.script({"misbehave": "slow", "delay": 20})  # the draft's new call: no byte for 20 s

    def work() -> None:
        try:
            run_fork(fork.pk)
        finally:
            connection.close()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    _wait_for(lambda: len(fake.requests) == before + 1)  # under way at the fake
    report = do_cancel_tree(workspace=workspace, run_id=fork.run.run_id, actor="user:bob", reason="enough")
    assert report.cancelled == [fork.run.run_id]
    at_cancel = len(fake.requests)
    thread.join(timeout=60)
    assert not thread.is_alive()  # the call was shut, not waited out
    fork.refresh_from_db()
    assert (fork.status, fork.error_code, fork.error_message) == (
        ForkStatus.FAILED,
        "CANCELLED",
        "cancelled by bob",
    )
    assert fork.provider_calls == 0
    assert len(fake.requests) == at_cancel == before + 1  # nothing after Cancel, no publish call
    fork.run.refresh_from_db()
    assert fork.run.status == "cancelled"
    last = Event.objects.filter(run=fork.run).order_by("-seq").first()
    assert last.type == "run_status_changed" and last.data["status"] == "cancelled"  # nothing after it


@pytest.mark.django_db
def test_a_fork_cancelled_while_queued_never_runs(workspace, recorded, fake):  # noqa: F811
    fork = do_fork_with_history(
        workspace=workspace, source_run_id=recorded.run_id, mode="branch", from_seq=1, actor="user:alice"
    )
    do_cancel_tree(workspace=workspace, run_id=fork.run.run_id, actor="user:bob")
    before = len(fake.requests)
    fork = run_fork(fork.pk)
    assert fork is not None and (fork.status, fork.error_code) == (ForkStatus.FAILED, "CANCELLED")
    assert fork.error_message == "cancelled by bob" and len(fake.requests) == before
    assert RunFork.objects.get(pk=fork.pk).finished_at is not None
