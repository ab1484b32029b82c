"""A branch of the demo run stops at the gate its source waits at; a reviewer decides it in the
inbox; the branch resumes and its draft step comes up (issue: nothing decides for a person)."""

from __future__ import annotations

import re
import time

import pytest

from tests.browser import support
from tests.browser.support import serve_app, signed_in_page

pytestmark = pytest.mark.browser

SETUP = """
import django; django.setup()
from django.contrib.auth import get_user_model
from runs.demo.job_search import build_demo
from runs.actions.workspaces import add_member, get_or_create_workspace
ws = get_or_create_workspace("demo", name="Demo")
add_member(ws, get_user_model().objects.create_user("rita", password="rita-password-123"), "owner")
build_demo(ws)
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with serve_app(tmp_path_factory.mktemp("fork-gates"), setup_code=SETUP) as url:
        yield url


@pytest.fixture(scope="module")
def page(server):
    with signed_in_page(server, "rita", viewport={"width": 1280, "height": 900}) as pg:
        yield pg


def _wait_for(page, url: str, selector: str, pattern: str, timeout: float = 30.0) -> str:
    """Reload ``url`` until ``selector``'s text matches (the executor works in the server's thread)."""
    deadline = time.time() + timeout
    text = ""
    while time.time() < deadline:
        page.goto(url)
        text = page.inner_text(selector) if page.locator(selector).count() else ""
        if re.search(pattern, text):
            return text
        time.sleep(0.5)
    raise AssertionError(f"{selector} never matched {pattern!r}; last text: {text!r}")


def deciders(history: str) -> list[str]:
    """Who made each decision in a gate panel's history ("#12 approved ..." then "by <actor> at ...")."""
    lines = [line.strip() for line in history.splitlines() if line.strip()]
    return [
        nxt.split(" at ")[0].removeprefix("by ")
        for line, nxt in zip(lines, lines[1:], strict=False)
        if re.match(r"#\d+ (approved|rejected|edited)", line)
    ]


def test_a_branch_waits_at_the_undecided_gate_until_a_reviewer_decides(page, server):
    page.goto(f"{server}/runs/run_demo_jobsearch/fork/?mode=branch&seq=10")
    page.get_by_role("button", name="Branch from #10").click()
    page.wait_for_url(re.compile(r".*/runs/(?!run_demo_jobsearch/)[^/]+/$"))
    fork_url = page.url
    fork_id = fork_url.rstrip("/").rsplit("/", 1)[-1]
    # the branch re-executes from #10 in the server's thread: it passes the copied search gate
    # (pending for a moment) before it waits at the score review, as in the source
    panel = _wait_for(page, fork_url, "#gate-panel", r"score[\s\S]*PAUSE_AFTER")
    status = page.inner_text("#run-status")
    assert "running" in status and "1 gate pending" in status
    assert not any(who.startswith("replay:") for who in deciders(panel))  # no gate decided by the machine
    support.shot(page, "fork-waits-at-gate")

    page.goto(f"{server}/runs/inbox/")
    row = page.locator(f"tr.inbox-row[data-run='{fork_id}']")
    assert row.count() == 1  # the inbox lists the waiting branch
    row.locator("input[name=note]").fill("scores look right")
    page.once("dialog", lambda d: d.accept())
    row.locator("button[value=approved]").click()
    page.wait_for_selector("#inbox-status")

    # resumed: the draft step comes up (a CHECKPOINT step asks for approval before it starts)
    panel = _wait_for(page, fork_url, "#gate-panel", r"draft")
    assert "CHECKPOINT" in panel
    history = page.inner_text("#gate-panel .history")
    assert "scores look right" in history and "rita" in history
    assert not any(who.startswith("replay:") for who in deciders(history))  # every decision is a person's
    support.shot(page, "fork-resumed-after-decision")
