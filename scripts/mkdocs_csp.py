"""MkDocs hook: the hashes of the inline scripts of the built site, for the CSP of /docs/.

Material puts a few small inline scripts in every page (its storage helpers, the palette and
the search configuration). The server's CSP allows scripts only with a nonce, which a static
page cannot carry, so after every build this hook writes ``csp.json`` into the site: the
SHA-256 source expression of every distinct inline script. ``workbench/docs.py`` sends a CSP
for /docs/ that allows 'self' plus exactly these hashes (never 'unsafe-inline').
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path

# A <script> without src whose type (if any) is JavaScript. JSON data blocks
# (type="application/json", Material's __config) are not executed and need no hash.
_SCRIPT = re.compile(r"<script(?P<attrs>[^>]*)>(?P<body>.*?)</script>", re.S | re.I)
_JS_TYPES = {"", "text/javascript", "application/javascript", "module"}
_STYLE_ATTR = re.compile(r"""<[a-zA-Z][^>]*\sstyle\s*=""")
_STYLE_TAG = re.compile(r"<style[^>]*>(?P<body>.*?)</style>", re.S | re.I)


def _source(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def inline_hashes(html: str) -> tuple[set[str], set[str]]:
    """(script hashes, style hashes) of one page's inline scripts and <style> blocks."""
    scripts = set()
    for match in _SCRIPT.finditer(html):
        attrs = match["attrs"]
        if re.search(r"\ssrc\s*=", attrs):
            continue
        kind = re.search(r"""\stype\s*=\s*["']?([^"'\s>]+)""", attrs)
        if (kind[1].lower() if kind else "") not in _JS_TYPES:
            continue
        scripts.add(_source(match["body"]))
    styles = {_source(m["body"]) for m in _STYLE_TAG.finditer(html)}
    return scripts, styles


def on_post_build(config, **kwargs) -> None:
    site = Path(config["site_dir"])
    scripts: set[str] = set()
    styles: set[str] = set()
    style_attrs: list[str] = []
    for page in sorted(site.rglob("*.html")):
        html = page.read_text(encoding="utf-8")
        found, found_styles = inline_hashes(html)
        scripts |= found
        styles |= found_styles
        if _STYLE_ATTR.search(html):
            style_attrs.append(str(page.relative_to(site)))
    document = {
        "script-src": sorted(scripts),
        "style-src": sorted(styles),
        # Pages with style="..." attributes: the CSP blocks those (no 'unsafe-inline'); listed so
        # a theme upgrade that adds one shows up in the test of /docs/.
        "pages_with_style_attributes": style_attrs,
    }
    (site / "csp.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
