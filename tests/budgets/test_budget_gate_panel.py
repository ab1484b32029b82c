"""The run's ``budget`` gate on the run page: a plain Approve would only pause the run again at its
next call (the limit is what the caller checks), so the panel asks for the new budget ("Raise and
continue") or stops the run there; both through runs.actions.budgets. Other gates keep Approve."""

from __future__ import annotations

from decimal import Decimal

import pytest

from runs.actions import budgets
from runs.models import Event
from runs.models_budgets import BudgetRecord, RunBudget
from runs.protocol.values import loads
from tests.budgets.support import pause_at_budget, wait_at_review

pytestmark = pytest.mark.django_db

URL = "/runs/run_panel/gates/resolve/"


def paused_run(workspace) -> None:
    """A run that spent USD 0.01 with a run budget of USD 0.01: its next call pauses at ``budget``."""
    pause_at_budget(workspace, "run_panel")


def decide(client, decision: str, *, htmx: bool = False, **extra):
    body = {"step_id": "draft", "gate": "CHECKPOINT", "checkpoint": "budget", "decision": decision, **extra}
    return client.post(URL, body, headers={"HX-Request": "true"} if htmx else {})


def decisions() -> list[dict]:
    rows = Event.objects.filter(run__run_id="run_panel", type="human_gate_resolved").order_by("seq")
    return [loads(body) for body in rows.values_list("body", flat=True)]


def test_the_budget_gate_offers_raise_and_continue_not_a_plain_approve(client, alice, workspace):
    paused_run(workspace)
    client.force_login(alice)
    page = client.get("/runs/run_panel/").content.decode()
    panel = page[page.index('id="gate-panel"') :]
    assert 'name="limit"' in panel and "Raise and continue" in panel and "Stop the run here" in panel
    assert ">Approve</button>" not in panel.split("</section>")[0]


def test_raise_and_continue_raises_the_limit_and_the_next_check_passes(client, alice, workspace):
    paused_run(workspace)
    client.force_login(alice)
    assert decide(client, "approved", limit="0.05").status_code == 302
    assert RunBudget.objects.get(run__run_id="run_panel").run_limit == Decimal("0.05")
    (decided,) = decisions()
    assert decided["decision"] == "approved" and "Budget raised to USD 0.05 (was USD 0.01)" in decided["note"]
    assert BudgetRecord.objects.filter(kind="raised", run_id="run_panel", actor="user:alice").exists()
    # the caller asks again: it goes on, no new gate
    again = budgets.check_run_budget(workspace=workspace, run_id="run_panel", step_id="draft")
    assert again["allowed"] is True


def test_a_plain_approve_of_the_budget_gate_is_refused_and_changes_nothing(client, alice, workspace):
    paused_run(workspace)
    client.force_login(alice)
    answer = decide(client, "approved", htmx=True)
    assert answer.status_code == 200 and "name its new budget" in answer.content.decode()
    assert decisions() == [] and not RunBudget.objects.exists()
    bad = decide(client, "approved", limit="lots", htmx=True)
    assert "Limit must be an amount such as 12.50 (INVALID_INPUT)" in bad.content.decode()
    assert decisions() == [] and not RunBudget.objects.exists()


def test_stop_the_run_here_rejects_the_budget_gate(client, alice, workspace):
    paused_run(workspace)
    client.force_login(alice)
    decide(client, "rejected")
    (decided,) = decisions()
    assert decided["decision"] == "rejected" and "Stopped at its budget" in decided["note"]
    assert BudgetRecord.objects.filter(kind="stopped", run_id="run_panel").exists()


def test_nobody_asked_another_gate_keeps_its_approve(client, alice, workspace):
    wait_at_review(workspace, "run_panel")
    client.force_login(alice)
    panel = client.get("/runs/run_panel/").content.decode()
    panel = panel[panel.index('id="gate-panel"') :].split("</section>")[0]
    assert ">Approve</button>" in panel and 'name="limit"' not in panel
    decide_review = client.post(
        URL, {"step_id": "draft", "gate": "CHECKPOINT", "checkpoint": "review", "decision": "approved"}
    )
    assert decide_review.status_code == 302 and decisions()[0]["decision"] == "approved"
    assert not BudgetRecord.objects.exists()


def test_the_budgets_page_says_playground_and_judges_are_refused(client, alice, workspace):
    client.force_login(alice)
    page = client.get("/settings/budgets/").content.decode()
    assert "Playground sends (workflow <code>playground</code>)" in page and "gate-judge" in page
