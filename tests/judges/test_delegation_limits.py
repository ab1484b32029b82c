"""What a delegated judge never decides, however well it agrees with people: a gate whose gate
policy counts votes (a quorum of approvers, or several rejections: that many people are asked
for) and a run's ``budget`` gate (going on there spends money). It still proposes; people decide.
A judge cannot be made to watch the budget gate at all."""

from __future__ import annotations

import pytest

from judges import actions as judge_actions
from judges.models import GateJudge, Proposal
from runs.actions import ActionError
from runs.actions.gatepolicy import do_set_gate_policy
from runs.models import Event, Run
from runs.selectors.runs import run_state
from tests.budgets.support import pause_at_budget
from tests.judges.conftest import verdict
from tests.judges.test_delegation import Gates, _agreeing

pytestmark = pytest.mark.django_db


@pytest.fixture
def delegated(workspace, workflow, judge, fake):
    gates = Gates(workspace, workflow, judge, fake)
    _agreeing(gates, 50)
    judge_actions.do_set_policy(judge, delegation="both", audit_percent=1)
    return gates


def _decided_by_judge(run) -> bool:
    return Event.objects.filter(run=run, type="human_gate_resolved", actor__startswith="judge:").exists()


@pytest.mark.parametrize("policy", [{"quorum": 2}, {"rejections": 2}])
def test_a_gate_whose_policy_counts_votes_is_left_to_people(workspace, delegated, policy):
    assert _decided_by_judge(delegated.judged("approved"))  # delegated, no policy: it decides
    do_set_gate_policy(workspace=workspace, policy=policy)
    for says in ("approved", "rejected"):
        run = delegated.judged(says, confidence=1.0)
        assert not Event.objects.filter(run=run, type="human_gate_resolved").exists()
        assert run_state(run).pending_gates()
        proposal = Proposal.objects.get(run=run)
        assert proposal.decision == says and not proposal.delegated and not proposal.audit
    do_set_gate_policy(workspace=workspace, policy={})  # the policy cleared: it decides again
    assert _decided_by_judge(delegated.judged("approved"))


def test_a_judge_never_decides_a_budget_gate(workspace, delegated, judge):
    # a judge watching the budget gate (made before such judges were refused)
    GateJudge.objects.filter(pk=judge.pk).update(
        workflow_id="wf-spend", step_id="draft", gate="CHECKPOINT", checkpoint="budget"
    )
    pause_at_budget(workspace)
    run = Run.objects.get(run_id="run_spend")
    delegated.fake.script(verdict("approve", 1.0))
    judge_actions.judge_run(run.pk)
    proposal = Proposal.objects.get(run=run)
    assert proposal.decision == "approved" and not proposal.delegated
    assert not Event.objects.filter(run=run, type="human_gate_resolved").exists()
    assert run_state(run).pending_gates()


def test_a_judge_for_the_budget_gate_is_refused(workspace, judge_prompt):
    with pytest.raises(ActionError) as refused:
        judge_actions.do_create_judge(
            workspace=workspace,
            name="spender",
            kind="llm",
            workflow_id="wf-spend",
            step_id="draft",
            gate="CHECKPOINT",
            checkpoint="budget",
            config={"provider": "anthropic", "model": "claude-haiku-4-5", "prompt": "judges/review-gate"},
            actor="user:alice",
        )
    assert refused.value.code == "INVALID_INPUT" and "spends money" in refused.value.message
    assert not GateJudge.objects.filter(name="spender").exists()
