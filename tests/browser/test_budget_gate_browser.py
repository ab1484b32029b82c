"""The run's ``budget`` gate in Chromium: the panel asks for the new run budget instead of a plain
Approve; "Raise and continue" without a number is stopped by the form, with one the gate is
approved with a note naming the limit (htmx, no reload), and nothing on the page breaks the CSP.

Run alone: ``pytest tests/browser/test_budget_gate_browser.py -m browser``.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from playwright.sync_api import expect, sync_playwright

from tests.browser.support import launch, new_page, serve_app, shot, sign_in

pytestmark = pytest.mark.browser

SETUP = """
import django; django.setup()
from datetime import UTC, datetime
from django.contrib.auth import get_user_model
from runs import actions
from runs.actions import budgets
from runs.actions.workspaces import add_member, get_or_create_workspace
from runs.engine import commands as c
ws = get_or_create_workspace("acme", name="Acme")
add_member(ws, get_user_model().objects.create_user("rita", password="rita-password-123"), "reviewer")
budgets.do_set_budgets(workspace=ws, monthly_cap=None, run_default="0.01")
wf = {"id": "wf-b", "version": 1, "steps": [{"id": "draft"}], "edges": []}
actions.do_start_run(workspace=ws, workflow=wf, actor="pipeline", run_id="run_b", title="Drafts")
actions.do_command(workspace=ws, run_id="run_b", command=c.BeginStep("draft"), actor="pipeline")
ts = datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
actions.do_append_events(workspace=ws, run_id="run_b", events=[{
    "id": "evt_spent", "runId": "run_b", "ts": ts, "type": "model_io", "direction": "response",
    "provider": "openai", "model": "gpt-4o", "stepId": "draft", "cost": {"amount": 0.01, "currency": "USD"}}])
assert not budgets.check_run_budget(workspace=ws, run_id="run_b", step_id="draft")["allowed"]
"""


def test_the_budget_gate_is_raised_from_the_run_page(tmp_path):
    with serve_app(tmp_path, setup_code=SETUP, workers=0) as base, sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = new_page(browser)
            sign_in(page, base, "rita")
            page.goto(f"{base}/runs/run_b/")
            panel = page.locator("#gate-panel")
            expect(panel).to_contain_text("would pass it")
            expect(panel.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
            raise_button = panel.get_by_role("button", name="Raise and continue")
            raise_button.click()  # no number: the form asks for one, nothing is sent
            expect(panel).to_contain_text("Raise and continue")
            assert panel.get_by_label("New run budget").evaluate("e => e.validity.valueMissing") is True
            expect(panel.get_by_role("alert")).to_have_count(0)
            panel.get_by_label("New run budget").fill("0.05")
            shot(page, "budget-gate-raise")
            raise_button.click()
            expect(panel).to_contain_text("No gate is waiting.")
            expect(panel.locator(".history")).to_contain_text("Budget raised to USD 0.05 (was USD 0.01)")
            events = json.loads(page.request.get(f"{base}/api/runs/run_b/events").text())["events"]
            decided = [i["event"] for i in events if i["event"]["type"] == "human_gate_resolved"]
            assert len(decided) == 1 and decided[0]["decision"] == "approved"
            assert page.console_errors == []  # type: ignore[attr-defined]
        finally:
            browser.close()


def test_an_owner_raises_the_budget_from_the_inbox_row(tmp_path):
    """The inbox row says what the run spent against its budget; the approve key with no new
    budget only takes the owner to the field (nothing is sent); with one, "Raise and continue"
    raises the run's budget and resolves the gate in the row (htmx, no reload)."""
    owner = 'add_member(ws, get_user_model().objects.create_user("olga", password="olga-password-123"), "owner")\n'
    with serve_app(tmp_path, setup_code=SETUP + owner, workers=0) as base, sync_playwright() as pw:
        browser = launch(pw)
        try:
            page = new_page(browser)
            sign_in(page, base, "olga")
            page.goto(f"{base}/runs/inbox/")
            row = page.locator('tr.inbox-row[data-run="run_b"]')
            expect(row).to_contain_text("Spent USD 0.01 of its budget of USD 0.01 (workspace budget).")
            expect(row.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
            limit = row.get_by_label("New run budget (USD)")
            row.focus()
            page.keyboard.press("a")  # the approve key: no budget named, so nothing is sent
            expect(limit).to_be_focused()
            assert limit.evaluate("e => e.validity.valueMissing") is True
            expect(row.get_by_role("alert")).to_have_count(0)
            limit.fill("0.05")
            shot(page, "budget-gate-inbox-raise")
            row.get_by_role("button", name="Raise and continue").click()
            expect(page.locator("#inbox-status")).to_contain_text("Budget raised to USD 0.05 (was USD 0.01)")
            # decided: the row's form is gone (the live inbox may refresh the row away meanwhile)
            expect(page.locator('tr.inbox-row[data-run="run_b"] form')).to_have_count(0)
            budget = json.loads(page.request.get(f"{base}/api/runs/run_b/budget").text())
            assert (Decimal(budget["limit"]), budget["source"]) == (Decimal("0.05"), "run")
            events = json.loads(page.request.get(f"{base}/api/runs/run_b/events").text())["events"]
            decided = [i["event"] for i in events if i["event"]["type"] == "human_gate_resolved"]
            assert len(decided) == 1 and decided[0]["decision"] == "approved"
            assert decided[0]["note"] == "Budget raised to USD 0.05 (was USD 0.01) by user:olga"
            assert page.console_errors == []  # type: ignore[attr-defined]
        finally:
            browser.close()
