"""OAuth sign-in of an MCP host completed in a real browser (issue 54).

The official MCP SDK's OAuth client (OAuthClientProvider) against a daphne process; its
redirect handler opens the authorization URL in Chromium, where alice (signed in) picks the
workspace and clicks Authorize. Chromium applies the page's CSP ``form-action`` to the redirect
that answers the form: with the site-wide ``form-action 'self'`` the redirect to the client's
callback was blocked and the host never got its code (the HTTP-client test could not see it).
Then a tool is called with the token, and alice revokes it from the tokens page in the browser.
"""

from __future__ import annotations

import asyncio
import threading
from urllib.parse import parse_qs, urlparse

import pytest

from tests.browser.support import launch, require_chromium
from tests.conftest import LINEAR_WORKFLOW
from tests.live.cluster import Cluster

pytest.importorskip("mcp")
pytest.importorskip("oauth2_provider")

from mcp.client.auth import AuthorizationCodeResult  # noqa: E402

from tests.mcp.test_mcp_oauth import (  # noqa: E402
    REDIRECT,
    MemoryStorage,
    list_runs_with,
    oauth_client,
    provider,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def server():
    require_chromium()
    with Cluster(database="sqlite", servers=1) as cluster:
        seed = cluster.seed(workflow=LINEAR_WORKFLOW, run_id="run_acme")
        yield {
            "cluster": cluster,
            "base": cluster.url(0, ""),
            "url": cluster.url(0, "/api/mcp"),
            "session": seed["sessions"]["alice"],
        }


def _browser_context(pw, server):
    browser = launch(pw)
    context = browser.new_context()
    host = urlparse(server["base"]).hostname
    context.add_cookies([{"name": "sessionid", "value": server["session"], "domain": host, "path": "/"}])
    return browser, context


class ChromiumPerson:
    """Alice in Chromium: the consent page opened, Authorize clicked, the callback caught."""

    def __init__(self, server) -> None:
        self.server = server
        self.callback: str | None = None
        self.violations: list[str] = []

    def _consent(self, authorization_url: str) -> None:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as pw:
            browser, context = _browser_context(pw, self.server)
            page = context.new_page()
            caught = threading.Event()

            def at_callback(route) -> None:  # the host's loopback listener, played by the browser
                self.callback = route.request.url
                caught.set()
                route.fulfill(status=200, content_type="text/plain", body="signed in")

            page.route(REDIRECT.rsplit("/", 1)[0] + "/**", at_callback)
            page.on(
                "console",
                lambda msg: self.violations.append(msg.text) if "Content Security" in msg.text else None,
            )
            page.goto(authorization_url)
            page.locator("#id_workspace").select_option("acme")
            for scope in ("read", "write"):
                page.locator(f'input[name="grant"][value="{scope}"]').check()
            page.get_by_role("button", name="Authorize").click()
            page.wait_for_timeout(100)
            for _ in range(50):
                if caught.is_set():
                    break
                page.wait_for_timeout(100)
            browser.close()

    async def redirect_handler(self, authorization_url: str) -> None:
        await asyncio.to_thread(self._consent, authorization_url)

    async def callback_handler(self) -> AuthorizationCodeResult:
        assert self.callback is not None, f"the browser never reached the callback: {self.violations}"
        query = parse_qs(urlparse(self.callback).query)
        return AuthorizationCodeResult(
            code=query["code"][0], state=query["state"][0], iss=query.get("iss", [None])[0]
        )


def test_consent_clicked_in_chromium_signs_the_host_in(server):
    person = ChromiumPerson(server)
    storage = MemoryStorage()
    auth = provider(server, person, storage)

    async def host():
        async with oauth_client(server, auth, "auto") as client:
            return await client.call_tool("list_runs", {})

    listed = asyncio.run(host())
    assert not person.violations, person.violations
    assert person.callback is not None and person.callback.startswith(REDIRECT)
    assert not listed.is_error, listed
    assert [r["id"] for r in listed.structured_content["runs"]] == ["run_acme"]
    token = storage.tokens
    assert token is not None

    # Alice revokes the host on the tokens page, in the browser.
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser, context = _browser_context(pw, server)
        page = context.new_page()
        page.goto(server["base"] + "/workspace/tokens/")
        oauth = page.locator('form[action^="/workspace/tokens/oauth/"]')
        assert oauth.count() == 1
        oauth.get_by_role("button").click()
        page.wait_for_load_state()
        assert page.locator('form[action^="/workspace/tokens/oauth/"]').count() == 0
        browser.close()
    refused = list_runs_with(server, token.access_token)
    assert refused.status_code == 401
