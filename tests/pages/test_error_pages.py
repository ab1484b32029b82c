"""Branded error pages (400, 403, the CSRF failure, 404) instead of Django's bare defaults: the
site's layout, a heading, what happened and where to go; nothing of the request echoed unescaped."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


def test_csrf_failure_is_a_branded_page():
    answer = Client(enforce_csrf_checks=True).post("/accounts/login/", {"username": "x", "password": "y"})
    html = answer.content.decode()
    assert answer.status_code == 403 and '<html lang="en">' in html
    assert (
        "This form has expired" in html
        and "<title>Form expired" in html
        and 'href="/accounts/login/"' in html
    )


def test_permission_denied_is_a_branded_page(client, vera):
    client.force_login(vera)  # a viewer may not import bundles
    answer = client.post("/import/", {})
    html = answer.content.decode()
    assert answer.status_code == 403 and "You are not allowed to do this" in html
    assert "<nav" in html  # the site's navigation, signed in


def test_bad_request_is_a_branded_page():
    answer = Client().get("/runs/", HTTP_HOST="<script>x</script>.example")
    html = answer.content.decode()
    assert answer.status_code == 400 and "The request could not be read" in html
    assert "<script>x" not in html


def _inline_style(html: str) -> str:
    start = html.index("<style>") + len("<style>")
    return html[start : html.index("</style>", start)]


@pytest.mark.parametrize("page", ["csrf", "login", "500"])
def test_pages_carry_their_colours_inline_allowed_by_the_csp(client, page):
    """Issue 23 §6: the dark CSRF failure page was checked before workbench.css applied. The page
    frame's colours (light and dark) are inline in <head>, allowed by their hash: styled before the
    first paint, whatever the stylesheet's timing; also on pages rendered without a request."""
    import base64
    import hashlib

    from django.conf import settings
    from django.template.loader import render_to_string

    if page == "csrf":
        answer = Client(enforce_csrf_checks=True).post("/accounts/login/", {"username": "x", "password": "y"})
    elif page == "login":
        answer = client.get("/accounts/login/")
    else:
        answer = None
    html = answer.content.decode() if answer is not None else render_to_string("500.html")
    css = _inline_style(html)
    assert "prefers-color-scheme: dark" in css and ".skip-link" in css and ".brand" in css
    assert html.index("<style>") < html.index("workbench.css") < html.index("</head>")
    digest = base64.b64encode(hashlib.sha256(css.encode()).digest()).decode()
    assert f"'sha256-{digest}'" == settings.WORKBENCH_CRITICAL_CSS_SOURCE
    if answer is not None:
        style_src = next(d for d in answer["Content-Security-Policy"].split(";") if "style-src" in d)
        assert f"'sha256-{digest}'" in style_src


def test_branded_pages_under_debug_unless_the_debug_pages_are_asked_for(client, alice, settings):
    """``make run`` serves with DEBUG on: a missing run is the branded 404, not the yellow page."""
    settings.DEBUG = True
    client.force_login(alice)
    for url in ("/runs/run_nobody_has/", "/no/such/page/"):
        answer = client.get(url)
        html = answer.content.decode()
        assert answer.status_code == 404 and '<html lang="en">' in html, url
        assert "Using the URLconf" not in html and "technical_404" not in html, url
    settings.WORKBENCH_DEBUG_ERROR_PAGES = True
    html = client.get("/no/such/page/").content.decode()
    assert "Using the URLconf" in html  # Django's debug page, asked for explicitly


def test_a_crash_under_debug_is_the_branded_500(rf, settings):
    from runs.web.error_pages import BrandedErrorPagesMiddleware

    settings.DEBUG = True
    middleware = BrandedErrorPagesMiddleware(lambda request: None)
    answer = middleware.process_exception(rf.get("/runs/"), RuntimeError("boom"))
    assert answer is not None and answer.status_code == 500 and "boom" not in answer.content.decode()
