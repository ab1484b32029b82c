"""A 2-of-3 quorum with separation of duties in Chromium: the run's starter (alice) is refused in
words; bob approves from his inbox's "Assigned to me" (the row stays, saying 1 of 2); dave
approves on the run page and the gate is decided, by dave, with both voters in the trace.

Run alone: ``pytest tests/browser/test_gate_policy_browser.py -m browser``.
"""

from __future__ import annotations

import json

import pytest

from tests.browser.support import launch, new_page, serve_app, shot, sign_in

pytestmark = pytest.mark.browser

SETUP = """
import django, json; django.setup()
from django.contrib.auth import get_user_model
from runs import actions
from runs.actions.gatepolicy import do_set_gate_policy
from runs.actions.workspaces import add_member, get_or_create_workspace
ws = get_or_create_workspace("acme", name="Acme")
User = get_user_model()
for name, role in (("alice", "owner"), ("bob", "reviewer"), ("dave", "reviewer")):
    add_member(ws, User.objects.create_user(name, password=f"{name}-password-123"), role)
do_set_gate_policy(workspace=ws, policy={"quorum": 2, "separationOfDuties": True, "assignees": ["bob", "dave"]})
workflow = {"id": "wf-q", "version": 1, "steps": [{"id": "review", "gatePolicy": "PAUSE_BEFORE"}], "edges": []}
actions.do_start_run(workspace=ws, workflow=workflow, run_id="run_q", actor="user:alice", title="Quarterly report")
"""


def test_two_of_three_quorum_with_separation_of_duties(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    with serve_app(tmp_path, setup_code=SETUP, workers=0) as base, sync_playwright() as pw:
        browser = launch(pw)
        try:
            # alice started the run: her approval is refused, in words, and nothing is decided
            alice = new_page(browser)
            sign_in(alice, base, "alice")
            alice.goto(f"{base}/runs/run_q/")
            panel = alice.locator("#gate-panel")
            expect(panel.locator("[data-gate-policy]")).to_contain_text("0 of 2 approvals")
            panel.get_by_role("button", name="Approve", exact=True).click()
            expect(panel.get_by_role("alert")).to_contain_text("SEPARATION_OF_DUTIES")
            shot(alice, "gate-policy-starter-refused")

            # bob: his inbox, assigned to him; his vote keeps the row waiting for one more
            bob = new_page(browser)
            sign_in(bob, base, "bob")
            bob.goto(f"{base}/runs/inbox/")
            bob.click("#inbox-assigned-me")
            row = bob.locator('tr.inbox-row[data-run="run_q"]')
            expect(row).to_contain_text("assigned to bob, dave (you)")
            row.get_by_role("button", name="Approve").click()
            expect(bob.locator('tr.inbox-row[data-run="run_q"] [role=status]')).to_contain_text(
                "1 of 2 approvals"
            )
            expect(bob.locator('tr.inbox-row[data-run="run_q"] [data-votes]')).to_contain_text("user:bob")
            shot(bob, "gate-policy-first-vote")

            # dave: the second approval decides the gate
            dave = new_page(browser)
            sign_in(dave, base, "dave")
            dave.goto(f"{base}/runs/run_q/")
            dave_panel = dave.locator("#gate-panel")
            expect(dave_panel.locator("[data-votes]")).to_contain_text("1 of 2 approvals (user:bob)")
            dave_panel.get_by_role("button", name="Approve", exact=True).click()
            expect(dave_panel).to_contain_text("No gate is waiting.")
            expect(dave_panel.locator(".history")).to_contain_text("by user:dave")
            shot(dave, "gate-policy-decided")

            page = json.loads(dave.request.get(f"{base}/api/runs/run_q/events").text())
            types = [item["event"]["type"] for item in page["events"]]
            assert types.count("human_gate_resolved") == 1 and types.count("annotation") == 2
            for page in (alice, bob, dave):
                assert page.console_errors == []  # type: ignore[attr-defined]
        finally:
            browser.close()
