"""The page shell in Chromium (issue 52): the grouped sidebar at 1280 px and its menu button at 390 px,
the workspace switcher that switches on choice, the keyboard "go to" (Ctrl-K), the run page's waiting
gate in view without scrolling, no page wider than 390 px at 390 px, axe-core (0 serious or
critical) in light and dark at both widths, and a screenshot of every page kind at both widths
(test-results/screenshots/shell-<page>-<width>.png).

One daphne server seeded by ``manage.py demo_data`` (the job-search runs, one waiting at a gate, and
the 10k-event batch run).
"""

from __future__ import annotations

import re

import pytest

from tests.browser import support
from tests.browser.support import serve_app

pytestmark = pytest.mark.browser

SETUP = """
import django; django.setup()
from django.contrib.auth import get_user_model
from django.core.management import call_command
from runs.actions.workspaces import add_member, get_or_create_workspace
call_command("demo_data", url="http://127.0.0.1/")
rita = get_user_model().objects.create_user("rita", password="rita-password-123")
add_member(get_or_create_workspace("demo"), rita, "owner")
add_member(get_or_create_workspace("side", name="Side project"), rita, "viewer")
from runs.actions.monitors import do_create_monitor, evaluate_monitors
do_create_monitor(workspace=get_or_create_workspace("demo"), data={"name": "Errors", "metric": "error_rate", "warning": 0, "alert": 50, "windowDays": 30})
evaluate_monitors()
"""

WAITING_RUN = "run_demo_waiting"  # replaced by the fixture with the demo's run waiting at a gate
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}

# Every page kind, by a name for its screenshot ({run} and {waiting}: runs of the demo).
PAGES = {
    "runs": "/runs/",
    "run": "/runs/{waiting}/",
    "run-batch": "/runs/run_demo_nightly_batch/",
    "run-artifacts": "/runs/{waiting}/artifacts/",
    "run-ledger": "/runs/run_demo_nightly_batch/ledger/",
    "inbox": "/runs/inbox/",
    "queues": "/review/",
    "ledger": "/ledger/",
    "import": "/import/",
    "playground": "/playground/",
    "prompts": "/prompts/",
    "datasets": "/evals/datasets/",
    "members": "/members/",
    "tokens": "/workspace/tokens/",
    "webhooks": "/settings/webhooks/",
    "monitors": "/monitors/",
    "notifications": "/settings/notifications/",
    "invitations": "/workspace/invitations/",
    "compare": "/compare/?a=run_demo_jobsearch&b=run_demo_nightly_batch",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with serve_app(tmp_path_factory.mktemp("shell"), setup_code=SETUP) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    support.require_chromium()
    with sync_playwright() as pw:
        chromium = support.launch(pw)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def waiting(browser, server) -> str:
    """The id of a demo run that waits at a gate (from the inbox)."""
    page = signed_in(browser, server, viewport=DESKTOP)
    page.goto(f"{server}/runs/inbox/")
    run_id = page.locator("tr[data-run]").first.get_attribute("data-run")
    page.context.close()
    assert run_id
    return run_id


def signed_in(browser, server, **options):
    page = support.new_page(browser, **options)
    support.sign_in(page, server, "rita")
    return page


def overflow(page) -> int:
    """How many CSS pixels the page is wider than its viewport."""
    return page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")


def serious(page, label: str) -> list[str]:
    from axe_playwright_python.sync_playwright import Axe

    return [
        f"{label}: {v['id']} ({v['impact']}) {[n['target'] for n in v['nodes'][:3]]}"
        for v in Axe().run(page).response["violations"]
        if v["impact"] in ("serious", "critical")
    ]


def test_sidebar_groups_at_1280_and_menu_button_at_390(browser, server):
    from playwright.sync_api import expect

    page = signed_in(browser, server, viewport=DESKTOP)
    page.goto(f"{server}/runs/")
    sidebar = page.locator("#sidebar")
    expect(sidebar).to_be_visible()
    assert [h.strip() for h in sidebar.locator("h2.nav-group").all_text_contents()] == [
        "Observe",
        "Review",
        "Build",
        "Settings",
    ]
    review = sidebar.locator('ul[aria-labelledby="nav-review"] a')
    assert review.first.inner_text().startswith("Inbox")
    expect(review.first.locator(".nav-count")).to_be_visible()  # the inbox counts what waits
    expect(sidebar.locator('a[aria-current="page"]')).to_have_text("Runs")
    expect(page.locator("#menu-button")).to_be_hidden()
    box = sidebar.bounding_box()
    assert box and box["x"] == 0 and box["width"] < 300  # a left column, beside the page
    assert page.locator("main").bounding_box()["x"] >= box["width"]
    # hidden by its button (remembered), brought back by the menu button
    page.click("[data-sidebar-close]")
    expect(sidebar).to_be_hidden()
    expect(page.locator("#menu-button")).to_be_focused()
    page.reload()
    expect(sidebar).to_be_hidden()
    page.click("#menu-button")
    expect(sidebar).to_be_visible()
    page.context.close()

    page = signed_in(browser, server, viewport=PHONE)
    page.goto(f"{server}/runs/")
    menu = page.locator("#menu-button")
    expect(sidebar := page.locator("#sidebar")).to_be_hidden()
    expect(menu).to_be_visible()
    expect(menu).to_have_attribute("aria-expanded", "false")
    header = page.locator("header.topbar").bounding_box()
    assert header and header["height"] <= 64  # one row, not five
    menu.click()
    expect(sidebar).to_be_visible()
    expect(menu).to_have_attribute("aria-expanded", "true")
    assert sidebar.bounding_box()["width"] <= 390
    support.shot(page, "shell-menu-open-390")
    page.keyboard.press("Escape")
    expect(sidebar).to_be_hidden()
    expect(menu).to_be_focused()
    menu.click()
    page.locator("#sidebar a", has_text="Ledger").click()
    page.wait_for_url(f"{server}/ledger/")
    expect(page.locator("#sidebar")).to_be_hidden()
    assert page.console_errors == []
    page.context.close()


def test_workspace_switcher_switches_on_choice(browser, server):
    from playwright.sync_api import expect

    page = signed_in(browser, server, viewport=DESKTOP)
    page.goto(f"{server}/runs/inbox/")
    expect(page.locator(".ws-switch-fallback")).to_be_hidden()  # no "Switch" button with scripts
    page.select_option("#ws-select", "side")
    page.wait_for_url(f"{server}/runs/")
    expect(page.locator(".messages")).to_contain_text("Switched to Side project")
    expect(page.locator("#ws-select")).to_have_value("side")
    page.select_option("#ws-select", "demo")
    expect(page.locator(".messages")).to_contain_text("Switched to Demo")
    page.context.close()


def test_ctrl_k_goes_to_a_run_by_title_or_id_and_to_pages(browser, server, waiting):
    from playwright.sync_api import expect

    page = signed_in(browser, server, viewport=DESKTOP)
    page.goto(f"{server}/runs/inbox/")
    page.locator("[data-review-fallback]").focus()
    page.keyboard.press("Control+k")
    dialog = page.locator("dialog#goto")
    expect(dialog).to_be_visible()
    expect(page.locator("#goto-q")).to_be_focused()
    # Escape closes, focus goes back where it was
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    assert page.evaluate("() => document.activeElement.hasAttribute('data-review-fallback')")
    # a page by its name
    page.keyboard.press("Control+k")
    page.keyboard.type("queues")
    expect(page.locator("#goto-results [role=option]").first).to_contain_text("Queues")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{server}/review/")
    # a run by (part of) its id, with the arrow keys
    page.keyboard.press("Control+k")
    page.keyboard.type("nightly_batch")
    options = page.locator("#goto-results [role=option]")
    expect(options.filter(has_text="run_demo_nightly_batch")).to_have_count(1)
    expect(page.locator("#goto-q")).to_have_attribute("aria-activedescendant", re.compile("goto-opt-"))
    expect(page.locator('#goto-results [aria-selected="true"]')).to_contain_text("run_demo_nightly_batch")
    page.keyboard.press("Enter")
    page.wait_for_url(f"{server}/runs/run_demo_nightly_batch/")
    # a run by a word of its title (the waiting run's own title)
    title = page.evaluate(
        "async (id) => (await (await fetch('/goto/?q=' + id)).json()).runs[0].title", waiting
    )
    page.keyboard.press("Meta+k")
    page.keyboard.type(title.split()[0])
    expect(options.filter(has_text=waiting).first).to_be_visible()
    page.keyboard.press("Escape")
    page.close()
    # another workspace's runs are not offered
    other = signed_in(browser, server, viewport=DESKTOP)
    other.goto(f"{server}/runs/inbox/")
    other.select_option("#ws-select", "side")
    other.wait_for_url(f"{server}/runs/")
    found = other.evaluate("async () => (await (await fetch('/goto/?q=run_demo')).json()).runs")
    assert found == []
    assert page.console_errors == [] and other.console_errors == []
    other.context.close()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "390"])
def test_waiting_gate_is_in_view_without_scrolling(browser, server, waiting, viewport):
    page = signed_in(browser, server, viewport=viewport)
    page.goto(f"{server}/runs/{waiting}/")
    gate = page.locator("#gate-panel .gate").first
    box = gate.bounding_box()
    assert box, "no waiting gate on the run page"
    height, width = viewport["height"], viewport["width"]
    assert 0 <= box["y"] and box["y"] + box["height"] <= height, (box, viewport)
    assert 0 <= box["x"] and box["x"] + box["width"] <= width, (box, viewport)
    # the actions menu: closed at first, opens from the keyboard, holds the exports and cancel
    menu = page.locator("details#run-actions")
    assert menu.get_attribute("open") is None
    menu.locator("summary.button").focus()
    page.keyboard.press("Enter")
    assert menu.get_attribute("open") is not None
    assert menu.locator("a", has_text="Export signed bundle").is_visible()
    assert menu.locator("#export-redact").is_visible()
    assert menu.locator("button", has_text="Cancel run").is_visible()
    assert overflow(page) <= 0
    assert page.console_errors == []
    page.context.close()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "390"])
def test_every_page_fits_passes_axe_in_light_and_dark_and_is_screenshot(browser, server, waiting, viewport):
    problems: list[str] = []
    for scheme in ("light", "dark"):
        page = signed_in(browser, server, viewport=viewport, color_scheme=scheme)
        for name, path in PAGES.items():
            page.goto(server + path.format(waiting=waiting))
            label = f"{name} {viewport['width']} {scheme}"
            if viewport["width"] == 390 and overflow(page) > 0:
                problems.append(f"{label}: {overflow(page)} px wider than the screen")
            problems += serious(page, label)
            if scheme == "light":
                support.shot(page, f"shell-{name}-{viewport['width']}")
            else:
                support.shot(page, f"shell-{name}-{viewport['width']}-dark")
        problems += [f"console: {e}" for e in page.console_errors]
        page.context.close()
    assert problems == []
