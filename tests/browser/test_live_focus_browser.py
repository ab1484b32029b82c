"""Live refreshes keep the keyboard focus where the person left it (issue 52).

Run separately: ``.venv/bin/pytest -m browser tests/browser/test_live_focus_browser.py``.
The sections that poll while a job runs (an experiment's status every 2 s, a background import's
every 1 s) hold a Cancel button; the run page's workflow graph is pushed over the websocket and its
nodes are links. All three are morphed in place (hx-swap="morph", static/workbench/morph.js): a
person who tabbed to Cancel, or to a node, is still there after the refresh, while the progress
around it changes. With outerHTML the refresh replaced the button and the focus fell to <body>.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from tests.browser import support
from tests.browser.support import serve_app
from tests.conftest import LINEAR_WORKFLOW
from tests.live.cluster import Cluster

pytestmark = pytest.mark.browser

SETUP = """
import django; django.setup()
from django.contrib.auth import get_user_model
from django.utils import timezone
from evals import actions
from evals.models import Experiment, ExperimentItem
from runs.actions.workspaces import add_member, get_or_create_workspace
from runs.models_imports import ImportJob
ws = get_or_create_workspace("acme", name="Acme")
add_member(ws, get_user_model().objects.create_user("rita", password="rita-password-123"), "owner")
ds = actions.do_create_dataset(workspace=ws, name="Draft replies", description="decided drafts")
actions.do_add_items(dataset=ds, items=[
    {"id": f"item-{i}", "input": {"ticket": i}, "expected": {"text": f"reply {i}"}} for i in range(4)
])
e = Experiment.objects.create(public_id="exp_live", workspace=ws, dataset=ds, as_of_revision=1,
    name="haiku", change={}, evaluator={"kind": "exact"}, status="running", created_at=timezone.now())
for i in range(4):
    ExperimentItem.objects.create(experiment=e, item_key=f"item-{i}", status="pending")
ImportJob.objects.create(job_id="imp_live", workspace=ws, status="running", file="x.json", size=1000,
    bytes_read=100, events=3, created_by="user:rita", started_at=timezone.now())
"""

# Counts the swaps htmx made (a morph fires htmx:afterSwap like any swap).
COUNT_SWAPS = """() => { window.__swaps = 0;
  document.body.addEventListener("htmx:afterSwap", () => { window.__swaps += 1; }); }"""


def swaps(page) -> int:
    return page.evaluate("() => window.__swaps")


def focused(page) -> dict:
    return page.evaluate(
        """() => { const e = document.activeElement;
                   return {tag: e.tagName, text: (e.textContent || "").trim(), step: e.getAttribute("data-step")}; }"""
    )


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("live-focus")
    # no worker: nothing runs the experiment or the import; the test moves them on in the database
    with serve_app(tmp, setup_code=SETUP, workers=0) as url:
        yield url, tmp / "db.sqlite3"


@pytest.fixture(scope="module")
def page(served):
    with support.signed_in_page(served[0], "rita", viewport={"width": 1280, "height": 900}) as pg:
        yield pg


def write(database: Path, sql: str) -> None:
    with sqlite3.connect(database) as db:
        db.execute(sql)


def test_experiment_refresh_keeps_focus_on_cancel(page, served):
    base, database = served
    page.goto(f"{base}/evals/experiments/exp_live/")
    page.evaluate(COUNT_SWAPS)
    cancel = page.get_by_role("button", name="Cancel experiment")
    cancel.focus()
    assert focused(page)["text"] == "Cancel experiment"
    write(database, "UPDATE evals_experimentitem SET status = 'completed' WHERE item_key = 'item-0'")
    expect(page.locator("#exp-status")).to_contain_text("1 of 4 items finished", timeout=15_000)
    page.wait_for_function("() => window.__swaps >= 2", timeout=15_000)  # and one refresh more
    assert focused(page) == {"tag": "BUTTON", "text": "Cancel experiment", "step": None}
    page.keyboard.press("Shift+Tab")  # the focus is where the keyboard left it, not at the top
    assert focused(page)["tag"] != "BODY"
    assert page.console_errors == []


def test_import_refresh_keeps_focus_on_cancel(page, served):
    base, database = served
    page.goto(f"{base}/import/jobs/imp_live/")
    page.evaluate(COUNT_SWAPS)
    expect(page.locator("#import-job")).to_contain_text("10% of")
    page.get_by_role("button", name="Cancel import").focus()
    write(database, "UPDATE runs_importjob SET bytes_read = 600, events = 40 WHERE job_id = 'imp_live'")
    expect(page.locator("#import-job")).to_contain_text("60% of", timeout=15_000)
    expect(page.locator("#import-job")).to_contain_text("40 events")
    page.wait_for_function("() => window.__swaps >= 2", timeout=15_000)
    assert focused(page) == {"tag": "BUTTON", "text": "Cancel import", "step": None}
    assert swaps(page) >= 2
    assert page.console_errors == []


def test_graph_push_keeps_focus_on_a_node(page):
    """The graph comes over the websocket (hx-swap-oob="morph"): a node link keeps the focus."""
    with Cluster(database="sqlite", servers=1) as cluster:
        seed = cluster.seed(workflow=LINEAR_WORKFLOW, run_id="run_graph_focus")
        base = cluster.url(0, "")
        api = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {seed['token']}"}, timeout=30)
        # another context of the module's Chromium (one sync Playwright per thread)
        alice = support.new_page(page.context.browser, viewport={"width": 1280, "height": 900})
        alice.context.add_cookies([{"name": "sessionid", "value": seed["sessions"]["alice"], "url": base}])
        alice.goto(f"{base}/runs/run_graph_focus/")
        expect(alice.locator("#live")).to_have_attribute("data-live", "open")
        alice.locator('#graph a[data-step="review"]').focus()
        assert focused(alice)["step"] == "review"
        event = {"runId": "run_graph_focus", "ts": "2026-01-01T00:00:01.000Z", "stepId": "parse"}
        response = api.post(
            "/api/runs/run_graph_focus/events",
            json={"events": [{"id": "evt_gf_1", "type": "step_started", **event}]},
        )
        assert response.status_code == 200, response.text
        expect(alice.locator('#graph a[data-step="parse"]')).to_have_class("node s-running")
        alice.wait_for_timeout(300)  # the swap has settled
        assert focused(alice)["step"] == "review"
        errors = list(alice.console_errors)
        alice.context.close()
    assert errors == []
