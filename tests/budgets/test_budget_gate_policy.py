"""A run's ``budget`` gate under its gate policy (runs.actions.gatepolicy.do_raise_run_budget and
do_stop_at_budget): a raise is the raiser's approval, so separation of duties refuses it for the
run's starter (nothing changed) and a quorum counts it as one vote: the new limit is set, but the
run calls nothing until the quorum's other approvals are in (a plain approval counts once the limit
covers the spend). A stop is a rejection: where the policy asks for several, each one before is a
vote. Without a policy a raise lets the run go on at once (nobody asked: as before)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import Client

from accounts.tokens import create_token
from runs.actions import ActionError, budgets
from runs.actions.gatepolicy import do_decide_gate, do_raise_run_budget, do_set_gate_policy, do_stop_at_budget
from runs.models import Event, GateVote, Run
from runs.models_budgets import BudgetRecord, RunBudget
from runs.protocol.values import loads
from tests.budgets.support import GATE, gate_decisions, pause_at_budget

pytestmark = pytest.mark.django_db

RUN = "run_spend"


def _check(workspace) -> dict:
    return budgets.check_run_budget(workspace=workspace, run_id=RUN, step_id="draft")


def _waiting() -> bool:
    return Run.objects.get(run_id=RUN).pending_gates == 1


def test_under_a_quorum_a_raise_is_one_vote_and_the_run_calls_nothing_until_the_second(workspace):
    pause_at_budget(workspace)
    do_set_gate_policy(workspace=workspace, policy={"quorum": 2})
    raised = do_raise_run_budget(workspace=workspace, run_id=RUN, limit="5", actor="user:bob")
    assert raised["resumed"] is False and (raised["approvals"], raised["quorum"]) == (1, 2)
    assert RunBudget.objects.get().run_limit == Decimal("5")  # the limit is set ...
    assert gate_decisions() == [] and _waiting()  # ... the gate still waits
    answer = _check(workspace)
    assert answer["allowed"] is False and answer["gate"]["checkpoint"] == "budget"
    assert "waits for its decision" in answer["message"]
    assert list(GateVote.objects.values_list("voter", "decision")) == [("user:bob", "approved")]
    # the limit now covers the spend: a plain approval is the second vote
    decided = do_decide_gate(
        workspace=workspace, run_id=RUN, decision="approved", actor="user:dave", **_gate()
    )
    assert decided.resolved
    [resolved] = gate_decisions()
    assert resolved["decision"] == "approved"
    notes = [loads(b)["text"] for b in Event.objects.filter(type="annotation").values_list("body", flat=True)]
    assert notes[0].startswith("Vote on CHECKPOINT budget on draft: approved by user:bob (1 of 2 approvals)")
    assert "Budget raised to USD 5 (was USD 0.01)" in notes[0]
    assert notes[1].startswith("Quorum on CHECKPOINT budget")
    assert _check(workspace)["allowed"] is True and not _waiting()


def test_a_raiser_who_raises_again_under_a_quorum_changes_nothing(workspace):
    pause_at_budget(workspace)
    do_set_gate_policy(workspace=workspace, policy={"quorum": 2})
    do_raise_run_budget(workspace=workspace, run_id=RUN, limit="5", actor="user:bob")
    with pytest.raises(ActionError) as refused:
        do_raise_run_budget(workspace=workspace, run_id=RUN, limit="500", actor="user:bob")
    assert refused.value.code == "ALREADY_VOTED"
    assert RunBudget.objects.get().run_limit == Decimal("5")
    assert BudgetRecord.objects.filter(kind="raised").count() == 1 and _waiting()


def test_separation_of_duties_refuses_the_starters_raise_and_changes_nothing(workspace):
    pause_at_budget(workspace)  # started by user:alice
    do_set_gate_policy(workspace=workspace, policy={"separationOfDuties": True})
    with pytest.raises(ActionError) as refused:
        do_raise_run_budget(workspace=workspace, run_id=RUN, limit="5", actor="user:alice")
    assert refused.value.code == "SEPARATION_OF_DUTIES"
    assert not RunBudget.objects.exists() and not BudgetRecord.objects.filter(kind="raised").exists()
    assert _waiting() and _check(workspace)["allowed"] is False
    # someone else raises: the run goes on; the starter may still stop a run (a rejection)
    assert do_raise_run_budget(workspace=workspace, run_id=RUN, limit="5", actor="user:bob")["resumed"]
    assert _check(workspace)["allowed"] is True


def test_a_stop_is_a_vote_where_the_policy_counts_rejections(workspace):
    pause_at_budget(workspace)
    do_set_gate_policy(workspace=workspace, policy={"rejections": 2})
    first = do_stop_at_budget(workspace=workspace, run_id=RUN, actor="user:bob")
    assert first["stopped"] is False and (first["rejections"], first["needed"]) == (1, 2)
    assert gate_decisions() == [] and _waiting()
    assert not BudgetRecord.objects.filter(kind="stopped").exists()
    second = do_decide_gate(
        workspace=workspace, run_id=RUN, decision="rejected", actor="user:dave", **_gate()
    )
    assert second.resolved
    [resolved] = gate_decisions()
    assert resolved["decision"] == "rejected" and resolved["note"].startswith(
        "Stopped at its budget by user:dave"
    )
    assert BudgetRecord.objects.filter(kind="stopped").count() == 1


def test_nobody_asked_a_raise_goes_on_and_a_stop_stops_at_once(workspace):
    pause_at_budget(workspace)
    raised = do_raise_run_budget(workspace=workspace, run_id=RUN, limit="5", actor="user:bob")
    assert raised["resumed"] is True and "quorum" not in raised
    assert _check(workspace)["allowed"] is True
    pause_at_budget(workspace, run_id="run_other")
    stopped = do_stop_at_budget(workspace=workspace, run_id="run_other", actor="user:bob")
    assert stopped == {"runId": "run_other", "note": "Stopped at its budget by user:bob", "stopped": True}


def test_a_raise_of_a_limit_with_no_gate_waiting_sets_it_under_any_policy(workspace):
    budgets.do_set_budgets(workspace=workspace, monthly_cap=None, run_default="0.01")
    pause_at_budget(workspace)
    do_raise_run_budget(workspace=workspace, run_id=RUN, limit="5", actor="user:bob")  # goes on
    do_set_gate_policy(workspace=workspace, policy={"quorum": 2, "separationOfDuties": True})
    again = do_raise_run_budget(workspace=workspace, run_id=RUN, limit="9", actor="user:alice")
    assert again["resumed"] is False and RunBudget.objects.get().run_limit == Decimal("9")


def test_rest_raise_under_a_quorum_answers_the_votes_and_the_page_says_what_is_left(workspace, alice, bob):
    pause_at_budget(workspace)
    do_set_gate_policy(workspace=workspace, policy={"quorum": 2})
    token = create_token(workspace=workspace, name="host", scopes=["read", "review"], created_by=bob)
    api = Client(headers={"Authorization": f"Bearer {token.secret}"})
    answer = api.post(f"/api/runs/{RUN}/budget", {"limit": "5"}, content_type="application/json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["resumed"] is False and answer.json()["approvals"] == 1
    again = api.post(f"/api/runs/{RUN}/budget", {"limit": "6"}, content_type="application/json")
    assert again.status_code == 409 and again.json()["code"] == "ALREADY_VOTED"
    page = Client()
    page.force_login(alice)
    said = page.post(
        f"/runs/{RUN}/gates/resolve/",
        {
            "step_id": "draft",
            "gate": "CHECKPOINT",
            "checkpoint": "budget",
            "decision": "approved",
            "limit": "7",
        },
        follow=True,
    )
    assert said.status_code == 200
    assert not _waiting() and _check(workspace)["allowed"] is True
    assert sorted(GateVote.objects.values_list("voter", flat=True)) == sorted(
        [f"token:{token.token.key_id}", "user:alice"]
    )


def _gate() -> dict:
    return {"step_id": GATE["stepId"], "gate": GATE["gate"], "checkpoint": GATE["checkpoint"]}


@pytest.mark.parametrize(
    ("policy", "decision", "said"),
    [
        ({"quorum": 2}, "approved", "The run goes on once 2 approve (1 of 2 so far)."),
        ({"rejections": 2}, "rejected", "Your vote to stop is recorded: 1 of 2 rejections."),
    ],
)
def test_a_vote_from_the_inbox_keeps_the_row_and_says_what_is_left(
    client, alice, workspace, policy, decision, said
):
    pause_at_budget(workspace, title="Drafts")
    Run.objects.filter(run_id=RUN).update(created_by="user:carol")  # alice did not start it
    do_set_gate_policy(workspace=workspace, policy=policy)
    client.force_login(alice)
    data = {
        "return": "inbox",
        "row_key": "3-0",
        "step_id": "draft",
        "gate": "CHECKPOINT",
        "checkpoint": "budget",
    }
    answer = client.post(
        f"/runs/{RUN}/gates/resolve/",
        {**data, "decision": decision, "limit": "5"},
        headers={"HX-Request": "true"},
    )
    assert answer.status_code == 200
    html = answer.content.decode()
    assert said in html and 'class="inbox-notice"' in html and "HX-Trigger" not in answer
    assert gate_decisions() == [] and _waiting()
