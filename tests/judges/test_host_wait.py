"""Issue 50's acceptance: "A delegated decision wakes the host's wait()". A host (the Python SDK's
RemoteRun against a live server) blocks in ``wait()`` at a gate whose judge the owner delegated;
the judge's task decides it, and ``wait()`` returns that decision with the actor
``judge:<name>@<version>``. Nobody delegated: the same wait times out undecided."""

from __future__ import annotations

import threading
import time

import pytest
from workbench_sdk import GateTimeout, RemoteRun, WorkbenchClient

from accounts.tokens import create_token
from judges import actions as judge_actions
from judges.models import Proposal
from runs.models import Event, Run
from tests.judges.conftest import calibrate, verdict, waiting_run


@pytest.fixture
def token(transactional_db, workspace):
    return create_token(workspace=workspace, name="host", scopes=["read", "write"]).secret


def host(live_server, token, workflow, outcome: dict, timeout: float) -> None:
    """The host's pipeline: parse, then ask for the review gate and wait for its decision."""
    with WorkbenchClient(live_server.url, token) as wb:
        run = RemoteRun.start(wb, workflow=workflow, run_id=outcome["run_id"])
        with run.step("parse"):
            pass
        handle = run.gate("review", "PAUSE_BEFORE", reason="please check the parse")
        outcome["asked"] = True
        try:
            outcome["decision"] = handle.wait(timeout=timeout)
        except GateTimeout as exc:
            outcome["timeout"] = str(exc)


def _requested(run_id: str) -> bool:
    return Event.objects.filter(run__run_id=run_id, type="human_gate_requested").exists()


def _wait_for(predicate, seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_delegated_decision_wakes_the_hosts_wait(
    live_server, token, workspace, workflow, judge, fake, monkeypatch
):
    calibrate(judge, waiting_run(workspace, workflow, "run_labels"))
    judge = judge_actions.do_set_policy(judge, delegation="approve", min_confidence=0.9)
    # the audit share (a stable draw per gate request) is tested in test_delegation: here never drawn
    monkeypatch.setattr(judge_actions, "in_sample", lambda key, percent: False)
    outcome: dict = {"run_id": "run_host"}
    worker = threading.Thread(target=host, args=(live_server, token, workflow, outcome, 30), daemon=True)
    worker.start()
    _wait_for(lambda: _requested("run_host") and outcome.get("asked"))
    time.sleep(0.3)
    assert worker.is_alive() and "decision" not in outcome  # the host is blocked in wait()

    fake.script(verdict("approve", 0.97, "the parse is complete"))
    judge_actions.judge_run(Run.objects.get(run_id="run_host").pk)  # the worker's task
    worker.join(timeout=20)
    assert not worker.is_alive() and "timeout" not in outcome
    decision = outcome["decision"]
    assert decision["decision"] == "approved"
    assert decision["by"] == judge.actor == "judge:reviewer@1"
    assert "Decided by judge reviewer@1 under its delegation policy" in (decision["note"] or "")
    proposal = Proposal.objects.get(judge=judge, run__run_id="run_host")
    assert proposal.delegated and len(fake.requests) == 1


def test_nobody_delegated_the_host_keeps_waiting(live_server, token, workspace, workflow, judge, fake):
    outcome: dict = {"run_id": "run_host_undelegated"}
    worker = threading.Thread(target=host, args=(live_server, token, workflow, outcome, 3), daemon=True)
    worker.start()
    _wait_for(lambda: _requested("run_host_undelegated") and outcome.get("asked"))
    fake.script(verdict("approve", 0.99, "the parse is complete"))
    judge_actions.judge_run(Run.objects.get(run_id="run_host_undelegated").pk)
    worker.join(timeout=20)
    assert not worker.is_alive() and "decision" not in outcome and "timeout" in outcome
    assert Proposal.objects.get(judge=judge, run__run_id="run_host_undelegated").decision == "approved"
    assert not Event.objects.filter(run__run_id="run_host_undelegated", type="human_gate_resolved").exists()
    assert len(fake.requests) == 1  # the shadow proposal's call, and nothing more
