"""A run's ``budget`` gate in the review inbox: its row says what the run spent against its budget
and, for members who may decide gates (Action.RESOLVE_GATE, what the run page's gate panel and
``POST /api/runs/{id}/budget`` ask), asks for the new budget ("Raise and continue") or stops the
run; a plain Approve would only pause the run again at its next call."""

from __future__ import annotations

import json
import re
from decimal import Decimal

import pytest

from runs.actions import budgets
from runs.models import Run
from runs.models_budgets import BudgetRecord, RunBudget
from tests.budgets.support import gate_decisions, pause_at_budget, wait_at_review

pytestmark = pytest.mark.django_db

HX = {"HX-Request": "true"}
URL = "/runs/run_spend/gates/resolve/"


def _row(client) -> str:
    html = client.get("/runs/inbox/").content.decode()
    return re.search(r'<tr class="inbox-row".*?</tr>', html, re.S).group(0)


def _from_inbox(client, decision: str, **fields):
    data = {"return": "inbox", "row_key": "3-0", "step_id": "draft", "gate": "CHECKPOINT"}
    return client.post(URL, {**data, "checkpoint": "budget", "decision": decision, **fields}, headers=HX)


def _nothing_changed() -> None:
    assert gate_decisions() == [] and not RunBudget.objects.exists()
    assert not BudgetRecord.objects.exclude(kind__in=("settings", "paused")).exists()
    assert Run.objects.get(run_id="run_spend").pending_gates == 1


def test_the_row_says_the_spend_and_asks_for_the_new_budget(client, alice, workspace):
    pause_at_budget(workspace)
    client.force_login(alice)
    row = _row(client)
    assert "Spent USD 0.01 of its budget of USD 0.01 (workspace budget)." in row
    assert 'name="limit"' in row and "required" in row and "data-key-limit" in row
    assert ">Raise and continue</button>" in row and ">Stop the run</button>" in row
    assert ">Approve</button>" not in row and 'name="note"' not in row
    assert "data-undo=" not in row  # a raise is sent at once, with its limit


def test_an_owner_raises_the_budget_from_the_inbox_row(client, alice, workspace):
    pause_at_budget(workspace)
    client.force_login(alice)
    answer = _from_inbox(client, "approved", limit="0.05")
    assert answer.status_code == 200 and "badge-approved" in answer.content.decode()
    said = json.loads(answer["HX-Trigger"])["inbox:decided"]["text"]
    assert said.endswith("Budget raised to USD 0.05 (was USD 0.01) by user:alice.")
    assert RunBudget.objects.get(run__run_id="run_spend").run_limit == Decimal("0.05")
    (decided,) = gate_decisions()
    assert decided["decision"] == "approved" and decided["gate"] == "CHECKPOINT"
    assert decided["note"] == "Budget raised to USD 0.05 (was USD 0.01) by user:alice"
    assert Run.objects.get(run_id="run_spend").pending_gates == 0
    assert BudgetRecord.objects.filter(kind="raised", actor="user:alice").count() == 1
    again = budgets.check_run_budget(workspace=workspace, run_id="run_spend", step_id="draft")
    assert again["allowed"] is True  # the caller goes on, no new gate


def test_a_raise_without_js_comes_back_to_the_inbox(client, bob, workspace):
    pause_at_budget(workspace)
    client.force_login(bob)  # a reviewer may decide gates, so may raise at one (as on the run page)
    data = {"return": "inbox", "step_id": "draft", "gate": "CHECKPOINT", "checkpoint": "budget"}
    answer = client.post(URL, {**data, "decision": "approved", "limit": "1"})
    assert answer.status_code == 302 and answer["Location"] == "/runs/inbox/"
    assert gate_decisions()[0]["note"].startswith("Budget raised to USD 1 (was USD 0.01)")


@pytest.mark.parametrize(
    ("limit", "said"),
    [
        ("", "name its new budget and press Raise and continue (BUDGET_LIMIT_REQUIRED)"),
        ("lots", "Limit must be an amount such as 12.50 (INVALID_INPUT)"),
        ("-1", "Limit must be between 0 and 99999999.99 (INVALID_INPUT)"),
        ("1e9", "Limit must be between 0 and 99999999.99 (INVALID_INPUT)"),
    ],
)
def test_a_refused_limit_says_why_keeps_the_input_and_changes_nothing(client, alice, workspace, limit, said):
    pause_at_budget(workspace)
    client.force_login(alice)
    answer = _from_inbox(client, "approved", limit=limit)
    html = answer.content.decode()
    assert answer.status_code == 200 and said in html and 'role="alert"' in html
    assert f'value="{limit}"' in html and 'aria-invalid="true"' in html and "HX-Trigger" not in answer
    assert "Spent USD 0.01 of its budget of USD 0.01" in html  # the row is still the budget row
    _nothing_changed()


def test_stop_the_run_from_the_row_rejects_the_gate_at_its_budget(client, alice, workspace):
    pause_at_budget(workspace)
    client.force_login(alice)
    answer = _from_inbox(client, "rejected")
    assert answer.status_code == 200 and "badge-rejected" in answer.content.decode()
    (decided,) = gate_decisions()
    assert decided["decision"] == "rejected" and decided["note"] == "Stopped at its budget by user:alice"
    assert BudgetRecord.objects.filter(kind="stopped", run_id="run_spend").count() == 1
    assert not RunBudget.objects.exists()


def test_a_member_who_may_not_decide_gates_sees_why_and_cannot_raise(client, vera, workspace):
    pause_at_budget(workspace)
    client.force_login(vera)  # a viewer: no Action.RESOLVE_GATE
    row = _row(client)
    assert "Spent USD 0.01 of its budget of USD 0.01" in row
    assert "is for members who may decide gates (reviewer or owner)" in row
    assert 'name="limit"' not in row and "Raise and continue" not in row
    assert 'href="/runs/run_spend/#gates"' in row
    assert _from_inbox(client, "approved", limit="5").status_code == 403
    assert _from_inbox(client, "rejected").status_code == 403
    _nothing_changed()


def test_an_outsider_gets_404_and_changes_nothing(client, charlie, workspace):
    pause_at_budget(workspace)
    client.force_login(charlie)
    assert _from_inbox(client, "approved", limit="5").status_code == 404
    _nothing_changed()


def test_other_gates_keep_their_approve_in_the_inbox(client, alice, workspace):
    wait_at_review(workspace, "run_other")
    client.force_login(alice)
    row = _row(client)
    assert ">Approve</button>" in row and 'name="limit"' not in row and "Spent" not in row
