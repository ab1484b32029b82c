"""A fork never passes a human gate that nobody decided (seed 002: a replay takes only decisions
that were recorded). It stops at the gate, waiting like its source; a reviewer's decision resumes
it; a branch may name a decision, recorded as its creator's, never as ``replay:*``."""

from __future__ import annotations

import pytest

from runs import actions
from runs.actions.core import load_state
from runs.actions.forks import determinism_report, do_fork_with_history
from runs.engine import commands as c
from runs.engine import programs
from runs.execution.replay import ProgramSession, run_fork
from runs.models import Event, ForkStatus, Run
from runs.selectors.run_list import runs_waiting_for_review
from tests.replay.test_replay import WORKFLOW, Pipeline, bodies


@pytest.fixture
def pipeline(fake_anthropic, settings):
    settings.WORKBENCH_EGRESS_ALLOW = ["127.0.0.0/8", "::1/128"]
    program = Pipeline(fake_anthropic.url)
    programs.register(WORKFLOW["id"], program)
    yield program
    programs.unregister(WORKFLOW["id"])


@pytest.fixture
def fake_anthropic():
    from tests.fakes.anthropic_api import FakeAnthropic

    with FakeAnthropic() as server:
        yield server


@pytest.fixture
def waiting_source(workspace, pipeline) -> Run:
    """The pipeline recorded up to its review gate, which nobody has decided."""
    run = actions.do_start_run(workspace=workspace, workflow=WORKFLOW, actor="pipeline")
    s = ProgramSession(workspace, "pipeline", run.run_id)
    s.begin_step("draft")
    answer = pipeline.ask(s, "draft", pipeline.prompt, "c-draft")
    s.log_tool_call("store_summary", args={"text": answer.text}, step_id="draft")
    s.complete_step("draft")
    s.begin_step("review")  # PAUSE_BEFORE: the gate is requested and waits
    run = s.run
    assert run.pending_gates == 1
    return run


def decided_by(run: Run) -> list[tuple[str, str]]:
    return [
        (e.data["decision"], e.actor)
        for e in Event.objects.filter(run=run, type="human_gate_resolved").order_by("seq")
    ]


def fork_and_run(workspace, source: Run, **kw):
    fork = do_fork_with_history(workspace=workspace, source_run_id=source.run_id, actor="user:alice", **kw)
    return run_fork(fork.pk)


@pytest.mark.django_db
@pytest.mark.parametrize("mode", ["replay", "branch"])
def test_a_fork_stops_at_the_gate_its_source_waits_at(workspace, waiting_source, mode):
    kw = {"from_seq": 0} if mode == "replay" else {"from_seq": 2}
    fork = fork_and_run(workspace, waiting_source, mode=mode, **kw)
    assert fork.status == ForkStatus.WAITING
    run = Run.unscoped.get(pk=fork.run_id)
    assert run.status == "running"
    assert decided_by(run) == []  # nothing decided the gate: no replay:* decision
    state = load_state(run)
    assert [(g["stepId"], g["gate"]) for g in state.pending_gates()] == [("review", "PAUSE_BEFORE")]
    assert run in runs_waiting_for_review(workspace, limit=50)  # the inbox lists it
    assert not any(e["type"] == "step_started" and e["stepId"] == "publish" for e in bodies(run))
    assert determinism_report(fork)["explanation"].startswith("stopped at a gate nobody decided")


@pytest.mark.django_db(transaction=True)
def test_a_reviewers_decision_resumes_the_waiting_fork(workspace, waiting_source, fake_anthropic):
    fork = fork_and_run(workspace, waiting_source, mode="branch", from_seq=2)
    assert fork.status == ForkStatus.WAITING
    calls = len(fake_anthropic.requests)
    actions.do_command(
        workspace=workspace,
        run_id=fork.run.run_id,
        command=c.ResolveGate("review", "PAUSE_BEFORE", "approved", note="looks right"),
        actor="user:bob",
    )
    fork.refresh_from_db()
    assert fork.status == ForkStatus.PENDING  # handed back to the executor after the commit
    fork = run_fork(fork.pk)
    assert fork.status == ForkStatus.COMPLETED, fork.error_message
    run = fork.run
    assert run.status == "completed"
    assert decided_by(run) == [("approved", "user:bob")]  # the reviewer's decision, once
    events = bodies(run)
    assert any(e["type"] == "step_started" and e["stepId"] == "publish" for e in events)
    assert len(fake_anthropic.requests) == calls + 1  # only the publish call: the draft was not redone
    assert sum(1 for e in events if e["type"] == "model_io" and e.get("direction") == "request") == 2


@pytest.mark.django_db
def test_a_branch_decision_is_recorded_as_its_creators(workspace, waiting_source):
    fork = fork_and_run(
        workspace,
        waiting_source,
        mode="branch",
        from_seq=2,
        overlay={"gateDecisions": {"review": "rejected"}},
    )
    assert fork.status == ForkStatus.COMPLETED
    assert decided_by(fork.run) == [("rejected", "user:alice")]
    assert fork.run.status == "failed"


@pytest.mark.django_db
def test_a_replay_takes_the_recorded_decision_with_who_made_it(workspace, pipeline):
    from runs.execution.host import Workbench

    wb = Workbench(workspace=workspace, actor="pipeline")
    source = wb.run_workflow(workflow=WORKFLOW).run  # the step code's scripted reviewer decided
    assert decided_by(source) == [("approved", "pipeline")]
    fork = fork_and_run(workspace, source, mode="replay", from_seq=0)
    assert fork.status == ForkStatus.COMPLETED
    assert decided_by(fork.run) == [("approved", "pipeline")]
    assert not any(actor.startswith("replay:") for _, actor in decided_by(fork.run))
