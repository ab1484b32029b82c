"""The Workbench pages in real Chromium against a daphne server with a file-based SQLite database.

Run separately: ``.venv/bin/pytest tests/browser/test_pages_browser.py -m browser``.
Sign in, open a run, approve a pending gate and see the run move on, filter the timeline, open the
state diff, follow a deep link, edit an artifact (invalid, then valid), import a bundle; screenshots
of every page go to test-results/screenshots/. Console errors (CSP violations included) fail a test.
"""

from __future__ import annotations

import pytest

from tests.browser.support import launch, new_page, serve_app, shot
from tests.browser.support import sign_in as sign_in_as

pytestmark = pytest.mark.browser

SETUP = """
import django; django.setup()
from django.contrib.auth import get_user_model
from runs import actions
from runs.selectors.bundles import export_bundle_bytes
from runs.engine import commands as c
from runs.actions.workspaces import add_member, get_or_create_workspace
ws = get_or_create_workspace("acme", name="Acme")
other = get_or_create_workspace("elsewhere", name="Elsewhere")
User = get_user_model()
add_member(ws, User.objects.create_user("bob", password="bob-password-123"), "reviewer")
add_member(ws, User.objects.create_user("olga", password="olga-password-123"), "owner")
wf = {"id": "wf-review", "version": 1, "title": "Parse, review, publish",
      "steps": [{"id": "parse"}, {"id": "review", "gatePolicy": "PAUSE_BEFORE"}, {"id": "publish"}],
      "edges": [{"id": "e1", "from": "parse", "to": "review"}, {"id": "e2", "from": "review", "to": "publish"}]}
def do(ws, rid, cmd):
    actions.do_command(workspace=ws, run_id=rid, command=cmd, actor="pipeline")
actions.do_start_run(workspace=ws, workflow=wf, actor="pipeline", run_id="run_browser", tags=["browser"],
                     subject={"userId": "u-7"}, metadata={"note": "<script>alert(1)</script>"})
do(ws, "run_browser", c.BeginStep(step_id="parse"))
do(ws, "run_browser", c.LogModelIO(direction="request", provider="anthropic", model="haiku", step_id="parse", correlation_id="m1"))
for i in range(4):
    do(ws, "run_browser", c.LogModelIO(direction="stream_chunk", provider="anthropic", model="haiku", step_id="parse",
                                       correlation_id="m1", payload={"delta": f"part{i} "}))
do(ws, "run_browser", c.LogModelIO(direction="response", provider="anthropic", model="haiku", step_id="parse", correlation_id="m1",
                                   usage={"inputTokens": 100, "outputTokens": 20}, cost={"amount": 0.001, "currency": "USD"}))
do(ws, "run_browser", c.WriteArtifact(key="profile", type_id="job.profile",
                                      data={"headline": "Engineer", "skills": ["python"], "summary": "ok"}))
do(ws, "run_browser", c.CompleteStep(step_id="parse"))
actions.do_start_run(workspace=ws, workflow=wf, actor="pipeline", run_id="run_long")
actions.do_commands(workspace=ws, run_id="run_long", actor="pipeline",
                    commands=[c.Annotate(text=f"note {i}") for i in range(160)])
actions.do_start_run(workspace=other, workflow=wf, actor="pipeline", run_id="run_to_import", tags=["imported"])
do(other, "run_to_import", c.BeginStep(step_id="parse"))
demo = get_or_create_workspace("demo", name="Demo")
actions.do_start_run(workspace=demo, workflow=wf, actor="pipeline", run_id="run_demo_jobsearch", tags=["demo"])
do(demo, "run_demo_jobsearch", c.BeginStep(step_id="parse"))
do(demo, "run_demo_jobsearch", c.CompleteStep(step_id="parse"))
from runs.models import Run
from runs.demo.public import publish_snapshot
publish_snapshot(Run.objects.get(workspace=demo, run_id="run_demo_jobsearch"))  # the public /runs/demo
open(__BUNDLE__, "wb").write(export_bundle_bytes(Run.objects.get(workspace=other, run_id="run_to_import")))
actions.do_delete_run(workspace=other, run_id="run_to_import")  # run ids are unique across workspaces
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pages-browser")
    bundle = tmp / "bundle.json"
    with serve_app(tmp, setup_code=SETUP.replace("__BUNDLE__", repr(str(bundle)))) as url:
        yield {"url": url, "bundle": bundle}


@pytest.fixture
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = launch(pw)
        yield b
        b.close()


def _page(browser, server, *, width=1280, scheme="light", sign_in=True, user="bob"):
    page = new_page(browser, viewport={"width": width, "height": 900}, color_scheme=scheme)
    if sign_in:
        sign_in_as(page, server["url"], user)
    return page


def test_sign_in_open_run_approve_gate_and_see_it_progress(browser, server):
    page = _page(browser, server)
    shot(page, "runs-list")
    page.click('a[href="/runs/run_browser/"]')
    page.wait_for_selector("#gate-panel")
    assert "gate-pending" in page.get_attribute('[data-step="review"]', "class")
    assert page.locator("#run-status").inner_text().endswith("1 gate pending")
    shot(page, "run-detail")
    page.fill("#gate-panel textarea[name=note]", "looks right")
    page.click("#gate-panel button[value=approved]")
    page.wait_for_selector("#gate-panel >> text=No gate is waiting")
    history = page.locator("#gate-panel .history").inner_text()
    assert "approved" in history and "by user:bob" in history and "looks right" in history
    # the out-of-band swaps moved the rest of the page along
    assert "gate-pending" not in (page.get_attribute('[data-step="review"]', "class") or "")
    assert "pending" not in page.locator("#run-status").inner_text()
    shot(page, "run-detail-approved")
    # the inbox is empty now
    page.click("#sidebar >> text=Inbox")
    assert "Nothing waits for review" in page.inner_text("main")
    assert page.console_errors == []


def test_filter_timeline_open_state_diff_and_deep_link(browser, server):
    page = _page(browser, server)
    page.goto(f"{server['url']}/runs/run_browser/")
    stream = page.locator("#timeline-list > li[data-upto]").first  # stream collapsed into one row
    stream.locator(":scope > details > summary").click()  # a light row loads its detail when opened
    stream.locator(".ev-actions").wait_for()
    assert "part0 part1 part2 part3" in stream.text_content()
    page.select_option("#t-type", "model_io")
    page.click("#timeline form button[type=submit]")
    page.wait_for_selector("#timeline-body >> text=Filtered by type")
    types = page.locator("#timeline-list > li").evaluate_all("els => els.map(e => e.className)")
    assert types and all("ev-model_io" in t for t in types)
    shot(page, "timeline-filtered")
    page.click("#timeline-list > li:first-child > details > summary")
    page.click("#timeline-list > li:first-child details.state-at > summary")
    page.wait_for_selector("#timeline-list > li:first-child .state-diff")
    diff = page.inner_text("#timeline-list > li:first-child .state-diff")
    assert "What changed since" in diff and "Before" in diff and "After" in diff
    shot(page, "state-diff")
    # a deep link to an event outside the first page jumps to the window holding it
    page.goto(f"{server['url']}/runs/run_long/#seq-20")
    page.wait_for_selector("#seq-20")
    assert "at=20" in page.url
    assert (
        page.evaluate("() => document.querySelector(':target') && document.querySelector(':target').id")
        == "seq-20"
    )
    page.click("text=Later →") if page.locator("text=Later →").count() else None
    assert page.console_errors == []


def test_edit_artifact_invalid_then_valid(browser, server):
    page = _page(browser, server)
    page.goto(f"{server['url']}/runs/run_browser/artifacts/?key=profile")
    # job.profile has arrays and optional fields: a form, lists one item per line
    page.fill("#f-headline", "")
    page.click("text=Save new version")
    page.wait_for_selector("#f-headline-err")
    assert "This field cannot be empty." in page.inner_text("#f-headline-err")
    assert page.get_attribute("#f-headline", "aria-invalid") == "true"
    # autofocus is applied at the next rendering update, not when the element appears: wait for it
    page.wait_for_function(
        "() => document.activeElement && document.activeElement.id === 'f-headline'", timeout=5000
    )  # focus on the first error
    shot(page, "artifact-invalid")
    page.fill("#f-headline", "Staff engineer")
    page.fill("#f-skills", "python\nhtmx")
    page.click("text=Save new version")
    page.wait_for_selector("text=Saved profile v2")
    assert "v2" in page.inner_text("#versions-h + form + ul")
    page.select_option("#diff-a", "1")
    page.select_option("#diff-b", "2")
    page.click("text=Compare")
    page.wait_for_selector("text=/headline")
    shot(page, "artifact-diff")
    assert page.console_errors == []


def test_import_a_bundle(browser, server):
    page = _page(browser, server, user="olga")  # importing is an owner's action (runs/actions/permissions.py)
    page.click("#sidebar >> text=Import")
    page.set_input_files("#bundle-file", str(server["bundle"]))
    page.click("text=Verify")
    page.wait_for_selector("#check-result")
    assert page.locator("#check-result .check-ok").count() == 4
    shot(page, "import-verified")
    page.click("text=Import this run")
    page.wait_for_load_state()
    if page.locator("#run-status").count() == 0:
        pytest.fail(page.inner_text("main"))
    assert "/runs/run_to_import/" in page.url
    assert "imported" in page.inner_text(".run-facts").lower()  # the run's details panel
    assert page.console_errors == []


def test_small_screen_dark_mode_and_ledger(browser, server):
    page = _page(browser, server, width=375, scheme="dark")
    page.goto(f"{server['url']}/runs/run_browser/")
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= 380  # nothing but the graph's own scroller is wider than the screen
    bg = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    assert bg != "rgb(255, 255, 255)"
    page.keyboard.press("Tab")
    outline = page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none"
    shot(page, "run-detail-375-dark")
    page.goto(f"{server['url']}/runs/run_browser/ledger/")
    assert "anthropic / haiku" in page.inner_text("main")
    shot(page, "run-ledger-375-dark")
    assert page.console_errors == []


def test_public_demo_needs_no_sign_in(browser, server):
    page = _page(browser, server, sign_in=False)
    response = page.goto(f"{server['url']}/runs/")
    assert "/accounts/login/" in page.url and response.ok
    shot(page, "sign-in")
    page.goto(f"{server['url']}/runs/demo")
    page.wait_for_selector("#gate-panel")
    assert "run_demo_jobsearch" in page.inner_text(".run-header")
    assert page.locator("#gate-panel button").count() == 0
    page.click("#timeline-list > li:first-child > details > summary")
    page.click("#timeline-list > li:first-child details.state-at > summary")
    page.wait_for_selector("#timeline-list > li:first-child .state-diff")
    shot(page, "public-demo")
    assert page.console_errors == []
