"""The shadow judge: a proposal per gate request (an annotation, never a decision), on the
ledger under its own step and tag, within a budget, hidden from reviewers until the gate is decided."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.tasks import default_task_backend

from judges import actions as judge_actions
from judges.models import GateJudge, Proposal, ProposalStatus
from runs.actions import ActionError
from runs.models import Event, Run
from runs.selectors.runs import run_state
from tests.judges.conftest import calibrate, decide, verdict, waiting_run

pytestmark = pytest.mark.django_db


def test_a_gate_request_gets_a_proposal_and_nothing_is_decided(workspace, workflow, judge, fake):
    run = waiting_run(workspace, workflow, "run_s1")
    fake.script(verdict("approve", 0.97, "the parse looks complete"))
    assert judge_actions.judge_run(run.pk) == "judged"
    proposal = Proposal.objects.get(judge=judge, run=run)
    assert (proposal.status, proposal.decision, proposal.confidence) == ("proposed", "approved", 0.97)
    assert proposal.rationale == "the parse looks complete"
    assert len(fake.requests) == 1 and "run_s1" in str(fake.requests[0]["messages"])
    run.refresh_from_db()
    assert run_state(run).pending_gates()  # still waiting for a person
    assert not Event.objects.filter(run=run, type="human_gate_resolved").exists()
    # hidden from reviewers by default: no annotation yet
    assert not Event.objects.filter(run=run, type="annotation").exists()
    # the judge's call is a run of its own: the gate-judge workflow, its step and tags
    judged = Run.unscoped.get(workspace=workspace, run_id=proposal.judge_run_id)
    assert judged.workflow_id == "gate-judge" and "gate-judge" in judged.tags and judge.actor in judged.tags
    assert Event.objects.filter(run=judged, type="model_io", step_id="judge").count() == 2

    # a second look at the same gate request judges nothing again
    assert judge_actions.judge_run(run.pk) == "judged"
    assert Proposal.objects.filter(run=run).count() == 1 and len(fake.requests) == 1

    # the person decides; the proposal is joined and shown on the run now
    decide(workspace, run, "rejected")
    judge_actions.judge_run(run.pk)
    proposal.refresh_from_db()
    assert (proposal.outcome, proposal.outcome_by, proposal.human) == ("rejected", "user:bob", True)
    note = Event.objects.get(run=run, type="annotation")
    assert note.actor == judge.actor and "proposes approved" in note.body and "judge-proposal" in note.body


def test_shown_to_reviewers_when_the_owner_says_so(workspace, workflow, judge, fake):
    calibrate(judge, waiting_run(workspace, workflow, "run_s2c"))  # the setting needs a calibrated judge
    judge_actions.do_set_policy(judge, show_to_reviewers=True)
    run = waiting_run(workspace, workflow, "run_s2")
    fake.script(verdict("reject", 0.6, "missing fields"))
    judge_actions.judge_run(run.pk)
    note = Event.objects.get(run=run, type="annotation")
    assert "proposes rejected" in note.body and "missing fields" in note.body


def test_a_gate_request_queues_the_task(workspace, workflow, judge, fake, django_capture_on_commit_callbacks):
    default_task_backend.clear()
    with django_capture_on_commit_callbacks(execute=True):
        run = waiting_run(workspace, workflow, "run_s3")
    queued = [r for r in default_task_backend.results if r.task.name == "judge_run"]
    assert queued and queued[-1].args == [run.pk]


def test_a_judge_whose_budget_is_spent_stops_and_says_so(workspace, workflow, judge, fake):
    judge_actions.do_set_policy(judge, budget="0.000001")
    judge.__class__.objects.filter(pk=judge.pk).update(spent=Decimal("0.000001"))
    run = waiting_run(workspace, workflow, "run_s4")
    judge_actions.judge_run(run.pk)
    proposal = Proposal.objects.get(run=run)
    assert proposal.status == ProposalStatus.OVER_BUDGET and fake.requests == []
    note = Event.objects.get(run=run, type="annotation")
    assert "budget of USD" in note.body and "is spent" in note.body
    judge.refresh_from_db()
    assert judge.budget_said


def test_a_code_rule_judges_without_a_provider(workspace, workflow, fake):
    rule = judge_actions.do_create_judge(
        workspace=workspace, name="errors", kind="rule", workflow_id="wf-demo", step_id="review",
        gate="PAUSE_BEFORE", config={"rules": {"errors": True}, "onMatch": "rejected"},
    )  # fmt: skip
    run = waiting_run(workspace, workflow, "run_s5")
    judge_actions.judge_run(run.pk)
    proposal = Proposal.objects.get(judge=rule, run=run)
    assert (proposal.decision, proposal.confidence) == ("approved", 1.0) and fake.requests == []


@pytest.mark.parametrize(
    "bad",
    [
        {"gate": "SOMETIMES"},
        {"name": "a@b"},
        {"config": {"provider": "anthropic", "model": "m", "prompt": "nope", "promptVersion": 1}},
        {"kind": "rule", "config": {"rules": {}}},
        {"budget": "-1"},
    ],
)
def test_bad_judges_are_refused(workspace, judge_prompt, bad):
    spec = dict(
        workspace=workspace, name="x", kind="llm", workflow_id="wf", step_id="s", gate="PAUSE_BEFORE",
        config={"provider": "anthropic", "model": "m", "prompt": "judges/review-gate", "promptVersion": 1},
    )  # fmt: skip
    with pytest.raises(ActionError):
        judge_actions.do_create_judge(**{**spec, **bad})
    assert not GateJudge.objects.exists()
