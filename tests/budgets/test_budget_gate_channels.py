"""A run's ``budget`` gate decided away from the run page, through runs.actions.gatepolicy.
do_decide_gate: REST, MCP, Slack and e-mail links. An approval alone would let the caller through
to pause again at its next call, so it is refused with BUDGET_LIMIT_REQUIRED (nothing written);
the way on is ``POST /api/runs/{id}/budget {"limit"}``. A rejection stops the run at its budget,
as "Stop the run here" does. The Slack message and the e-mail offer no Approve for it."""

from __future__ import annotations

import json
import re
from decimal import Decimal

import pytest
from django.core import mail
from django.test import Client

from accounts.principals import principal_for_user
from accounts.tokens import create_token
from runs.actions.webhooks import do_set_notification_preferences
from runs.mcp import operations as ops
from runs.models import Delivery, GateDecisionMeta, Run
from runs.models_budgets import BudgetRecord, RunBudget
from runs.notifications import slack_blocks
from runs.notifications.delivery import deliver_due
from runs.protocol.values import loads
from tests.budgets.support import GATE, gate_decisions, pause_at_budget
from tests.notifications.conftest import make_hook

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _site(settings):
    settings.WORKBENCH_SITE_URL = "https://wb.example"


@pytest.fixture
def api(workspace):
    token = create_token(workspace=workspace, name="reviewing host", scopes=["read", "review"])
    return Client(headers={"Authorization": f"Bearer {token.secret}"})


def _resolve(api, decision: str, run_id: str = "run_spend", **extra):
    body = {**GATE, "decision": decision, **extra}
    return api.post(f"/api/runs/{run_id}/gates/resolve", body, content_type="application/json")


def _nothing_changed() -> None:
    assert gate_decisions() == [] and not RunBudget.objects.exists()
    assert not BudgetRecord.objects.exclude(kind__in=("settings", "paused")).exists()
    assert Run.objects.get(run_id="run_spend").pending_gates == 1


def test_rest_approval_is_refused_with_budget_limit_required_and_says_the_way_on(api, workspace):
    pause_at_budget(workspace)
    for decision, extra in (("approved", {}), ("approved", {"note": "go on"})):
        answer = _resolve(api, decision, **extra)
        assert answer.status_code == 409, answer.content
        body = answer.json()
        assert body["code"] == "BUDGET_LIMIT_REQUIRED"
        assert 'POST /api/runs/run_spend/budget with {"limit": "0.05"}' in body["error"]
        assert "reject" in body["error"]
        _nothing_changed()
    # the way it names works: the gate is approved with a note naming the new limit
    raised = api.post("/api/runs/run_spend/budget", {"limit": "0.05"}, content_type="application/json")
    assert raised.status_code == 200 and raised.json()["resumed"] is True
    (decided,) = gate_decisions()
    assert decided["decision"] == "approved" and "Budget raised to USD 0.05 (was USD 0.01)" in decided["note"]


def test_rest_rejection_stops_the_run_at_its_budget(api, workspace):
    pause_at_budget(workspace)
    answer = _resolve(api, "rejected", note="too dear")
    assert answer.status_code == 200, answer.content
    (decided,) = gate_decisions()
    assert decided["decision"] == "rejected"
    assert decided["note"].startswith("Stopped at its budget by token:") and decided["note"].endswith(
        ": too dear"
    )
    assert BudgetRecord.objects.filter(kind="stopped", run_id="run_spend").count() == 1
    assert GateDecisionMeta.objects.get().metadata == {"workbench.channel": "api"}
    assert Run.objects.get(run_id="run_spend").pending_gates == 0
    assert not RunBudget.objects.exists()
    # decided once: a second rejection finds no gate waiting
    assert _resolve(api, "rejected").status_code >= 400
    assert len(gate_decisions()) == 1


def test_rest_outsider_and_read_only_token_change_nothing(workspace, other_workspace):
    pause_at_budget(workspace)
    outsider = create_token(workspace=other_workspace, name="o", scopes=["read", "review"]).secret
    reader = create_token(workspace=workspace, name="r", scopes=["read"]).secret
    outside = _resolve(Client(headers={"Authorization": f"Bearer {outsider}"}), "rejected")
    assert outside.status_code == 404
    assert _resolve(Client(headers={"Authorization": f"Bearer {reader}"}), "rejected").status_code == 403
    _nothing_changed()


def test_mcp_approval_is_refused_and_rejection_stops(workspace, bob):
    pause_at_budget(workspace)
    principal = principal_for_user(bob, workspace.slug)
    with pytest.raises(ops.Refused) as refused:
        ops.resolve_gate(
            principal,
            run_id="run_spend",
            step_id="draft",
            gate="CHECKPOINT",
            decision="approved",
            checkpoint="budget",
        )
    assert refused.value.code == "BUDGET_LIMIT_REQUIRED"
    _nothing_changed()
    ops.resolve_gate(
        principal,
        run_id="run_spend",
        step_id="draft",
        gate="CHECKPOINT",
        decision="rejected",
        checkpoint="budget",
    )
    (decided,) = gate_decisions()
    assert decided["decision"] == "rejected" and decided["note"] == "Stopped at its budget by user:bob"
    assert GateDecisionMeta.objects.get().metadata == {"workbench.channel": "mcp"}


def test_the_slack_message_offers_stop_and_open_never_approve(workspace):
    hook = make_hook(workspace, "https://hooks.example/slack", kind="slack").webhook
    pause_at_budget(workspace)
    delivery = Delivery.objects.get(webhook=hook, event_type="gate.requested")
    posted = slack_blocks.gate_message(loads(delivery.payload), hook.public_id)
    (buttons,) = [b["elements"] for b in posted["blocks"] if b["type"] == "actions"]
    assert [(b["action_id"], b["text"]["text"]) for b in buttons] == [
        ("wb_reject", "Stop the run"),
        ("wb_open", "Open the run"),
    ]
    assert buttons[1]["url"].startswith("https://wb.example/runs/run_spend/")
    text = posted["blocks"][0]["text"]["text"]
    assert "The run has spent USD 0.01 of its budget of USD 0.01" in text
    assert "open the run to raise its budget" in text
    assert json.loads(buttons[0]["value"])["c"] == "budget"


def test_the_email_offers_stop_and_an_approval_by_a_changed_link_is_refused(workspace, bob):
    bob.email = "bob@example.com"
    bob.save()
    do_set_notification_preferences(user=bob, workspace=workspace, gates_to_decide=True, runs_i_started=False)
    pause_at_budget(workspace)
    deliver_due()
    (message,) = mail.outbox
    assert "The run has spent USD 0.01 of its budget of USD 0.01" in message.body
    assert "open the run to raise its budget" in message.body and "Approve:" not in message.body
    (stop,) = re.findall(r"Stop the run at its budget: https://wb\.example(/gate-links/\S+)", message.body)
    assert stop.endswith("?decision=rejected")
    person = Client()
    person.force_login(bob)
    approve = stop.replace("decision=rejected", "decision=approved")  # a link edited by hand
    refused = person.post(approve, {"decision": "approved"})
    assert b"BUDGET_LIMIT_REQUIRED" in refused.content
    _nothing_changed()
    person.post(stop, {"decision": "rejected"})  # the link still works: nothing was decided
    (decided,) = gate_decisions()
    assert decided["decision"] == "rejected" and decided["note"] == "Stopped at its budget by user:bob"
    assert GateDecisionMeta.objects.get().metadata == {"workbench.channel": "email"}
    assert RunBudget.objects.filter(run_limit=Decimal("0.01")).count() == 0
