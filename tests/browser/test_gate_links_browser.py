"""E-mailed decision links in Chromium (issue 49): the console e-mail of a waiting gate carries
Approve/Reject links; opening one shows a confirm page and decides nothing; the button decides as
the recipient; the same link again, an expired link and another recipient's link decide nothing
and say so in words.

Run alone: ``pytest tests/browser/test_gate_links_browser.py -m browser``.
"""

from __future__ import annotations

import email
import re
import sqlite3
import time

import pytest

from tests.browser.support import launch, new_page, serve_app, shot, sign_in

pytestmark = pytest.mark.browser

SETUP = """
import django; django.setup()
from django.contrib.auth import get_user_model
from runs import actions
from runs.actions.webhooks import do_set_notification_preferences
from runs.actions.workspaces import add_member, get_or_create_workspace
from runs.engine import commands as c
from tests.conftest import LINEAR_WORKFLOW
ws = get_or_create_workspace("acme", name="Acme")
User = get_user_model()
for name in ("bob", "carol"):
    person = User.objects.create_user(name, password=name + "-password-123", email=name + "@example.com")
    add_member(ws, person, "reviewer")
    do_set_notification_preferences(user=person, workspace=ws, gates_to_decide=True, runs_i_started=False)
for run_id, title in (("run_a", "Invoice batch A"), ("run_b", "Invoice batch B")):
    actions.do_start_run(workspace=ws, workflow=LINEAR_WORKFLOW, run_id=run_id, actor="user:bob", title=title)
    actions.do_commands(workspace=ws, run_id=run_id, commands=[c.BeginStep(step_id="parse"), c.CompleteStep(step_id="parse")])
"""

REFUSED = ("status of 403", "status of 409", "status of 410")
LINK = re.compile(r"Approve: http://wb\.test(/gate-links/[^\s]+)")


def _links(stdout, deadline: float) -> dict[tuple[str, str], str]:
    """(recipient, run title) -> the Approve link of each console e-mail."""
    found: dict[tuple[str, str], str] = {}
    while time.time() < deadline:
        found = {}
        for text in stdout.read_text().split("-" * 79):
            if "Subject:" not in text or "Content-Type:" not in text:
                continue
            # a block may start with log lines of the server: the message starts at its headers
            parsed = email.message_from_string(text[text.index("Content-Type:") :])
            mail = f"To: {parsed['To']}\n" + (parsed.get_payload(decode=True) or b"").decode()
            to = re.search(r"^To: (\w+)@example\.com", mail, re.M)
            run = re.search(r"^Run: (.+)$", mail, re.M)
            link = LINK.search(mail)
            if to and run and link:
                found[(to.group(1), run.group(1).strip())] = link.group(1)
        if len(found) == 4:
            return found
        time.sleep(0.1)
    raise AssertionError(f"four gate e-mails with links expected, found {sorted(found)}")


def _decisions(db) -> list[tuple[str, str]]:
    with sqlite3.connect(db) as conn:
        return conn.execute(
            "SELECT r.run_id, e.actor FROM runs_event e JOIN runs_run r ON r.id = e.run_id "
            "WHERE e.type = 'human_gate_resolved' ORDER BY r.run_id"
        ).fetchall()


def test_open_confirm_decide_and_refused_links(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    env = {"WORKBENCH_SITE_URL": "http://wb.test", "WORKBENCH_EMAIL": "console"}
    with serve_app(tmp_path, setup_code=SETUP, extra_env=env, keep_stdout=True, workers=1) as base:
        links = _links(tmp_path / "stdout.log", time.time() + 120)  # the outbox's worker, on a busy machine
        db = tmp_path / "db.sqlite3"
        with sync_playwright() as pw:
            browser = launch(pw)
            page = new_page(browser, ignore=REFUSED)

            # A scanner (or bob) opens the link: a confirm page, nothing decided.
            page.goto(base + links[("bob", "Invoice batch A")])
            assert page.locator("h1").inner_text() == "Confirm your decision", page.locator(
                "#gate-link"
            ).inner_text()
            expect(page.locator("#gate-link")).to_contain_text("Invoice batch A")
            expect(page.locator("#gate-link")).to_contain_text("before the step runs")
            page.reload()
            assert _decisions(db) == []
            shot(page, "gate-link-confirm")

            # The POST decides, as bob, through the e-mail channel.
            page.fill("#gate-link-note", "checked the totals")
            page.locator("button[value=approved]").click()
            page.wait_for_load_state()
            assert "You approved PAUSE_BEFORE" in page.locator("main").inner_text(), page.locator(
                "main"
            ).inner_text()
            assert _decisions(db) == [("run_a", "user:bob")]
            with sqlite3.connect(db) as conn:
                (meta,) = conn.execute("SELECT metadata FROM runs_gatedecisionmeta").fetchone()
            assert '"workbench.channel": "email"' in meta or '"workbench.channel":"email"' in meta

            # The same link again: used, says so, decides nothing.
            page.goto(base + links[("bob", "Invoice batch A")])
            expect(page.locator("[data-outcome=LINK_USED]")).to_contain_text("already used")
            expect(page.locator("form#gate-link-form")).to_have_count(0)

            # Another recipient's link, opened by a signed-in carol: refused in words.
            carol = new_page(browser, ignore=REFUSED)
            sign_in(carol, base, "carol")
            carol.goto(base + links[("bob", "Invoice batch B")])
            expect(carol.locator("[data-outcome=LINK_FOREIGN]")).to_contain_text("sent to another person")
            expect(carol.locator("form#gate-link-form")).to_have_count(0)

            # carol's own link, expired: refused in words.
            with sqlite3.connect(db) as conn:
                conn.execute(
                    "UPDATE runs_gatelink SET expires_at = '2000-01-01 00:00:00' WHERE recipient_id = "
                    "(SELECT id FROM auth_user WHERE username = 'carol')"
                )
            carol.goto(base + links[("carol", "Invoice batch B")])
            expect(carol.locator("[data-outcome=LINK_EXPIRED]")).to_contain_text("expired")
            shot(carol, "gate-link-expired")
            assert _decisions(db) == [("run_a", "user:bob")]
            browser.close()
