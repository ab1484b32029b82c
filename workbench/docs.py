"""The documentation site at /docs/: the MkDocs build (``mkdocs.yml``) served by the server itself,
offline, public and read-only.

The site is built into ``settings.WORKBENCH_DOCS_DIR`` (``workbench/docs_site/``) by ``make setup``
and by the wheel's build step (setup.py). Its pages are static, so they cannot carry the per-request
CSP nonce of the application's pages: their CSP allows scripts and styles from 'self' plus the
SHA-256 hashes of the exact inline scripts the build produced (``csp.json``, written by the build
hook ``scripts/mkdocs_csp.py``), never 'unsafe-inline'.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.csp import CSP
from django.views.decorators.http import require_safe
from django.views.static import serve

CSP_MANIFEST = "csp.json"


def docs_root() -> Path:
    return Path(settings.WORKBENCH_DOCS_DIR)


@functools.cache
def _csp_for(manifest: Path, mtime_ns: int) -> dict[str, list[str]]:
    hashes: dict[str, Any] = json.loads(manifest.read_text(encoding="utf-8"))
    return {
        "default-src": [CSP.SELF],
        "script-src": [CSP.SELF, *hashes.get("script-src", [])],
        "style-src": [CSP.SELF, *hashes.get("style-src", [])],
        "img-src": [CSP.SELF, "data:"],
        "font-src": [CSP.SELF],
        "connect-src": [CSP.SELF],  # the search index
        "worker-src": [CSP.SELF],  # the search worker
        "frame-ancestors": [CSP.NONE],
        "form-action": [CSP.SELF],
        "base-uri": [CSP.SELF],
        "object-src": [CSP.NONE],
    }


def docs_csp() -> dict[str, list[str]]:
    """The CSP of the built site: 'self' plus the hashes of its inline scripts (read again when the
    site is rebuilt). A site without the manifest gets no inline script at all."""
    manifest = docs_root() / CSP_MANIFEST
    try:
        mtime = manifest.stat().st_mtime_ns
    except FileNotFoundError:
        return _csp_for_missing()
    return _csp_for(manifest, mtime)


def _csp_for_missing() -> dict[str, list[Any]]:
    return {key: [CSP.SELF] for key in ("default-src", "script-src", "style-src")} | {
        "frame-ancestors": [CSP.NONE],
        "object-src": [CSP.NONE],
    }


@require_safe
def page(request: HttpRequest, path: str = "") -> HttpResponse:
    """One file of the site: a directory's ``index.html`` for ``.../``, a redirect to ``path/`` for
    a directory named without its slash (so the pages' relative links resolve), 404 otherwise."""
    root = docs_root()
    if not (root / "index.html").is_file():
        raise Http404("The documentation site is not built: run `make setup` (or `mkdocs build`).")
    if path == CSP_MANIFEST:
        raise Http404("not a page of the site")
    target = (root / path).resolve()
    if not target.is_relative_to(root.resolve()):  # nothing outside the site, not even whether it exists
        raise Http404("not a page of the site")
    if path == "" or path.endswith("/"):
        path += "index.html"
    elif target.is_dir() and (target / "index.html").is_file():
        return HttpResponseRedirect(request.path + "/")
    response: Any = serve(request, path, document_root=str(root))  # a FileResponse
    response._csp_config = docs_csp()  # read by Django's CSP middleware (csp_override's attribute)
    response["Cache-Control"] = "public, max-age=300"
    return response
