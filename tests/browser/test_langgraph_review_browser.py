"""A LangGraph graph reviewed in Chromium: draft -> review (interrupt) -> publish, with a
conditional edge back to draft on rejection. The reviewer rejects once with a note and approves
the second time through the inbox; the graph revises and publishes; the run page shows draft's
attempts 1 and 2, both decisions with their notes, and the completed run. And ``wait()`` in a
pipeline returns as soon as a decision is taken on the run page.

The server's database look for decisions is every 30 s here (``WORKBENCH_GATE_WAIT_POLL_MS``):
anything quicker was woken by the decision's commit.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.browser.support import serve_app, shot, signed_in_page
from tests.live.test_reach import article_graph

pytestmark = pytest.mark.browser

POLL_SECONDS = 30.0
SETUP = """
import django, os; django.setup()
from django.contrib.auth import get_user_model
from accounts.tokens import create_token
from runs.actions.workspaces import add_member, get_or_create_workspace
ws = get_or_create_workspace("acme", name="Acme")
add_member(ws, get_user_model().objects.create_user("rita", password="rita-password-123"), "reviewer")
token = create_token(workspace=ws, name="pipeline", scopes=["read", "write"]).secret
open(os.path.join(os.environ["WORKBENCH_VAR_DIR"], "token.txt"), "w").write(token)
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("langgraph-browser")
    with serve_app(
        tmp, setup_code=SETUP, extra_env={"WORKBENCH_GATE_WAIT_POLL_MS": str(int(POLL_SECONDS * 1000))}
    ) as base:
        yield base, (Path(tmp) / "token.txt").read_text().strip()


def decide_in_inbox(page, base: str, title: str, decision: str, note: str) -> None:
    from playwright.sync_api import expect

    row = page.locator("tr.inbox-row", has_text=title)
    deadline = time.monotonic() + 30
    while row.count() == 0 or row.locator("form").count() == 0:
        assert time.monotonic() < deadline, "the gate never reached the inbox"
        page.goto(f"{base}/runs/inbox/")
        row = page.locator("tr.inbox-row", has_text=title)
    row.locator("input[name=note]").fill(note)
    page.once("dialog", lambda d: d.accept())
    row.locator(f"button[value={decision}]").click()
    expect(page.locator("#inbox-status")).to_contain_text("CHECKPOINT on review")


def test_reviewer_rejects_then_approves_a_langgraph_draft_in_the_inbox(server):
    from playwright.sync_api import expect
    from workbench_sdk import WorkbenchClient
    from workbench_sdk.langgraph import WorkbenchGraph

    base, token = server
    client = WorkbenchClient(base, token)
    graph = WorkbenchGraph(
        article_graph(), client=client, workflow_id="articles", title="Tides article", gate_timeout=120
    )
    outcome: dict = {}
    worker = threading.Thread(
        target=lambda: outcome.update(result=graph.invoke({"topic": "tides"})), daemon=True
    )
    worker.start()
    with signed_in_page(base, "rita") as page:
        decide_in_inbox(page, base, "Tides article", "rejected", "cite your sources")
        decide_in_inbox(page, base, "Tides article", "approved", "good now")
        worker.join(60)
        assert outcome["result"]["published"] is True
        assert outcome["result"]["draft"] == "A piece on tides (cite your sources)"
        page.goto(f"{base}/runs/{graph.last_run.run_id}/")
        expect(page.locator("#run-status")).to_contain_text("completed")
        timeline = page.locator("#timeline").inner_text()
        assert "step draft started · attempt 1" in timeline and "step draft started · attempt 2" in timeline
        assert "step review started · attempt 2" in timeline
        history = page.locator("#gate-panel .history").inner_text()
        assert "rejected" in history and "cite your sources" in history
        assert "approved" in history and "good now" in history
        nodes = " | ".join(page.locator("svg a.node text.sub").all_text_contents())
        assert "completed · attempt 2" in nodes  # draft and review in the graph
        assert page.console_errors == []  # type: ignore[attr-defined]
        shot(page, "langgraph-run-attempts")
    client.close()


def test_wait_returns_when_the_page_decides(server):
    from playwright.sync_api import expect
    from workbench_sdk import RemoteRun, WorkbenchClient

    base, token = server
    client = WorkbenchClient(base, token)
    run = RemoteRun.start(
        client, workflow={"id": "memo", "version": 0, "steps": [{"id": "write"}]}, title="Memo"
    )
    run.start_step("write")
    handle = run.gate("write", name="tone", reason="Is the tone right?", payload={"text": "Dear all"})
    got: dict = {}

    def wait():
        got["decision"] = handle.wait(timeout=POLL_SECONDS * 2)
        got["returned"] = time.monotonic()

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    with signed_in_page(base, "rita") as page:
        page.goto(f"{base}/runs/{run.run_id}/")
        panel = page.locator("#gate-panel")
        expect(panel.locator(".gate-payload")).to_contain_text('"text": "Dear all"')  # the payload, shown
        panel.locator("textarea[name=note]").fill("a little warmer")
        clicked = time.monotonic()
        panel.locator("button[value=approved]").click()
        expect(panel).to_contain_text("No gate is waiting.")
        waiter.join(POLL_SECONDS * 2)
    latency = got["returned"] - clicked
    print(f"wait() returned {latency:.3f} s after the click")
    assert got["decision"]["decision"] == "approved" and got["decision"]["note"] == "a little warmer"
    assert got["decision"]["by"] == "user:rita"
    assert latency < POLL_SECONDS / 2  # woken by the decision's commit, not the 30 s database look
    client.close()
