"""Annotation queue review in Chromium (issue 28): a reviewer completes 20 queue items with the
keyboard alone (keystrokes per item printed), the completed review shows live in the run's
timeline, axe-core has nothing serious or critical (light, dark, 390 px)."""

from __future__ import annotations

import pytest

from tests.browser import support
from tests.browser.support import serve_app

pytestmark = pytest.mark.browser

ITEMS = 20

SETUP = f"""
import django; django.setup()
from django.contrib.auth import get_user_model
from runs import actions
from runs.engine import commands as c
from runs.actions.workspaces import add_member, get_or_create_workspace
from review.actions import do_add_items, do_create_queue
ws = get_or_create_workspace("acme", name="Acme")
add_member(ws, get_user_model().objects.create_user("rita", password="rita-password-123"), "reviewer")
wf = {{"id": "wf-q", "version": 1, "title": "Draft a letter",
      "steps": [{{"id": "draft"}}, {{"id": "send"}}], "edges": [{{"id": "e1", "from": "draft", "to": "send"}}]}}
for i in range({ITEMS}):
    rid = f"run_q_{{i:02d}}"
    actions.do_start_run(workspace=ws, workflow=wf, actor="pipeline", run_id=rid, title=f"Letter {{i:02d}}")
    actions.do_commands(workspace=ws, run_id=rid, actor="pipeline", commands=[
        c.BeginStep("draft"), c.Annotate(text=f"drafted letter {{i}}"), c.CompleteStep("draft")])
q = do_create_queue(workspace=ws, name="Letters", instructions="Is the letter ready to send?", score_configs=[
    {{"name": "tone", "dataType": "CATEGORICAL", "description": "How it reads",
      "categories": [{{"label": "warm", "value": 2}}, {{"label": "neutral", "value": 1}}, {{"label": "cold", "value": 0}}]}},
    {{"name": "send", "dataType": "BOOLEAN", "description": "Ready to send"}}])
q.queue_id = "q_letters"; q.save()
do_add_items(queue=q, items=[{{"runId": f"run_q_{{i:02d}}"}} for i in range({ITEMS})])
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with serve_app(tmp_path_factory.mktemp("queue-review"), setup_code=SETUP) as url:
        yield url


def axe_violations(page) -> list[str]:
    from axe_playwright_python.sync_playwright import Axe

    out = []
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for v in Axe().run(page).response["violations"]:
            if v["impact"] in ("serious", "critical"):
                out.append(f"{scheme}: {v['id']} ({v['impact']}) {[n['target'] for n in v['nodes'][:3]]}")
    page.emulate_media(color_scheme="light")
    return out


def test_twenty_items_with_the_keyboard_and_the_review_live_in_the_timeline(server):
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as pw:
        browser = support.launch(pw)
        page = support.new_page(browser, viewport={"width": 1280, "height": 900})
        support.sign_in(page, server, "rita")
        watcher = support.new_page(browser, viewport={"width": 1280, "height": 900})
        support.sign_in(watcher, server, "rita")
        watcher.goto(f"{server}/runs/run_q_00/")
        expect(watcher.locator("#live-indicator")).to_have_attribute("data-state", "open")

        page.goto(f"{server}/review/q_letters/")
        assert axe_violations(page) == []
        page.locator("#start-review").focus()
        page.keyboard.press("Enter")
        page.wait_for_url(lambda url: "/items/" in url)
        assert axe_violations(page) == []
        per_item = []
        seen = []
        for i in range(ITEMS):
            page.wait_for_selector("[data-queue-form]")
            url = page.url
            assert url not in seen, "an item came back"
            seen.append(url)
            keys = ["1" if i % 2 else "2", "ArrowDown", "1", "Control+Enter"]  # tone, next field, yes, done
            for key in keys:
                page.keyboard.press(key)
            per_item.append(len(keys))
            if i < ITEMS - 1:
                page.wait_for_url(lambda u, before=url: u != before and "/items/" in u)
            else:
                page.wait_for_url(f"{server}/review/q_letters/")
            if i == 0:
                # the completed review is in the run's timeline, live, on the page left open
                expect(watcher.locator("#timeline-list")).to_contain_text("Review in “Letters”")
        print(
            f"\nqueue review: {ITEMS} items completed with {sum(per_item)} keystrokes "
            f"({sum(per_item) / ITEMS:.1f} per item: pick, next field, pick, Ctrl+Enter)"
        )
        expect(page.locator("body")).to_contain_text("20 of 20 reviews done")
        # the phone: the item page without sideways scroll, axe clean
        phone = support.new_page(browser, viewport={"width": 390, "height": 844})
        support.sign_in(phone, server, "rita")
        phone.goto(seen[0])
        assert phone.evaluate("() => document.documentElement.scrollWidth") <= 390
        assert axe_violations(phone) == []
        for p in (page, watcher, phone):
            assert p.console_errors == [], p.console_errors
        browser.close()
