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
from runs.actions.workspaces import add_member, get_or_create_workspace
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
# decided from the inbox rows (titled by the pipeline), with and without JavaScript
for rid, title in (("run_inbox_js", "Invoice 42"), ("run_inbox_nojs", "Contract B")):
    actions.do_start_run(workspace=ws, workflow=wf, actor="pipeline", run_id=rid, title=title)
    for cmd in (c.BeginStep("draft"), c.CompleteStep("draft"), c.BeginStep("check")):
        actions.do_command(workspace=ws, run_id=rid, command=cmd, actor="pipeline")
# a span tree: a root, a fetch, an LLM call with a nested parse that fails
actions.do_start_run(workspace=ws, workflow=wf, actor="pipeline", run_id="run_spans", title="Quarterly report")
actions.do_commands(workspace=ws, run_id="run_spans", actor="pipeline", commands=[
    c.BeginStep("draft"),
    c.StartSpan(name="pipeline", span_id="root", step_id="draft"),
    c.StartSpan(name="fetch sources", span_id="fetch", parent_span_id="root", kind="client"),
    c.EndSpan(span_id="fetch", status="ok", duration_ms=120),
    c.StartSpan(name="llm call", span_id="llm", parent_span_id="root", kind="client"),
    c.StartSpan(name="parse answer", span_id="parse", parent_span_id="llm"),
    c.EndSpan(span_id="parse", status="error", duration_ms=15, error={"message": "timeout reading <answer>"}),
    c.EndSpan(span_id="llm", status="ok", duration_ms=900),
    c.EndSpan(span_id="root", status="ok", duration_ms=1100),
])
# read while live events arrive: a pending gate that must not pull the reader back to it
actions.do_start_run(workspace=ws, workflow=wf, actor="pipeline", run_id="run_reading", title="Being read")
actions.do_commands(workspace=ws, run_id="run_reading", actor="pipeline",
                    commands=[c.BeginStep("draft"), c.CompleteStep("draft"), c.BeginStep("check")]
                    + [c.Annotate(text=f"line {i}") for i in range(60)])
# followed live while a host appends over REST
actions.do_start_run(workspace=ws, workflow=wf, actor="pipeline", run_id="run_live_count", title="Live count")
import os
from accounts.tokens import create_token
token = create_token(workspace=ws, name="host", scopes=["read", "write", "review"]).secret
open(os.path.join(os.environ["WORKBENCH_VAR_DIR"], "token.txt"), "w").write(token)
actions.do_commands(workspace=ws, run_id="run_long_trace", actor="pipeline",
                    commands=[c.Annotate(text=f"note {i}") for i in range(250)])
"""

# Pages that change state or stream: never followed by the crawl. /docs/ is the MkDocs Material
# site (the theme's own markup; its search dialog and copyright contrast are axe findings of the
# theme, not of our templates): tests/ops/test_docs_site.py checks it.
SKIP = re.compile(
    r"/(export|cancel|logout|gates/resolve|switch)/|/accounts/logout|/admin/|/live/|/api/(?!docs)|^/docs/"
)


@pytest.fixture(scope="module")
def server_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("review-pages")


@pytest.fixture(scope="module")
def server(server_dir):
    with serve_app(server_dir, setup_code=SETUP) as url:
        yield url


@pytest.fixture(scope="module")
def host_api(server, server_dir):
    """A host on the REST API (a token made by the set-up)."""
    import httpx

    token = (server_dir / "token.txt").read_text().strip()
    with httpx.Client(base_url=server, headers={"Authorization": f"Bearer {token}"}, timeout=30) as api:
        yield api


@pytest.fixture(scope="module")
def page(server):
    with signed_in_page(
        server, "rita", viewport={"width": 1280, "height": 900}, ignore=("status of 422", "status of 404")
    ) as pg:
        yield pg


@pytest.fixture(autouse=True)
def _console_of_this_test_only(request):
    """The page is shared by the module: before each test it leaves the previous page (about:blank)
    and drops what that page logged late (Chromium may deliver a message after the test moved on),
    so each test's console holds its own errors only."""
    if "page" in request.fixturenames:
        page = request.getfixturevalue("page")
        page.goto("about:blank")
        page.wait_for_timeout(300)
        page.console_errors.clear()
    yield


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
    # the panel can be parsed before htmx (a deferred script) has run on a loaded CI machine: a
    # click then sends the plain form, whose answer is the run page with the message at its top
    # (CI failed once waiting for it in the panel). What a person uses is the loaded page.
    page.wait_for_load_state("load")
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
    # the element can be in the DOM before the page's stylesheet has loaded (a loaded CI machine):
    # its computed stroke is then the default "none"; what a person sees is the loaded page
    page.wait_for_load_state("load")
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
    # autofocus is applied at the next rendering update, not when the element appears: wait for it
    page.wait_for_function(
        "() => document.activeElement && document.activeElement.id === 'f-kind'", timeout=5000
    )
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


def test_span_waterfall_nested_errors_marked_keyboard_to_the_event(page, server):
    from playwright.sync_api import expect

    page.goto(f"{server}/runs/run_spans/?view=waterfall")  # the window view beside the trace view
    spans = page.locator("#spans")
    expect(spans).to_be_visible()
    rows = spans.locator("tbody tr")
    assert [r.get_attribute("data-depth") for r in rows.all()] == ["0", "1", "1", "2"]
    failed = spans.locator("tr.span-error")
    assert failed.count() == 1
    text = failed.inner_text()
    assert "parse answer" in text and "error" in text and "timeout reading <answer>" in text  # escaped
    assert (
        "level 3" in failed.locator("th").inner_text() or failed.locator("th .visually-hidden").count() == 1
    )
    # nested bars lie inside their parent's on the time axis
    boxes = [r.locator("rect").bounding_box() for r in rows.all()]
    root, fetch, llm, parse = boxes
    for child, parent in ((fetch, root), (llm, root), (parse, llm)):
        assert (
            child["x"] >= parent["x"] - 1 and child["x"] + child["width"] <= parent["x"] + parent["width"] + 1
        )
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 1280
    shot(page, "span-waterfall")
    # by keyboard: focus the span's name, Enter opens its event in the timeline
    spans.locator("a", has_text="llm call").focus()
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"at=\d+#seq-\d+"))
    seq = re.search(r"#seq-(\d+)", page.url).group(1)
    expect(page.locator(f"#seq-{seq}")).to_contain_text("span llm call started")
    assert page.console_errors == []


def test_inbox_rows_decide_in_place_and_without_javascript(page, server):
    from playwright.sync_api import expect

    page.goto(f"{server}/runs/inbox/")
    row = page.locator("tr.inbox-row", has_text="Invoice 42")
    text = row.inner_text()
    assert "check" in text and "inbox_js" in text and "started" in text  # waiting step, short id, age
    pending = int(page.inner_text("nav .nav-count").split()[0])
    row.locator("input[name=note]").fill("numbers match")
    row.locator("button[value=approved]").click()  # no confirm() (the undo toast is measured elsewhere)
    expect(page.locator("#inbox-status")).to_contain_text("Approved: CHECKPOINT on check of “Invoice 42”")
    expect(page.locator("tr.inbox-row:has-text('Invoice 42') form")).to_have_count(0)
    expect(page.locator("nav .nav-count")).to_contain_text(str(pending - 1))  # the navigation follows
    shot(page, "inbox-decided-in-row")
    page.goto(f"{server}/runs/run_inbox_js/")
    assert "numbers match" in page.inner_text("#gate-panel .history")
    assert page.console_errors == []
    # JavaScript off: the same form posts and comes back to the inbox
    nojs = support.new_page(page.context.browser, java_script_enabled=False)
    support.sign_in(nojs, server, "rita")
    nojs.goto(f"{server}/runs/inbox/")
    nojs.locator("tr.inbox-row", has_text="Contract B").locator("button[value=rejected]").click()
    nojs.wait_for_url(f"{server}/runs/inbox/")
    assert "Rejected: CHECKPOINT on check of “Contract B”" in nojs.inner_text(".messages")
    assert nojs.locator("tr.inbox-row", has_text="Contract B").count() == 0
    shot(nojs, "inbox-decided-without-js")
    nojs.context.close()


def test_header_event_count_and_live_indicator_follow_the_run(page, server, host_api):
    from playwright.sync_api import expect

    page.goto(f"{server}/runs/run_live_count/")
    indicator = page.locator("#live-indicator")
    assert indicator.get_attribute("role") == "status"
    expect(indicator).to_have_attribute("data-state", "open")
    expect(indicator).to_contain_text("Live")
    assert page.inner_text("#run-events").startswith("0 ")
    for i in range(3):
        assert (
            host_api.post("/api/runs/run_live_count/annotations", json={"text": f"n{i}"}).status_code == 200
        )
    expect(page.locator("#run-events")).to_contain_text("3 (last seq 3)")
    shot(page, "live-events-count")
    response = host_api.post("/api/runs/run_live_count/cancel", json={"reason": "done"})
    assert response.status_code == 200, response.text
    expect(indicator).to_have_attribute("data-state", "finished")
    expect(indicator).to_contain_text("Finished")
    assert page.console_errors == []


def test_live_events_leave_a_reader_where_they_are(page, server, host_api):
    """Reading a run that waits at a gate, focus on the page itself (nothing focused), scrolled
    away from the gate panel: live events neither move focus to the gate nor scroll the page to it.
    Once the reader used a gate item, a swap that takes it away puts focus back on an item
    (test_keyboard_review_browser), but a click elsewhere is the reader's choice and stays."""
    from playwright.sync_api import expect

    page.goto(f"{server}/runs/run_reading/")
    expect(page.locator("#live-indicator")).to_have_attribute("data-state", "open")
    assert page.locator("#gate-panel [data-review-item]").count() == 1
    page.evaluate("() => window.scrollTo(0, document.body.scrollHeight)")
    page.wait_for_timeout(200)
    scrolled = page.evaluate("() => window.scrollY")
    assert scrolled > 0
    assert page.evaluate("() => document.activeElement === document.body")
    events = page.inner_text("#run-events")
    last = int(events.split("last seq")[1].strip(" )").replace(",", ""))
    for i in range(3):
        assert (
            host_api.post("/api/runs/run_reading/annotations", json={"text": f"live {i}"}).status_code == 200
        )
    expect(page.locator("#run-events")).not_to_have_text(events)
    expect(page.locator("#run-events")).to_contain_text(f"(last seq {last + 3})")
    page.wait_for_timeout(300)
    assert page.evaluate("() => document.activeElement === document.body"), page.evaluate(
        "() => document.activeElement.outerHTML.slice(0, 120)"
    )
    assert page.evaluate("() => window.scrollY") == scrolled
    # the reader used the gate, then clicked the page's text: the next live event leaves focus there
    page.locator("#gate-panel [data-review-item]").focus()
    page.locator("h1").click()  # <main tabindex=-1> takes the focus
    assert page.evaluate("() => document.activeElement.id") == "main"
    assert host_api.post("/api/runs/run_reading/annotations", json={"text": "live 3"}).status_code == 200
    expect(page.locator("#run-events")).to_contain_text(f"(last seq {last + 4})")
    page.wait_for_timeout(300)
    assert page.evaluate("() => document.activeElement.id") == "main"
    # and with focus on the page itself (the reader's Escape-like blur), it stays there too
    page.locator("#gate-panel [data-review-item]").focus()
    page.evaluate("() => document.activeElement.blur()")
    assert host_api.post("/api/runs/run_reading/annotations", json={"text": "live 4"}).status_code == 200
    expect(page.locator("#run-events")).to_contain_text(f"(last seq {last + 5})")
    page.wait_for_timeout(300)
    assert page.evaluate("() => document.activeElement === document.body")
    assert page.console_errors == []


def test_live_runs_list_shows_every_run_of_a_burst_though_its_refresh_was_slow(page, server, host_api):
    """Runs that start while the list's refresh is on its way are shown once it has landed (before:
    htmx's throttle dropped their changes and the list kept the state of the burst's start). The
    list's refreshes are held 1.2 s in the browser, after the server rendered them: longer than the
    list's second between refreshes, so the next one is asked for as soon as the slow one has been
    swapped in (before: while htmx had not yet taken the new list's trigger, and it was lost)."""
    import threading
    import time

    from playwright.sync_api import expect

    workflow = {"id": "wf-burst", "version": 1, "steps": [{"id": "only"}], "edges": []}
    fetched = threading.Event()
    refreshes = []

    def slow_list(route):
        if route.request.headers.get("hx-request") != "true":
            return route.continue_()
        response = route.fetch()  # rendered now, answered 1.2 s later
        refreshes.append(time.monotonic())
        fetched.set()
        time.sleep(1.2)
        route.fulfill(response=response)

    def start(i: int) -> None:
        answer = host_api.post(
            "/api/runs", json={"workflow": workflow, "runId": f"run_burst_{i}", "title": f"Burst {i}"}
        )
        assert answer.status_code in (200, 201), answer.text

    page.route(lambda url: urlparse(url).path == "/runs/", slow_list)
    try:
        page.goto(f"{server}/runs/")
        expect(page.locator("#run-table")).to_be_visible()
        expect(page.locator("html")).to_have_attribute("data-workspace-live", "open")
        start(0)

        def the_rest() -> None:
            fetched.wait(10)  # the first refresh was rendered: these start while it is on its way
            for i in range(1, 4):
                start(i)
                time.sleep(0.05)

        poster = threading.Thread(target=the_rest)
        poster.start()
        table = page.locator("#run-table")
        expect(table).to_contain_text("Burst 0", timeout=10000)
        poster.join(15)
        for i in range(1, 4):
            expect(table).to_contain_text(f"Burst {i}", timeout=10000)
        assert len(refreshes) >= 2  # the burst's runs came by a refresh after the slow one
    finally:
        page.unroute_all()
    assert page.console_errors == []


def test_live_runs_list_catches_up_after_its_socket_dropped(page, server, host_api):
    """A run that starts while the list's workspace socket is down (a server restart, a network
    blip) is shown once the socket is open again: the list refreshes on the reopen, since the
    change itself was never heard. The socket goes through Playwright, which drops it once."""
    from playwright.sync_api import expect

    sockets = []
    # a page of its own: Playwright has no way to take a WebSocket route off a page again
    pg = support.new_page(page.context.browser, viewport={"width": 1280, "height": 900})
    support.sign_in(pg, server, "rita")

    def through(ws) -> None:
        ws.connect_to_server()
        sockets.append(ws)

    pg.route_web_socket(re.compile(r"/ws/workspace/"), through)
    try:
        pg.goto(f"{server}/runs/")
        html = pg.locator("html")
        expect(html).to_have_attribute("data-workspace-live", "open")
        sockets[0].close()
        expect(html).to_have_attribute("data-workspace-live", "closed")
        # the page's new socket waits for this test's next Playwright call (its route runs there):
        # the run below starts while no socket is open
        workflow = {"id": "wf-burst", "version": 1, "steps": [{"id": "only"}], "edges": []}
        answer = host_api.post(
            "/api/runs", json={"workflow": workflow, "runId": "run_gap", "title": "In the gap"}
        )
        assert answer.status_code in (200, 201), answer.text
        expect(html).to_have_attribute("data-workspace-live", "open", timeout=10000)
        expect(pg.locator("#run-table")).to_contain_text("In the gap")
        assert len(sockets) == 2
        assert pg.console_errors == []
    finally:
        pg.context.close()


def test_waterfall_and_inbox_on_a_phone(page, server):
    """390 px: nothing but the pages' own named scrollers is wider than the screen."""
    page.set_viewport_size({"width": 390, "height": 844})
    try:
        for url, name in (("/runs/run_spans/", "span-waterfall-390"), ("/runs/inbox/", "inbox-390")):
            page.goto(f"{server}{url}")
            assert page.evaluate("() => document.documentElement.scrollWidth") <= 390, url
            shot(page, name)
        scroller = page.locator("#inbox-table")
        assert scroller.get_attribute("tabindex") == "0" and scroller.get_attribute("aria-label")
    finally:
        page.set_viewport_size({"width": 1280, "height": 900})
    assert page.console_errors == []


# What axe-core does not catch (or only at some impacts): a <dl> holding anything but dt/dd groups,
# a header cell with no text, links inside role=img, and a scrolling region the keyboard cannot
# reach or that has no name.
STRUCTURE_JS = """() => {
  const out = [];
  for (const dl of document.querySelectorAll("dl")) {
    const kids = Array.from(dl.children).flatMap(c => c.tagName === "DIV" ? Array.from(c.children) : [c]);
    for (const k of kids) if (!["DT", "DD", "SCRIPT", "TEMPLATE"].includes(k.tagName)) out.push("dl holds " + k.tagName);
    if (kids.length && kids[0].tagName !== "DT") out.push("dl starts with " + kids[0].tagName);
  }
  for (const th of document.querySelectorAll("th"))
    if (!th.textContent.trim() && !th.getAttribute("aria-label")) out.push("empty th");
  if (document.querySelector('[role="img"] a, [role="img"] [tabindex]')) out.push("a link inside role=img");
  for (const el of document.querySelectorAll(".table-wrap, .graph-wrap, pre")) {
    const named = el.getAttribute("aria-label") || el.getAttribute("aria-labelledby");
    if (el.scrollWidth > el.clientWidth + 1 && (el.tabIndex < 0 || (el.tagName !== "PRE" && !named)))
      out.push("scroll region without keyboard access or name: " + (el.id || el.className || el.tagName));
  }
  return out;
}"""


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
            violations.extend(f"{kind}: {problem}" for problem in page.evaluate(STRUCTURE_JS))
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
