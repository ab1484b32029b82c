"""Gate judges in Chromium: an owner attaches a judge from the judges page, reads an existing
judge's agreement with people, and is refused delegation below the kappa floor (and a floor below
0.6), in words; a reviewer overrules a machine decision from the gate panel in one action and lands
on the fork, decided by them, while the source keeps the judge's decision.

Run alone: ``pytest tests/browser/test_judges_browser.py -m browser``.
"""

from __future__ import annotations

import json

import pytest

from tests.browser.support import launch, new_page, serve_app, shot, sign_in

pytestmark = pytest.mark.browser

SETUP = """
import django; django.setup()
from django.contrib.auth import get_user_model
from judges.actions import do_create_judge, judge_run
from runs import actions
from runs.actions.workspaces import add_member, get_or_create_workspace
from runs.engine import commands as cmd
ws = get_or_create_workspace("acme", name="Acme")
User = get_user_model()
for name, role in (("alice", "owner"), ("bob", "reviewer")):
    add_member(ws, User.objects.create_user(name, password=f"{name}-password-123"), role)
workflow = {"id": "wf-j", "version": 1, "steps": [{"id": "review", "gatePolicy": "PAUSE_BEFORE"}], "edges": []}
judge = do_create_judge(workspace=ws, name="errors", kind="rule", workflow_id="wf-j", step_id="review",
                        gate="PAUSE_BEFORE", config={"rules": {"errors": True}, "onMatch": "rejected"})
# 50 gates the rule judged "approved" (no errors); people approved 25 and rejected 25: kappa 0
for n in range(50):
    run_id = f"run_j{n:02d}"
    run = actions.do_start_run(workspace=ws, workflow=workflow, run_id=run_id, actor="user:alice")
    judge_run(run.pk)
    decision = "approved" if n % 2 == 0 else "rejected"
    actions.do_command(workspace=ws, run_id=run_id, actor="user:bob",
                       command=cmd.ResolveGate(step_id="review", gate="PAUSE_BEFORE", decision=decision))
    judge_run(run.pk)
# a gate a judge decided (as judges.actions._decide records it)
actions.do_start_run(workspace=ws, workflow=workflow, run_id="run_machine", actor="user:alice", title="Invoice 7")
actions.do_command(workspace=ws, run_id="run_machine", actor="judge:errors@1", channel="judge",
                   command=cmd.ResolveGate(step_id="review", gate="PAUSE_BEFORE", decision="approved",
                                           note="Decided by judge errors@1 under its delegation policy"))
print(judge.judge_id)
"""


def test_judge_policy_page_and_overruling_a_machine_decision(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    with serve_app(tmp_path, setup_code=SETUP, workers=0) as base, sync_playwright() as pw:
        browser = launch(pw)
        try:
            alice = new_page(browser, ignore=("status of 400", "status of 422"))
            sign_in(alice, base, "alice")

            # attach a judge from the list page: its own page opens
            alice.goto(f"{base}/judges/")
            expect(alice.get_by_role("link", name="errors@1")).to_be_visible()
            alice.fill("#j-name", "second-look")
            alice.fill("#j-workflow", "wf-j")
            alice.fill("#j-step", "review")
            alice.check("#j-kind-rule")
            alice.fill("#j-rules", '{"errors": true}')
            alice.get_by_role("button", name="Attach judge").click()
            expect(alice.get_by_role("heading", level=1)).to_have_text("Judge second-look@1")
            expect(alice.locator('#agreement [data-stat="1"]')).to_have_text("0")
            shot(alice, "judges-attached")

            # the calibrated judge: 50 human-decided items, kappa 0, below the floor
            alice.goto(f"{base}/judges/")
            alice.get_by_role("link", name="errors@1").click()
            expect(alice.locator('#agreement [data-stat="1"]')).to_have_text("50")
            expect(alice.locator('#agreement [data-stat="2"]')).to_have_text("0.000")
            expect(alice.locator("#confusion tbody")).to_contain_text("25")
            expect(alice.locator("#agreement ~ p.muted").first).to_contain_text("is not earned")
            # the kappa chart is one tab stop (a roving tabindex, static/workbench/charts.js)
            chart = alice.locator('[data-chart="kappa"]')
            marks = chart.locator("svg[data-chart-marks] g.mark")
            assert marks.count() >= 1 and chart.locator('g.mark[tabindex="0"]').count() == 1
            marks.first.focus()
            expect(chart.locator("[data-chart-value]")).to_have_text(marks.first.get_attribute("aria-label"))
            if marks.count() > 1:
                alice.keyboard.press("End")
                expect(marks.last).to_be_focused()
                assert chart.locator('g.mark[tabindex="0"]').count() == 1
            alice.select_option("#p-delegation", "approve")
            alice.get_by_role("button", name="Save policy").click()
            expect(alice.locator("#policy-error")).to_contain_text("DELEGATION_NOT_EARNED")
            expect(alice.locator("#policy-error")).to_contain_text("floor")
            expect(alice.locator("#p-delegation")).to_have_value("off")  # nothing changed
            shot(alice, "judges-delegation-refused")
            alice.fill("#p-floor", "0.5")
            alice.get_by_role("button", name="Save policy").click()
            expect(alice.locator("#policy-error")).to_contain_text("FLOOR_TOO_LOW")

            # bob overrules the machine decision on the run page, in one action
            bob = new_page(browser)
            sign_in(bob, base, "bob")
            bob.goto(f"{base}/runs/run_machine/")
            history = bob.locator("#gate-panel .history")
            expect(history).to_contain_text("machine decision")
            expect(history).to_contain_text("by judge:errors@1")
            history.get_by_text("Overrule", exact=True).click()
            bob.fill("#gate-panel .overrule textarea", "the totals do not add up")
            shot(bob, "judges-overrule-open")
            history.get_by_role("button", name="Fork and reject").click()
            bob.wait_for_url(lambda url: "/runs/run_machine/" not in url)
            expect(bob.locator("#gate-panel .history")).to_contain_text("by user:bob")
            expect(bob.locator("#gate-panel .history")).to_contain_text("rejected")
            expect(bob.locator("#gate-panel")).to_contain_text("No gate is waiting.")
            expect(bob.get_by_role("status").first).to_contain_text("Overruled")
            shot(bob, "judges-overruled-fork")
            fork_id = bob.url.split("/runs/")[1].split("/")[0]
            events = json.loads(bob.request.get(f"{base}/api/runs/{fork_id}/events").text())["events"]
            resolved = [e["event"] for e in events if e["event"]["type"] == "human_gate_resolved"]
            assert [r["decision"] for r in resolved] == ["rejected"]
            assert "the totals do not add up" in resolved[0]["note"]
            # the source keeps the judge's decision; the inbox's history shows both
            bob.goto(f"{base}/runs/inbox/")
            recent = bob.locator("#recent-decisions")
            expect(recent).to_contain_text("by judge:errors@1")
            expect(recent.locator(".badge-machine")).to_have_count(1)
            for page in (alice, bob):
                assert page.console_errors == []  # type: ignore[attr-defined]
        finally:
            browser.close()
