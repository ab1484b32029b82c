"""The demo as a visitor and a PM see it, in Chromium: axe-core in dark mode (prefers-color-scheme
emulated) and on signed-out pages (sign-in, errors, the public demo), the 10k-event demo run, the
ledger's per-day chart, and an honest "Open in playground".

One daphne server with DEBUG off (so the branded error pages answer), seeded by `manage.py
demo_data`. Screenshots go to test-results/screenshots/demo-*.png.
"""

from __future__ import annotations

import re
import secrets

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
add_member(get_or_create_workspace("demo"), get_user_model().objects.create_user("rita", password="rita-password-123"), "owner")
add_member(get_or_create_workspace("demo"), get_user_model().objects.create_user("vic", password="vic-password-123"), "viewer")
"""

# DEBUG off: Django's branded 404 (not the technical page). Plain HTTP on loopback for the test.
ENV = {
    "DEBUG": "0",
    "SECRET_KEY": secrets.token_urlsafe(50),  # DEBUG off refuses a weak key
    "SECURE_SSL_REDIRECT": "0",
    "SECURE_HSTS_SECONDS": "0",
    "ALLOWED_HOSTS": "127.0.0.1",
}

SIGNED_OUT = [
    "/accounts/login/",
    "/runs/demo",
    "/runs/demo/ledger/",
    "/runs/demo/artifacts/",
    "/no-such-page/",
]
SIGNED_IN = [
    "/runs/",
    "/runs/inbox/",
    "/runs/run_demo_jobsearch/",
    "/runs/run_demo_jobsearch/artifacts/?key=profile",
    "/runs/run_demo_jobsearch/artifacts/?key=postings",
    "/runs/run_demo_jobsearch/rules/",
    "/runs/run_demo_jobsearch/annotations/",
    "/runs/run_demo_jobsearch/artifacts/diff/?key=profile&a=1&b=2",
    "/runs/run_demo_jobsearch/fork/?mode=branch&seq=5",
    "/runs/run_demo_jobsearch/?at=7",
    "/compare/?a=run_demo_jobsearch&b=run_demo_nightly_batch",
    "/runs/run_demo_nightly_batch/",
    "/runs/run_demo_nightly_batch/ledger/",
    "/ledger/",
    "/members/",
    "/import/",
    "/workspace/tokens/",
    "/playground/",
    "/playground/settings/",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("demo-dark")
    with serve_app(tmp, setup_code=SETUP, extra_env=ENV) as url:
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


def _page(browser, *, dark: bool = False):
    return support.new_page(
        browser,
        ignore=("status of 400", "status of 403", "status of 404", "status of 500", "status of 422"),
        viewport={"width": 1280, "height": 900},
        color_scheme="dark" if dark else "light",
    )


def _serious(page, label: str) -> list[str]:
    from axe_playwright_python.sync_playwright import Axe

    out = []
    for v in Axe().run(page).response["violations"]:
        if v["impact"] in ("serious", "critical"):
            out.append(f"{label}: {v['id']} ({v['impact']}) {[n['target'] for n in v['nodes'][:3]]}")
    return out


def _standalone(name: str) -> str:
    """templates/<name> (400.html, 500.html) as Django renders it: without a request context."""
    from django.template.loader import render_to_string

    return render_to_string(name)


def _answer(status: int, body: str):
    """A route handler answering ``status`` with ``body`` (one argument: Playwright passes the
    request too to handlers that take two)."""

    def handle(route) -> None:
        route.fulfill(status=status, content_type="text/html", body=body)

    return handle


def _post_form(page, action: str, fields: dict[str, str]) -> None:
    """Submit a plain form the way a stale or forged page would (no CSRF token unless given)."""
    with page.expect_navigation():  # the answer's page, loaded (not the page that sent the form)
        page.evaluate(
            """([action, fields]) => { const f = document.createElement('form'); f.method = 'post'; f.action = action;
            for (const [k, v] of Object.entries(fields)) { const i = document.createElement('input'); i.type = 'hidden';
            i.name = k; i.value = v; f.append(i); } document.body.append(f); f.submit(); }""",
            [action, fields],
        )


def test_signed_out_pages_light_and_dark_have_no_serious_axe_violations(browser, server):
    violations: list[str] = []
    for dark in (False, True):
        page = _page(browser, dark=dark)
        mode = "dark" if dark else "light"
        assert page.evaluate("matchMedia('(prefers-color-scheme: dark)').matches") is dark
        for path in SIGNED_OUT:
            response = page.goto(server + path)
            assert response.status == (404 if path == "/no-such-page/" else 200), path
            violations += _serious(page, f"{mode} {path}")
        body_bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert (body_bg != "rgb(255, 255, 255)") is dark
        support.shot(page, f"demo-404-{mode}")
        for status, heading in ((500, "Something went wrong"), (400, "The request could not be read")):
            body = _standalone(f"{status}.html")
            page.route(f"{server}/__error_{status}", _answer(status, body))
            page.goto(f"{server}/__error_{status}")
            assert heading in page.inner_text("h1")
            violations += _serious(page, f"{mode} {status} page")
            support.shot(page, f"demo-{status}-{mode}")
        page.goto(f"{server}/accounts/login/")
        _post_form(page, f"{server}/accounts/login/", {"username": "x", "password": "y"})  # no CSRF token
        assert "This form has expired" in page.inner_text("h1")
        violations += _serious(page, f"{mode} CSRF failure page")
        support.shot(page, f"demo-403-csrf-{mode}")
        page.goto(f"{server}/accounts/login/")
        support.shot(page, f"demo-login-{mode}")
        assert page.console_errors == []
        page.context.close()
    assert not violations, "\n".join(violations)


def test_signed_in_pages_in_dark_mode_have_no_serious_axe_violations(browser, server):
    page = _page(browser, dark=True)
    support.sign_in(page, server, "rita")
    violations: list[str] = []
    for path in SIGNED_IN:
        response = page.goto(server + path)
        assert response.status == 200, path
        violations += _serious(page, path)
    page.goto(f"{server}/runs/run_demo_jobsearch/")
    support.shot(page, "demo-run-dark")
    page.goto(f"{server}/runs/run_demo_jobsearch/artifacts/?key=postings")
    assert page.locator("fieldset.list-item-existing").count() == 3  # a list of objects, as a form
    support.shot(page, "demo-postings-form-dark")
    assert page.console_errors == []
    page.context.close()
    assert not violations, "\n".join(violations)


def test_permission_denied_page_in_dark_mode(browser, server):
    page = _page(browser, dark=True)
    support.sign_in(page, server, "vic")  # a viewer may not import bundles
    page.goto(f"{server}/runs/")
    token = page.eval_on_selector("body", "b => JSON.parse(b.getAttribute('hx-headers'))['X-CSRFToken']")
    _post_form(page, f"{server}/import/", {"csrfmiddlewaretoken": token})
    assert "You are not allowed to do this" in page.inner_text("h1")
    violations = _serious(page, "dark 403 page")
    support.shot(page, "demo-403-dark")
    page.context.close()
    assert not violations, "\n".join(violations)


def test_public_demo_shows_every_visitor_a_pending_gate(browser, server):
    """Two visitors, and a signed-in owner approving the original in between: the public demo is a
    read-only snapshot, so both visitors see the same pending gate."""
    first = _page(browser)
    first.goto(f"{server}/runs/demo")
    assert "1 gate pending" in first.inner_text("#run-status")
    assert "score PAUSE_AFTER" in first.inner_text("#gate-panel")
    owner = _page(browser)
    support.sign_in(owner, server, "rita")
    owner.goto(f"{server}/runs/run_demo_jobsearch/")
    owner.once("dialog", lambda d: d.accept())
    owner.click("#gate-panel button[value=approved]")
    owner.wait_for_selector("#gate-panel >> text=draft CHECKPOINT")  # the owner's run moved on
    second = _page(browser, dark=True)
    second.goto(f"{server}/runs/demo")
    assert "1 gate pending" in second.inner_text("#run-status")
    assert "score PAUSE_AFTER" in second.inner_text("#gate-panel")
    assert second.locator("#gate-panel button[value=approved]").count() == 0
    support.shot(second, "demo-public-pending-dark")
    for page in (first, owner, second):
        assert page.console_errors == []
        page.context.close()


def test_large_demo_run_pages_searches_and_shows_spans(browser, server):
    page = _page(browser)
    support.sign_in(page, server, "rita")
    page.goto(f"{server}/runs/run_demo_nightly_batch/")
    assert re.search(r"of 10,?021", page.inner_text("main"))  # paged: #1–#100 of 10,021
    assert page.locator("#trace").count() == 1  # the trace view of its 2,000+ spans
    page.goto(f"{server}/runs/run_demo_nightly_batch/?q=rate+limited")
    rows = page.inner_text("#timeline-list")
    assert "429 rate limited on posting #250" in rows and "posting #2000" in rows
    support.shot(page, "demo-batch-search")
    assert page.console_errors == []
    page.context.close()


def test_ledger_per_day_chart_and_tables_that_add_up(browser, server):
    for dark in (False, True):
        page = _page(browser, dark=dark)
        support.sign_in(page, server, "rita")
        page.goto(f"{server}/runs/run_demo_nightly_batch/ledger/")
        chart = page.locator("svg.day-chart")
        assert chart.get_attribute("role") == "img"
        assert chart.locator("rect.bar-cost").count() == 2  # the batch ran past midnight
        page.click("text=Per day (data table)")
        assert page.locator("details.data-table tbody tr").count() == 2
        steps = page.locator('table[data-rollup="byStep"] tbody th').all_inner_texts()
        assert steps == ["score", "report"]  # workflow order (fetch made no model call)
        assert "(unattributed)" in page.inner_text('table[data-rollup="byUser"]')  # no user in the subject
        support.shot(page, f"demo-ledger-{'dark' if dark else 'light'}")
        assert page.console_errors == []
        page.context.close()


def test_ledgers_and_settings_on_a_phone_scroll_inside_focusable_regions(browser, server):
    page = support.new_page(browser, viewport={"width": 390, "height": 800})
    support.sign_in(page, server, "rita")
    violations: list[str] = []
    for path in ("/runs/run_demo_nightly_batch/ledger/", "/ledger/", "/playground/settings/"):
        page.goto(server + path)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, (path, width)  # the charts and tables scroll inside their own regions
        violations += _serious(page, f"390px {path}")
    support.shot(page, "demo-ledger-390")
    assert page.console_errors == []
    page.context.close()
    assert not violations, "\n".join(violations)


def test_open_in_playground_says_what_was_substituted(browser, server):
    """The demo workspace configures no provider key: a recorded gpt-4.1-mini call cannot be
    restored as it was, and the page says so instead of "restored exactly"."""
    page = _page(browser)
    support.sign_in(page, server, "rita")
    page.goto(f"{server}/runs/run_demo_nightly_batch/?q=request%3A+score+posting+%235%3A")
    page.click("#timeline-list > li.ev-model_io > details > summary >> nth=0")  # opens the light row
    page.click("#timeline-list >> text=Open in playground")
    page.wait_for_selector("#origin-model-notice:not([hidden])")
    notice = page.inner_text("#origin-model-notice")
    assert "gpt-4.1-mini (OpenAI)" in notice and "Substituted" in notice, notice
    assert "restored exactly" not in page.inner_text("#origin").lower()
    assert page.input_value("#system-prompt") == "You score job postings for a candidate profile."
    support.shot(page, "demo-playground-substituted")
    assert page.console_errors == []
    page.context.close()
