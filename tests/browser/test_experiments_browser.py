"""The experiment compare page in Chromium: baseline vs candidate per item, regressions first, the
regressions-only filter, output diffs; the dataset pages; axe-core (light and dark) with no
serious or critical violation. Screenshots go to test-results/screenshots/experiments-*.png."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser import support
from tests.browser.support import serve_app
from tests.browser.test_compare_browser import axe_violations

pytestmark = pytest.mark.browser

SETUP = """
import django; django.setup()
from decimal import Decimal
from django.contrib.auth import get_user_model
from django.utils import timezone
from evals import actions
from evals.actions.experiments import summarize
from evals.models import Experiment, ExperimentItem
from runs.actions.workspaces import add_member, get_or_create_workspace
ws = get_or_create_workspace("acme", name="Acme")
add_member(ws, get_user_model().objects.create_user("rita", password="rita-password-123"), "owner")
ds = actions.do_create_dataset(workspace=ws, name="Draft replies", description="decided drafts")
actions.do_add_items(dataset=ds, items=[
    {"id": f"item-{i}", "input": {"ticket": i}, "expected": {"text": f"reply {i}"}, "label": "approved"}
    for i in range(5)
])
def experiment(pid, name, scores, baseline=None, text="reply"):
    e = Experiment.objects.create(public_id=pid, workspace=ws, dataset=ds, as_of_revision=1, name=name,
        change={"configurable": {"draftModel": name}} if baseline else {}, evaluator={"kind": "exact"},
        baseline=baseline, status="completed", created_at=timezone.now(), finished_at=timezone.now())
    for i, s in enumerate(scores):
        ExperimentItem.objects.create(experiment=e, item_key=f"item-{i}", status="completed", score=s,
            output='{"text":"%s %d <b>x</b>"}' % (text if s < 1 else "reply", i), cost=Decimal("0.01"),
            source_cost=Decimal("0.02"), provider_calls=1, cache_hits=2, latency_ms=120 + i)
    e.summary = summarize(e)
    e.save()
    return e
base = experiment("exp_base", "baseline", [1, 1, 1, 0, 1])
experiment("exp_cand", "haiku", [1, 0, 1, 0, 0.5], baseline=base, text="changed")
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with serve_app(tmp_path_factory.mktemp("experiments"), setup_code=SETUP) as url:
        yield url


@pytest.fixture(scope="module")
def page(server):
    with support.signed_in_page(server, "rita", viewport={"width": 1280, "height": 900}) as pg:
        yield pg


def test_compare_page_shows_regressions_first_and_filters(page, server):
    page.goto(f"{server}/evals/experiments/exp_cand/")
    rows = page.locator("#exp-items tbody tr")
    assert rows.count() == 5
    first_two = [rows.nth(i).get_attribute("data-item") for i in range(2)]
    assert first_two == ["item-1", "item-4"]  # worst regression (-1) first, then -0.5
    assert "2 regressions shown" in page.locator("#regression-count").inner_text()
    page.locator("#exp-items details summary").first.click()
    assert page.locator("#exp-items details[open] pre").count() >= 1
    support.shot(page, "experiments-compare")
    assert axe_violations(page) == []
    page.check("#only-reg")
    page.click("form.filters button[type=submit]")
    page.wait_for_url("**regressions=1**")
    assert page.locator("#exp-items tbody tr").count() == 2
    assert axe_violations(page) == []


def test_dataset_pages(page, server):
    page.goto(f"{server}/evals/datasets/")
    page.click("text=Draft replies")
    expect(page.locator("table tbody tr")).to_have_count(5)  # the dataset's page, once it has loaded
    support.shot(page, "experiments-dataset")
    assert axe_violations(page) == []
    page.fill("#as-of", "0")
    page.click("form.filters button[type=submit]")
    # the submit navigates: wait for the new page, not for whatever the document holds mid-load
    expect(page.locator("main")).to_contain_text("Revision 0 of 1: 0 items", timeout=30_000)
