"""Reviewer and PM pages in Chromium: the blockers of issue 18, axe-core, and a crawl of every link.

One daphne server and one signed-in page for the whole module (the tests run in file order and
share them). Screenshots go to test-results/screenshots/. Console errors (CSP violations
included) fail a test; so does any response >= 500 in the crawl and any serious or critical
axe-core violation on any kind of page.
"""

from __future__ import annotations

import re
from collections import deque
from urllib.parse import urldefrag, urljoin, urlparse

import pytest

from tests.browser import support
from tests.browser.support import serve_app, signed_in_page

pytestmark = pytest.mark.browser

SETUP = """
import django; django.setup()
from django.contrib.auth import get_user_model
from runs import actions
from runs.demo.job_search import build_demo
from runs.engine import commands as c
from runs.workspaces import add_member, get_or_create_workspace
ws = get_or_create_workspace("demo", name="Demo")
add_member(ws, get_user_model().objects.create_user("rita", password="rita-password-123"), "owner")
from runs.demo.public import publish_snapshot
publish_snapshot(next(r for r in build_demo(ws) if r.run_id == "run_demo_jobsearch"))  # /runs/demo
wf = {"id": "wf-cp", "version": 1, "title": "Draft, check, send",
      "steps": [{"id": "draft"}, {"id": "check", "gatePolicy": "CHECKPOINT"}, {"id": "send"}],
      "edges": [{"id": "e1", "from": "draft", "to": "check"}, {"id": "e2", "from": "check", "to": "send"}]}
actions.do_start_run(workspace=ws, workflow=wf, actor="pipeline", run_id="run_checkpoint")
for cmd in (c.BeginStep("draft"),
            c.WriteArtifact(key="rule", type_id="rules.basic", data={"kind": "salary", "value": 100}),
            c.CompleteStep("draft"), c.BeginStep("check")):
    actions.do_command(workspace=ws, run_id="run_checkpoint", command=cmd, actor="pipeline")
actions.do_start_run(workspace=ws, workflow=wf, actor="pipeline", run_id="run_to_reject",
                     subject={"userId": "user-dee", "tenantId": "tenant-x"})
for cmd in (c.BeginStep("draft"), c.CompleteStep("draft"), c.BeginStep("check")):
    actions.do_command(workspace=ws, run_id="run_to_reject", command=cmd, actor="pipeline")
actions.do_start_run(workspace=ws, workflow=wf, actor="pipeline", run_id="run_long_trace")
actions.do_commands(workspace=ws, run_id="run_long_trace", actor="pipeline",
                    commands=[c.Annotate(text=f"note {i}") for i in range(250)])
"""

# Pages that change state or stream: never followed by the crawl.
SKIP = re.compile(
    r"/(export|cancel|logout|gates/resolve|switch)/|/accounts/logout|/admin/|/live/|/api/(?!docs)"
)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("review-pages")
    with serve_app(tmp, setup_code=SETUP) as url:
        yield url


@pytest.fixture(scope="module")
def page(server):
    with signed_in_page(
        server, "rita", viewport={"width": 1280, "height": 900}, ignore=("status of 422", "status of 404")
    ) as pg:
        yield pg


def shot(page, name: str) -> None:
    support.shot(page, f"review-{name}")


def test_checkpoint_gate_approved_with_a_note_unblocks_the_step(page, server):
    page.goto(f"{server}/runs/run_checkpoint/")
    assert "1 gate pending" in page.inner_text("#run-status")
    page.fill("#gate-panel textarea[name=note]", "facts verified")
    page.click("#gate-panel button[value=approved]")
    page.wait_for_selector("#gate-panel >> text=No gate is waiting")
    history = page.inner_text("#gate-panel .history")
    assert "approved" in history and "facts verified" in history
    assert "pending" not in page.inner_text("#run-status")
    shot(page, "checkpoint-approved-with-note")
    assert page.console_errors == []


def test_reviewer_ergonomics_confirm_reject_edits_required_keyboard_first(page, server):
    page.goto(f"{server}/runs/inbox/")
    assert page.locator("nav .nav-count").count() == 1  # pending gates counted in the navigation
    row = page.locator("tbody tr", has_text="user-dee")
    assert "check" in row.inner_text()  # the waiting step, the subject: rows are told apart
    row.locator("a").first.click()
    page.wait_for_selector("#gate-panel")
    # the pending gate is among the first stops of the keyboard, not after the whole trace
    order = page.evaluate(
        """() => Array.from(document.querySelectorAll('a[href], button, input, select, textarea, [tabindex]'))
              .filter(e => e.tabIndex >= 0 && e.offsetParent !== null).map(e => e.id)"""
    )
    assert "review-gate-link" in order[:25], order[:25]
    page.click("#gate-panel button[value=edited]")
    page.wait_for_selector("#gate-panel >> text=Approve with edits needs an artifact")
    page.once("dialog", lambda d: d.dismiss())
    page.click("#gate-panel button[value=rejected]")
    assert "1 gate pending" in page.inner_text("#run-status")  # "No": nothing was sent
    page.once("dialog", lambda d: d.accept())
    page.click("#gate-panel button[value=rejected]")
    page.wait_for_selector("#gate-panel >> text=No gate is waiting")
    assert "rejected" in page.inner_text("#run-status")
    shot(page, "rejected-after-confirm")
    assert page.console_errors == []


def test_timeline_opens_at_the_tail_and_pages_push_the_url(page, server):
    page.goto(f"{server}/runs/run_long_trace/")
    assert page.locator("#seq-250").count() == 1 and page.locator("#seq-1").count() == 0
    page.locator('nav[aria-label="Timeline pages (top)"] >> text=← Earlier').click()
    page.wait_for_url(re.compile(r"before=\d+"))
    page.wait_for_selector("#seq-100")
    first_row = page.locator("#timeline-list > li").first
    assert first_row.is_visible()
    assert page.evaluate("() => document.querySelector('#timeline').getBoundingClientRect().top") < 200
    shot(page, "timeline-earlier")
    page.goto(f"{server}/runs/run_long_trace/?q=note+12&after=0")
    assert page.locator("#timeline-list mark").count() > 0
    assert page.console_errors == []


def test_rejected_runs_are_visible_everywhere(page, server):
    page.goto(f"{server}/runs/?status=rejected")
    rows = page.locator("tbody tr")
    assert rows.count() >= 1
    assert all("rejected" in t for t in rows.all_inner_texts())
    shot(page, "runs-rejected-filter")
    rows.first.locator("a").first.click()
    page.wait_for_selector("#run-status")
    assert "rejected" in page.inner_text("#run-status")
    node = page.locator("svg .node.gate-rejected rect").first
    stroke = node.evaluate("el => getComputedStyle(el).stroke")
    assert stroke in ("rgb(180, 35, 24)", "rgb(255, 123, 114)")  # var(--bad), light or dark
    shot(page, "run-rejected")
    assert page.console_errors == []


def test_union_schema_artifact_is_a_form_with_plain_errors(page, server):
    page.goto(f"{server}/runs/run_checkpoint/artifacts/?key=rule")
    assert page.locator("#f-value-type").count() == 1  # rules.basic: value is string|number|boolean
    page.select_option("#f-value-type", "number")
    page.fill("#f-value", "a lot")
    page.fill("#f-kind", "")
    page.click("text=Save new version")
    page.wait_for_selector("#f-kind-err")
    assert "This field cannot be empty." in page.inner_text("#f-kind-err")
    assert "Enter a number." in page.inner_text("#f-value-err")
    assert page.evaluate("() => document.activeElement.id") == "f-kind"
    shot(page, "artifact-union-errors")
    page.fill("#f-kind", "salary")
    page.fill("#f-value", "120000")
    page.click("text=Save new version")
    page.wait_for_selector("text=Saved rule v2")
    assert page.console_errors == []


def test_api_docs_render_under_the_csp(page, server):
    page.goto(f"{server}/workspace/tokens/")
    page.click("text=REST API docs")
    page.wait_for_selector(".swagger-ui .info .title", timeout=15000)
    assert "Workbench API" in page.inner_text(".swagger-ui .info .title")
    assert page.locator(".opblock").count() > 5
    shot(page, "api-docs")
    assert page.console_errors == []


def _kind(path: str) -> str:
    """Pages of one kind share a template: ids and numbers become placeholders."""
    path = re.sub(r"/runs/(?!inbox/|demo)[^/]+/", "/runs/<id>/", path)
    return re.sub(r"/\d+/", "/<n>/", path)


def test_crawl_every_page_and_link_with_axe(page, server):
    """Every same-origin link reachable from the runs list, the inbox and the demo: no 5xx; one
    axe-core pass per kind of page: no serious or critical violation."""
    from axe_playwright_python.sync_playwright import Axe

    axe = Axe()
    origin = urlparse(server).netloc
    start = ["/runs/", "/runs/inbox/", "/runs/demo", "/ledger/", "/import/", "/members/", "/playground/"]
    queue = deque(urljoin(server, p) for p in start)
    seen: set[str] = set(queue)
    checked_kinds: set[str] = set()
    failures: list[str] = []
    violations: list[str] = []
    opened_per_kind: dict[str, int] = {}
    while queue and len(seen) <= 3000:
        url = queue.popleft()
        kind = _kind(urlparse(url).path)
        if opened_per_kind.get(kind, 0) >= 3:
            # a page of a kind already opened three times: only its answer is checked
            status = page.request.get(url, max_redirects=5).status
            if status >= 500:
                failures.append(f"{status} {url}")
            continue
        opened_per_kind[kind] = opened_per_kind.get(kind, 0) + 1
        response = page.goto(url)
        status = response.status if response else 0
        if status >= 500:
            failures.append(f"{status} {url}")
            continue
        ctype = (response.headers.get("content-type", "") if response else "") or ""
        if "text/html" not in ctype:
            continue
        kind = _kind(urlparse(page.url).path)
        if kind not in checked_kinds:
            checked_kinds.add(kind)
            result = axe.run(page)
            for v in result.response["violations"]:
                if v["impact"] in ("serious", "critical"):
                    targets = [n["target"] for n in v["nodes"][:3]]
                    violations.append(f"{kind}: {v['id']} ({v['impact']}) {targets}")
        hrefs = page.eval_on_selector_all("a[href]", "els => els.map(e => e.getAttribute('href'))")
        for href in hrefs:
            target, _ = urldefrag(urljoin(page.url, href))
            parsed = urlparse(target)
            if parsed.scheme not in ("http", "https") or parsed.netloc != origin or SKIP.search(parsed.path):
                continue
            if target not in seen:
                seen.add(target)
                queue.append(target)
    print(f"crawl: {len(seen)} URLs, {len(checked_kinds)} kinds of page checked with axe-core")
    assert not failures, failures
    assert not violations, "\n".join(violations)
    assert len(checked_kinds) >= 12, sorted(checked_kinds)
    assert page.console_errors == []
