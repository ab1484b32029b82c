"""The monitoring dashboard and the span detail in Chromium, on the demo data (`manage.py
demo_data`): every chart drawn with marks that show their value on hover and take keyboard focus,
no CSP violation, no serious axe finding in light or dark, readable at 390 px; the demo batch
run's first error shows its 429 cause, and a model span its input, output, tokens and cost.
Screenshots: test-results/screenshots/dashboard-*.png, span-detail-*.png."""

from __future__ import annotations

import pytest

from tests.browser import support
from tests.browser.support import serve_app
from tests.browser.test_demo_dark_browser import ENV, SETUP, _serious

pytestmark = pytest.mark.browser

CHARTS = ["runs", "errors", "run-latency", "model-latency", "model-p95", "cost", "tokens",
          "decision-time", "rejections", "reviewers"]  # fmt: skip


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with serve_app(tmp_path_factory.mktemp("dashboard"), setup_code=SETUP, extra_env=ENV) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = support.launch(pw)
        try:
            yield b
        finally:
            b.close()


@pytest.mark.parametrize("dark", [False, True])
def test_every_dashboard_chart_is_drawn_on_the_demo_data(browser, server, dark):
    from playwright.sync_api import expect

    page = support.new_page(
        browser, viewport={"width": 1280, "height": 900}, color_scheme="dark" if dark else "light"
    )
    support.sign_in(page, server, "rita")
    page.goto(f"{server}/dashboard/")
    for key in CHARTS:
        section = page.locator(f'[data-chart="{key}"]')
        expect(section.locator("svg g.mark").first).to_be_attached()
        assert section.locator("[data-chart-empty]").count() == 0, key
        assert section.locator("details.data-table table tbody tr").count() > 0, key
    # a mark: its value on hover (<title>) and reachable by the keyboard
    mark = page.locator('[data-chart="runs"] svg g.mark').first
    label = mark.get_attribute("aria-label")
    assert label and mark.locator("title").text_content() == label
    mark.focus()
    expect(mark).to_be_focused()
    # readable colours in either scheme: the bars take the series colour, not black
    fill = page.evaluate(
        """() => getComputedStyle(document.querySelector('[data-chart="runs"] svg g.mark rect')).fill"""
    )
    assert fill not in ("rgb(0, 0, 0)", "none", "")
    mode = "dark" if dark else "light"
    assert _serious(page, f"dashboard {mode}") == []
    support.shot(page, f"dashboard-{mode}-1280")
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{server}/dashboard/")
    width = page.evaluate("() => document.documentElement.scrollWidth")
    assert width <= 390, f"dashboard is {width} px wide at 390 px"
    support.shot(page, f"dashboard-{mode}-390")
    assert page.console_errors == []
    page.context.close()


def test_one_tab_stop_per_chart_arrows_move_and_the_value_shows(browser, server):
    """A chart is one tab stop (a roving tabindex, static/workbench/charts.js): Tab reaches its
    first mark, the arrow keys move between marks, Home/End jump, and the focused mark's value is
    written under the chart while the chart has the focus."""
    from playwright.sync_api import expect

    page = support.new_page(browser, viewport={"width": 1280, "height": 900})
    support.sign_in(page, server, "rita")
    page.goto(f"{server}/dashboard/")
    for key in CHARTS:
        marks = page.locator(f'[data-chart="{key}"] svg g.mark')
        tabbable = page.locator(f'[data-chart="{key}"] svg g.mark[tabindex="0"]')
        assert marks.count() >= 1 and tabbable.count() == 1, key
    runs = page.locator('[data-chart="runs"]')
    marks = runs.locator("svg g.mark")
    assert marks.count() >= 3
    label = runs.locator("[data-chart-value]")
    expect(label).to_be_hidden()
    texts = marks.evaluate_all("ms => ms.map(m => m.getAttribute('aria-label'))")

    # Tab from the heading's neighbourhood lands on the chart's first mark, once
    page.locator("#runs-h").evaluate("h => { h.tabIndex = -1; h.focus(); }")
    page.keyboard.press("Tab")
    expect(marks.nth(0)).to_be_focused()
    expect(label).to_be_visible()
    expect(label).to_have_text(texts[0])
    page.keyboard.press("ArrowRight")
    expect(marks.nth(1)).to_be_focused()
    expect(label).to_have_text(texts[1])
    page.keyboard.press("ArrowDown")
    expect(marks.nth(2)).to_be_focused()
    page.keyboard.press("ArrowLeft")
    expect(marks.nth(1)).to_be_focused()
    page.keyboard.press("End")
    expect(marks.last).to_be_focused()
    expect(label).to_have_text(texts[-1])
    page.keyboard.press("ArrowRight")  # at the end it stays
    expect(marks.last).to_be_focused()
    page.keyboard.press("Home")
    expect(marks.nth(0)).to_be_focused()
    page.keyboard.press("ArrowRight")
    assert runs.locator('svg g.mark[tabindex="0"]').count() == 1  # the stop moved with the focus

    # Tab leaves the chart at once (not mark by mark), and the value goes away
    page.keyboard.press("Tab")
    left = page.evaluate("() => !!document.activeElement.closest('[data-chart=\"runs\"] svg')")
    assert left is False
    expect(label).to_be_hidden()
    # Shift+Tab comes back to the mark last visited
    page.keyboard.press("Shift+Tab")
    expect(marks.nth(1)).to_be_focused()
    support.shot(page, "dashboard-mark-focused")
    assert _serious(page, "dashboard focused mark") == []
    assert page.console_errors == []
    page.context.close()


def test_span_detail_shows_the_429_and_a_model_calls_input_output_tokens_and_cost(browser, server):
    from playwright.sync_api import expect

    page = support.new_page(browser, viewport={"width": 1280, "height": 900})
    support.sign_in(page, server, "rita")
    page.goto(f"{server}/runs/run_demo_nightly_batch/#trace")
    page.click("#jump-first-error")
    detail = page.locator("#span-detail")
    expect(detail.locator(".sn-error")).to_contain_text("[RATE_LIMITED] 429 rate limited on posting #250")
    # the tree opened down to the selected span
    expect(page.locator("#span-tree [role=treeitem][aria-selected=true] .sn-name").first).to_have_text(
        "score posting #250"
    )
    support.shot(page, "span-detail-error")
    item = page.locator('#span-tree [role=treeitem] > .sn-line:has(.sn-name:text-is("score posting #1"))')
    item.click()
    call = detail.locator(".sn-call").first
    expect(call).to_contain_text("claude-haiku-4-5")
    expect(call.locator(".conversation").first).to_contain_text("Score posting #1")
    expect(call.locator(".conversation").nth(1)).to_contain_text("scored posting #1")
    expect(call).to_contain_text("1,040 (in 913, out 127, cached 600)")
    expect(call).to_contain_text("USD 0.00")
    assert _serious(page, "span detail") == []
    support.shot(page, "span-detail-model")
    assert page.console_errors == []
    page.context.close()
