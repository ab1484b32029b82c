"""Everything a trace carries is rendered escaped; scripts only with the CSP nonce."""

from __future__ import annotations

import re

import pytest

from tests.pages.conftest import login

pytestmark = pytest.mark.django_db

RAW_MARKERS = ['<script>alert("x")</script>', 'onmouseover="alert(1)"', 'href="javascript:']


def assert_escaped(html: str) -> None:
    for marker in RAW_MARKERS:
        assert marker not in html, marker
    # every <script> tag is ours: it has the CSP nonce and a same-origin src
    for tag in re.findall(r"<script\b[^>]*>", html):
        assert "nonce=" in tag and "src=" in tag, tag


def test_hostile_trace_is_escaped_on_every_page(client, alice, hostile_run):
    login(client, alice)
    pages = [
        f"/runs/{hostile_run.run_id}/",
        f"/runs/{hostile_run.run_id}/artifacts/?key=evil",
        f"/runs/{hostile_run.run_id}/ledger/",
        f"/runs/{hostile_run.run_id}/rules/",
        "/runs/",
        "/ledger/",
    ]
    pages += [f"/runs/{hostile_run.run_id}/events/{seq}/" for seq in range(1, hostile_run.last_seq + 1)]
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, url
        html = response.content.decode()
        assert_escaped(html)
        assert "&lt;script&gt;" in html or url.endswith("/rules/") or url == "/ledger/", url
    detail = client.get(f"/runs/{hostile_run.run_id}/").content.decode()
    # an opened row's detail (loaded on demand) shows the event JSON
    detail += "".join(
        client.get(
            f"/runs/{hostile_run.run_id}/events/{seq}/detail/", HTTP_HX_REQUEST="true"
        ).content.decode()
        for seq in range(1, hostile_run.last_seq + 1)
    )
    assert_escaped(detail)
    assert "javascript:alert(1)" in detail  # shown as text, never as a link target
    assert "more characters" in detail  # the 300 kB string is clipped
    assert "nested too deep" in detail  # the 200-level nesting is cut off
    assert len(detail) < 2_000_000


def test_htmx_fragments_are_escaped_too(client, alice, hostile_run):
    login(client, alice)
    for url in [
        f"/runs/{hostile_run.run_id}/timeline/",
        f"/runs/{hostile_run.run_id}/timeline/?q=script",
        f"/runs/{hostile_run.run_id}/graph/",
        f"/runs/{hostile_run.run_id}/gates/",
        f"/runs/{hostile_run.run_id}/events/3/",
        f"/runs/{hostile_run.run_id}/events/3/detail/",
    ]:
        assert_escaped(client.get(url, HTTP_HX_REQUEST="true").content.decode())


def test_csp_header_with_nonce_matches_the_scripts(client, alice, run):
    login(client, alice)
    response = client.get(f"/runs/{run.run_id}/")
    csp = response["Content-Security-Policy"]
    nonce = re.search(r"'nonce-([^']+)'", csp).group(1)
    assert "script-src 'self' 'nonce-" in csp
    tags = re.findall(r"<script\b[^>]*>", response.content.decode())
    assert tags and all(f'nonce="{nonce}"' in t for t in tags)
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert '"allowEval": false' in response.content.decode()


def test_json_tree_filter_escapes_keys_and_values():
    from runs.templatetags.workbench import json_tree

    html = str(json_tree({"<b>k</b>": ["<i>v</i>", 1, None, True, {"x": '"><img src=x onerror=alert(1)>'}]}))
    assert "<b>" not in html and "<i>" not in html and "<img" not in html
    assert "&lt;b&gt;k&lt;/b&gt;" in html and "&lt;img src=x onerror=alert(1)&gt;" in html
