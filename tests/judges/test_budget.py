"""Judges and money: past the workspace's monthly cap a judge's call is refused with BUDGET_EXCEEDED
before the provider is asked (the fake counts 0 requests); the judge says so on the run and on its
page, and proposes again once the cap is raised. Each judge call is on the ledger under its own
step and tag."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import Client

from judges import actions as judge_actions
from judges.calls import TAG
from judges.models import GateJudge, Proposal, ProposalStatus
from runs.actions import budgets
from runs.models import Event, Run
from runs.models_budgets import BudgetRecord
from tests.budgets.test_workspace_cap import spend
from tests.judges.conftest import verdict, waiting_run

pytestmark = pytest.mark.django_db


def test_past_the_workspace_cap_a_judge_is_refused_and_says_so(alice, workspace, workflow, judge, fake):
    spend(workspace, 2)
    budgets.do_set_budgets(workspace=workspace, monthly_cap="1", run_default=None)
    run = waiting_run(workspace, workflow, "run_b1")
    fake.script(verdict("approve"))
    assert judge_actions.judge_run(run.pk) == "judged"
    assert fake.requests == []  # the provider was never asked
    proposal = Proposal.objects.get(run=run)
    assert proposal.status == ProposalStatus.OVER_BUDGET and proposal.error.startswith("BUDGET_EXCEEDED")
    assert proposal.decision == "" and not Event.objects.filter(run=run, type="human_gate_resolved").exists()
    note = Event.objects.get(run=run, type="annotation")
    assert note.actor == judge.actor and "BUDGET_EXCEEDED" in note.body and "monthly cap" in note.body
    assert BudgetRecord.objects.filter(workspace=workspace, kind="refused").exists()
    client = Client()
    client.force_login(alice)
    page = client.get(f"/judges/{judge.judge_id}/").content.decode()
    assert "past its monthly cap" in page and "1 not judged" in page

    # the cap raised: the next gate is judged again, and the notice goes away
    budgets.do_set_budgets(workspace=workspace, monthly_cap="100", run_default=None)
    again = waiting_run(workspace, workflow, "run_b2")
    judge_actions.judge_run(again.pk)
    assert Proposal.objects.get(run=again).status == ProposalStatus.PROPOSED and len(fake.requests) == 1
    assert not GateJudge.objects.get(pk=judge.pk).budget_said


def test_each_judge_call_is_on_the_ledger_under_its_own_step_and_tag(alice, workspace, workflow, judge, fake):
    for n in range(3):
        fake.script(verdict("approve"))
        judge_actions.judge_run(waiting_run(workspace, workflow, f"run_l{n}").pk)
    proposals = list(Proposal.objects.filter(judge=judge))
    judged = Run.objects.filter(run_id__in=[p.judge_run_id for p in proposals])
    assert judged.count() == 3
    for run in judged:
        assert run.workflow_id == "gate-judge" and {TAG, judge.actor} <= set(run.tags)
        assert run.model_calls == 1
        assert set(Event.objects.filter(run=run, type="model_io").values_list("step_id", flat=True)) == {
            "judge"
        }
    spent = sum((p.cost for p in proposals), Decimal(0))
    assert spent > 0 and all(p.cost > 0 for p in proposals)  # priced calls: a zero cost cannot pass
    assert GateJudge.objects.get(pk=judge.pk).spent == spent
    # the workspace's ledger: the judge's step, with its three calls
    client = Client()
    client.force_login(alice)
    html = client.get("/ledger/").content.decode()
    assert '<th scope="row">judge</th><td class="num">3</td>' in html  # the judge's own step


def test_a_judge_run_over_its_run_budget_is_refused_before_the_provider(workspace, workflow, judge, fake):
    # the gate-judge workflow's run budget is 0: the judge's call would pass it
    budgets.do_set_budgets(workspace=workspace, monthly_cap=None, run_default=None, workflows={TAG: "0"})
    run = waiting_run(workspace, workflow, "run_rb1")
    fake.script(verdict("approve"))
    judge_actions.judge_run(run.pk)
    assert fake.requests == []  # the provider was never asked
    proposal = Proposal.objects.get(run=run)
    assert proposal.status == ProposalStatus.OVER_BUDGET and proposal.error.startswith("BUDGET_EXCEEDED")
    assert "budget of USD 0 (workflow budget)" in proposal.error
    assert not Event.objects.filter(run=run, type="human_gate_resolved").exists()  # left to people
    judged = Run.objects.get(workflow_id=TAG)
    assert judged.status == "failed" and judged.model_calls == 0
    refused = BudgetRecord.objects.get(workspace=workspace, kind="refused")
    assert refused.run_id == judged.run_id and "no provider was called" in refused.message

    # raised: the next gate is judged
    budgets.do_set_budgets(workspace=workspace, monthly_cap=None, run_default=None, workflows={TAG: "5"})
    again = waiting_run(workspace, workflow, "run_rb2")
    judge_actions.judge_run(again.pk)
    assert Proposal.objects.get(run=again).status == ProposalStatus.PROPOSED and len(fake.requests) == 1


def test_nobody_asked_a_judge_is_not_held_by_run_budgets(workspace, workflow, judge, fake):
    fake.script(verdict("approve"))
    judge_actions.judge_run(waiting_run(workspace, workflow, "run_rb3").pk)
    assert Proposal.objects.get(judge=judge).status == ProposalStatus.PROPOSED and len(fake.requests) == 1
    assert not BudgetRecord.objects.filter(workspace=workspace).exists()
