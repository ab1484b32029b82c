"""The documentation site at /docs/: built from mkdocs.yml (in process, into a temporary directory),
served by the server offline, public and read-only, under a CSP that allows the site's own files
plus the hashes of its exact inline scripts and nothing inline besides."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import re
from pathlib import Path

import pytest
from django.test import Client

from workbench import docs

ROOT = Path(__file__).resolve().parents[2]


def _hook():
    spec = importlib.util.spec_from_file_location("mkdocs_csp", ROOT / "scripts" / "mkdocs_csp.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    out = tmp_path_factory.mktemp("docs_site")
    config = load_config(str(ROOT / "mkdocs.yml"), site_dir=str(out), strict=True)
    build(config)
    return out


@pytest.fixture
def served(site, settings) -> Path:
    settings.WORKBENCH_DOCS_DIR = site
    return site


def _policy(response) -> dict[str, list[str]]:
    header = response["Content-Security-Policy"]
    return {part.split()[0]: part.split()[1:] for part in header.split("; ") if part}


def _sha(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def _assert_strict(response) -> dict[str, list[str]]:
    policy = _policy(response)
    for directive in ("script-src", "style-src", "default-src"):
        assert "'unsafe-inline'" not in policy[directive] and "'unsafe-eval'" not in policy[directive]
        assert not any(source.startswith(("http:", "https:", "'nonce-")) for source in policy[directive])
    assert policy["frame-ancestors"] == ["'none'"] and policy["object-src"] == ["'none'"]
    return policy


@pytest.mark.parametrize("path", ["/docs/", "/docs/engineers/sdk/", "/docs/operators/security/"])
def test_pages_answer_with_a_csp_that_allows_exactly_their_inline_scripts(served, path):
    response = Client().get(path)  # anonymous: the docs are public
    assert response.status_code == 200 and response["Content-Type"].startswith("text/html")
    policy = _assert_strict(response)
    html = b"".join(response.streaming_content).decode()
    inline = [
        m[2]
        for m in re.finditer(r"<script(\s[^>]*)?>(.*?)</script>", html, re.S)
        if "src=" not in (m[1] or "") and "application/json" not in (m[1] or "")
    ]
    assert inline, "Material's pages carry inline scripts: the CSP must allow them by hash"
    for body in inline:
        assert _sha(body) in policy["script-src"], f"inline script not allowed by the CSP: {body[:80]}"
    assert not re.search(r"<[a-z][^>]*\sstyle=", html), "a style attribute the CSP would block"
    assert "fonts.googleapis.com" not in html and "cdn." not in html  # offline


def test_a_static_asset_of_the_site(served):
    bundle = next((served / "assets" / "javascripts").glob("bundle.*.min.js")).name
    response = Client().get(f"/docs/assets/javascripts/{bundle}")
    assert response.status_code == 200
    assert "javascript" in response["Content-Type"]
    _assert_strict(response)
    assert response["Cache-Control"] == "public, max-age=300"
    image = Client().get("/docs/img/run-gate.png")
    assert image.status_code == 200 and image["Content-Type"] == "image/png"


def test_directories_redirect_to_their_slash_and_nothing_else_is_served(served):
    client = Client()
    response = client.get("/docs/engineers/sdk")
    assert response.status_code == 302 and response["Location"] == "/docs/engineers/sdk/"
    for path in (
        "/docs/nope/",
        "/docs/csp.json",  # the build's manifest is not a page
        "/docs/..%2F..%2Fsettings.py",
        "/docs/%2e%2e/%2e%2e/manage.py",
        "/docs//etc/passwd",
    ):
        assert client.get(path).status_code == 404, path


def test_read_only(served):
    for method in ("post", "put", "patch", "delete"):
        assert getattr(Client(), method)("/docs/").status_code == 405


def test_not_built_is_a_404_that_says_how(tmp_path, settings):
    settings.WORKBENCH_DOCS_DIR = tmp_path / "missing"
    assert Client().get("/docs/").status_code == 404


def test_the_csp_follows_a_rebuild(served):
    """The hashes come from the build's manifest, read again when the site is rebuilt."""
    before = docs.docs_csp()["script-src"]
    manifest = served / docs.CSP_MANIFEST
    original = manifest.read_text()
    try:
        manifest.write_text('{"script-src": ["\'sha256-AAAA\'"]}')
        import os

        os.utime(manifest, ns=(1, manifest.stat().st_mtime_ns + 10**9))
        assert docs.docs_csp()["script-src"] == ["'self'", "'sha256-AAAA'"]
    finally:
        manifest.write_text(original)
    assert len(before) > 1


def test_the_hook_hashes_executable_inline_scripts_only():
    hook = _hook()
    html = (
        '<script>var a=1</script><script type="application/json">{"b":2}</script>'
        '<script src="x.js"></script><script type="module">import "./y.js"</script>'
        "<style>p{color:red}</style>"
    )
    scripts, styles = hook.inline_hashes(html)
    assert scripts == {_sha("var a=1"), _sha('import "./y.js"')}
    assert styles == {_sha("p{color:red}")}
