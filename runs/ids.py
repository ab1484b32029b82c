"""Run ids with any characters, safe everywhere: URLs, headers, storage.

The protocol accepts any non-empty string as a run id. Here:

- **Storage and input**: an id holding a control character (C0, DEL, C1, U+2028/U+2029) or longer
  than ``MAX_RUN_ID_LENGTH`` is refused with ``INVALID_RUN_ID`` wherever a run is created (start,
  PUT, bundle import, fork): such ids break logs, headers and terminals and no tool needs them.
  So are ``.`` and ``..`` and ids that decode to them (``%2e%2e``): as a path segment, clients
  and proxies normalise them away (``/api/runs/../events`` is ``/api/events``), so such a run
  could be created but never reached.
- **URLs**: the ``runid`` path converter. Servers decode ``%2F`` to ``/`` before routing, so a
  percent-encoded slash would still split the path; the converter therefore escapes ``%`` and ``/``
  once more before Django percent-encodes the URL (``a/b`` -> ``a%252Fb``). After the server's one
  decoding the segment holds ``a%2Fb``: never a raw slash, and ``unquote`` gives the id back.
- **REST URLs** (``/api/runs/{id}...``): clients percent-encode the id once (``a/b`` -> ``a%2Fb``),
  as ``quote(id, safe="")`` does. Servers decode the path before Django sees it, so
  :class:`RawApiPathMiddleware` routes API run paths from the path the client sent (ASGI
  ``raw_path``; WSGI ``REQUEST_URI`` or ``RAW_URI``), keeping ``%2F``, ``%25`` and ``%3A`` escaped for the
  same ``runid`` converter. Without a raw path (a server that gives none) ids with ``/`` cannot be
  told apart from the route and answer 404; every other id still round-trips.
- **Headers**: :func:`content_disposition` writes RFC 6266 ``filename*=UTF-8''...`` with an ASCII
  fallback that cannot carry quotes, CR/LF or parameters.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

from django.urls import register_converter
from django.utils.deprecation import MiddlewareMixin

INVALID_RUN_ID = "INVALID_RUN_ID"
MAX_RUN_ID_LENGTH = 200  # the column's size

_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def run_id_problem(run_id: object) -> str | None:
    """Why ``run_id`` cannot be stored (None when it can)."""
    if not isinstance(run_id, str) or not run_id:
        return "a run id is a non-empty string"
    if len(run_id) > MAX_RUN_ID_LENGTH:
        return f"a run id has at most {MAX_RUN_ID_LENGTH} characters (this one has {len(run_id)})"
    bad = _FORBIDDEN.search(run_id)
    if bad:
        return f"a run id cannot contain control characters (U+{ord(bad.group()):04X} at {bad.start()})"
    if _dot_segment(run_id):
        return (
            f"a run id cannot be {run_id!r}: in a URL it is a dot segment that clients and proxies "
            "normalise to another path"
        )
    return None


def _dot_segment(run_id: str) -> bool:
    """``.`` or ``..``, also once or more percent-decoded (``%2e``, ``.%2E``, ``%252e%252e``)."""
    for _ in range(4):
        if run_id in (".", ".."):
            return True
        decoded = unquote(run_id)
        if decoded == run_id:
            return False
        run_id = decoded
    return run_id in (".", "..")


class RunIdConverter:
    """``<runid:run_id>``: any run id, one path segment."""

    regex = r"[^/]+"

    def to_python(self, value: str) -> str:
        return unquote(value)

    def to_url(self, value: str) -> str:
        return value.replace("%", "%25").replace("/", "%2F")


register_converter(RunIdConverter, "runid")  # pages and REST: any run id, one path segment


API_RUN_PATHS = "/api/runs/"
# Kept escaped for the converter: "/" (would split the path), "%" (the converter unquotes once) and
# ":" (a run id "x:fork" must not reach the ":fork" route).
_KEPT_ESCAPES = re.compile(r"%(2[fF]|25|3[aA])")


def api_path_info(path_info: str, *, script_name: str = "", raw_path: str | None = None) -> str:
    """The path the URL resolver sees for an API run path: decoded once, ``%2F``, ``%25``, ``%3A`` kept.

    ``raw_path`` is the path as the client sent it (percent-encoded, no query). It is used only
    when it decodes to the very path the server gave (``script_name + path_info``); otherwise the
    decoded path is kept, with ``%`` escaped so the converter's one unquoting gives it back.
    """
    if not path_info.startswith(API_RUN_PATHS):
        return path_info
    if raw_path is not None and unquote(raw_path) == script_name + path_info:
        kept = unquote(_KEPT_ESCAPES.sub(lambda m: "%25" + m.group(1).upper(), raw_path))
        if kept.startswith(script_name):
            return kept[len(script_name) :]
    return path_info.replace("%", "%25")


def _raw_path(request) -> str | None:
    scope = getattr(request, "scope", None)
    if scope is not None:  # ASGI
        raw = scope.get("raw_path")
        return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else None
    uri = request.META.get("RAW_URI") or request.META.get("REQUEST_URI")  # gunicorn, uwsgi
    if not uri:
        return None
    return uri.encode("latin-1", "replace").decode("utf-8", "replace").split("?", 1)[0]


class RawApiPathMiddleware(MiddlewareMixin):
    """Routes ``/api/runs/...`` from the raw path so an encoded ``/`` stays inside the id."""

    def process_request(self, request) -> None:
        request.path_info = api_path_info(
            request.path_info,
            script_name=request.META.get("SCRIPT_NAME", "") or "",
            raw_path=_raw_path(request),
        )


def run_path_segment(run_id: str) -> str:
    """The segment ``reverse()`` would produce for ``run_id`` (for URLs built by hand)."""
    return quote(RunIdConverter().to_url(run_id), safe="")


_ASCII_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def content_disposition(filename: str, *, attachment: bool = True) -> str:
    """``attachment; filename="ascii"; filename*=UTF-8''percent-encoded`` (RFC 6266 / 8187)."""
    fallback = _ASCII_SAFE.sub("_", filename)[:150] or "download"
    kind = "attachment" if attachment else "inline"
    return f"{kind}; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"
