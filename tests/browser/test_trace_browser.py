"""The trace view and the light timeline in Chromium on a run of 10,000 spans (issue 27).

Prints the time to the first visible span and to "Jump to first error"; walks the tree by
keyboard; round-trips the view state through the URL (selected span, errors only, span search,
expanded event); axe-core finds no serious or critical violation in light, dark and at 390 px.
"""

from __future__ import annotations

import re
import time

import pytest

from tests.browser import support

pytestmark = pytest.mark.browser

SPANS = 10_000

SETUP = f"""
import django; django.setup()
from django.contrib.auth import get_user_model
from runs import actions
from runs.engine import commands as c
from runs.actions.workspaces import add_member, get_or_create_workspace
ws = get_or_create_workspace("acme", name="Acme")
add_member(ws, get_user_model().objects.create_user("tess", password="tess-password-123"), "owner")
wf = {{"id": "wf-batch", "version": 1, "title": "Score postings", "steps": [{{"id": "score"}}], "edges": []}}
actions.do_start_run(workspace=ws, workflow=wf, actor="pipeline", run_id="run_big", title="Nightly scoring")
actions.do_command(workspace=ws, run_id="run_big", command=c.BeginStep(step_id="score"), actor="pipeline")
actions.do_command(workspace=ws, run_id="run_big", command=c.StartSpan(name="score batch", span_id="batch"), actor="p")
cmds = []
for i in range({SPANS} - 1):
    cmds.append(c.StartSpan(name=f"score posting #{{i}}", span_id=f"p{{i}}", parent_span_id="batch"))
    failed = i % 2500 == 50
    cmds.append(c.EndSpan(span_id=f"p{{i}}", status="error" if failed else "ok",
                          error={{"message": f"timeout scoring #{{i}}"}} if failed else None))
    if len(cmds) >= 2000:
        actions.do_commands(workspace=ws, run_id="run_big", commands=cmds, actor="pipeline")
        cmds = []
cmds.append(c.EndSpan(span_id="batch", status="ok"))
actions.do_commands(workspace=ws, run_id="run_big", commands=cmds, actor="pipeline")
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with support.serve_app(tmp_path_factory.mktemp("trace"), setup_code=SETUP) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    support.require_chromium()
    with sync_playwright() as pw:
        chromium = support.launch(pw)
        yield chromium
        chromium.close()


def _page(browser, server, **options):
    page = support.new_page(browser, viewport={"width": 1280, "height": 900}, **options)
    support.sign_in(page, server, "tess")
    return page


def _axe(page, label: str) -> list[str]:
    from axe_playwright_python.sync_playwright import Axe

    out = []
    for v in Axe().run(page).response["violations"]:
        if v["impact"] in ("serious", "critical"):
            out.append(f"{label}: {v['id']} ({v['impact']}) {[n['target'] for n in v['nodes'][:3]]}")
    return out


def test_span_tree_at_10k_spans_opens_fast_jumps_to_errors_and_walks_by_keyboard(browser, server):
    from playwright.sync_api import expect

    page = _page(browser, server)
    started = time.perf_counter()
    page.goto(f"{server}/runs/run_big/", wait_until="commit")
    page.locator("#span-tree [role=treeitem]").first.wait_for(state="visible")
    first_span = time.perf_counter() - started
    expect(page.locator("#trace-failed")).to_have_text("4 failed spans")
    started = time.perf_counter()
    page.click("#jump-first-error")
    expect(page.locator("#span-detail")).to_contain_text("timeout scoring #50")
    jump = time.perf_counter() - started
    print(
        f"\n{SPANS:,} spans: first visible span {first_span * 1000:.0f} ms, jump to first error {jump * 1000:.0f} ms"
    )
    assert re.search(r"[?&]span=\d+", page.url)  # the selected span is in the URL
    # keyboard: the root is focusable; → opens it (its children load), ↓ moves in, Enter selects
    root = page.locator("#span-tree > [role=treeitem]").first
    root.focus()
    page.keyboard.press("ArrowRight")
    expect(root).to_have_attribute("aria-expanded", "true")
    children = root.locator(":scope > [role=group] > [role=treeitem]")
    expect(children.first).to_be_visible()
    assert "error" in children.first.inner_text()  # failed children come first
    page.keyboard.press("ArrowDown")
    expect(children.first).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#span-detail")).to_contain_text("timeout scoring")
    seq = children.first.get_attribute("data-seq")
    assert f"span={seq}" in page.url
    page.keyboard.press("ArrowLeft")
    expect(root).to_be_focused()
    page.keyboard.press("ArrowLeft")
    expect(root).to_have_attribute("aria-expanded", "false")
    # "Show more spans…" loads the next page of a level in place
    page.keyboard.press("ArrowRight")
    more = root.locator(":scope > [role=group] > .sn-more")
    more.click()
    expect(root.locator(":scope > [role=group] > .sn")).to_have_count(200)
    support.shot(page, "trace-10k")
    assert page.console_errors == []
    page.context.close()


def test_view_state_round_trips_through_the_url(browser, server):
    from playwright.sync_api import expect

    page = _page(browser, server)
    page.goto(f"{server}/runs/run_big/?trace=failed#trace")
    expect(page.locator("#span-tree > [role=treeitem]")).to_have_count(4)
    page.goto(f"{server}/runs/run_big/?trace_q=posting+%23777#trace")
    expect(page.locator("#trace-q")).to_have_value("posting #777")
    expect(page.locator("#span-tree")).to_contain_text("score posting #777")
    seq = page.locator("#span-tree > [role=treeitem]").first.get_attribute("data-seq")
    page.goto(f"{server}/runs/run_big/?span={seq}#trace")
    expect(page.locator("#span-detail")).to_contain_text("score posting #777")
    # the timeline: filters and an opened event in the URL; "Copy link" on an event
    page.goto(f"{server}/runs/run_big/?type=span_ended&at=40#seq-40")
    expect(page.locator("#t-type")).to_have_value("span_ended")
    row = page.locator("#seq-40")
    expect(row.locator(".ev-actions")).to_be_visible()  # the event the URL names is opened
    assert row.locator("button.copy-link").get_attribute("data-copy").endswith("?at=40#seq-40")
    assert page.console_errors == []
    page.context.close()


def test_light_timeline_loads_a_row_when_opened(browser, server):
    from playwright.sync_api import expect

    page = _page(browser, server)
    page.goto(f"{server}/runs/run_big/?after=5000#timeline")
    rows = page.locator("#timeline-list > li.ev")
    expect(rows).to_have_count(100)
    assert page.locator("#timeline-list .json-tree").count() == 0  # nothing heavy until opened
    started = time.perf_counter()
    page.click("#timeline-list > li:first-child > details > summary")
    expect(page.locator("#timeline-list > li:first-child .json-tree")).to_be_attached()
    print(f"\nopening a timeline row: {(time.perf_counter() - started) * 1000:.0f} ms to its JSON")
    started = time.perf_counter()
    page.click("#timeline-body nav.pager >> text=Later →")
    expect(page.locator("#timeline-list > li:first-child")).to_have_attribute("id", "seq-5101")
    print(f"'Later' to visible rows: {(time.perf_counter() - started) * 1000:.0f} ms")
    assert page.console_errors == []
    page.context.close()


@pytest.mark.parametrize("mode", ["light", "dark", "390px"])
def test_trace_view_and_timeline_pass_axe(browser, server, mode):
    options = {"color_scheme": "dark" if mode == "dark" else "light"}
    if mode == "390px":
        options["viewport"] = {"width": 390, "height": 800}
    page = support.new_page(browser, **{"viewport": {"width": 1280, "height": 900}, **options})
    support.sign_in(page, server, "tess")
    page.goto(f"{server}/runs/run_big/")
    root = page.locator("#span-tree > [role=treeitem]").first
    root.click()
    root.locator(":scope > [role=group] > [role=treeitem]").first.wait_for()
    page.click("#timeline-list > li:first-child > details > summary")
    page.locator("#timeline-list > li:first-child .ev-actions").wait_for()
    violations = _axe(page, mode)
    if mode == "390px":
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 392
    support.shot(page, f"trace-{mode}")
    assert not violations, "\n".join(violations)
    assert page.console_errors == []
    page.context.close()
