"""The docs site at /docs/ in Chromium, served by daphne under its CSP: no violation on any page
(Material's inline scripts are allowed by their hashes), search answers (its worker and index are
the site's own files), the theme toggle runs, and no request leaves the server (offline)."""

from __future__ import annotations

import pytest

from tests.browser import support
from tests.browser.support import serve_app

pytestmark = pytest.mark.browser

PAGES = ["/docs/", "/docs/users/reviewers/", "/docs/engineers/sdk/", "/docs/scaling/", "/docs/reference/cli/"]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    site = tmp_path_factory.mktemp("docs_site")
    build(load_config(str(support.REPO / "mkdocs.yml"), site_dir=str(site), strict=True))
    with serve_app(
        tmp_path_factory.mktemp("docs_server"),
        setup_code="import django; django.setup()",
        extra_env={"WORKBENCH_DOCS_DIR": str(site)},
    ) as url:
        yield url


def test_docs_pages_run_under_the_csp_offline(base):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = support.launch(p)
        page = support.new_page(browser)
        requests: list[str] = []
        page.on("request", lambda request: requests.append(request.url))
        for path in PAGES:
            response = page.goto(base + path)
            page.wait_for_load_state("networkidle")
            assert response.status == 200, path
            assert "'unsafe-inline'" not in response.headers["content-security-policy"]
        # Material's scripts ran: the palette toggle switches the scheme, search finds pages.
        before = page.get_attribute("body", "data-md-color-scheme")
        page.locator("label.md-header__button[for^=__palette]:visible").first.click()
        assert page.get_attribute("body", "data-md-color-scheme") != before
        page.keyboard.press("s")
        page.keyboard.type("gate")
        page.wait_for_selector(".md-search-result__item", timeout=10_000)
        assert page.locator(".md-search-result__item").count() > 0
        support.shot(page, "docs-search")
        browser.close()
    assert page.console_errors == []  # type: ignore[attr-defined]  # CSP violations included
    assert [url for url in requests if not url.startswith(base)] == []
