"""Run ids with any characters, safe everywhere: URLs, headers, storage.

The protocol accepts any non-empty string as a run id. Here:

- **Storage and input**: an id holding a control character (C0, DEL, C1, U+2028/U+2029) or longer
  than ``MAX_RUN_ID_LENGTH`` is refused with ``INVALID_RUN_ID`` wherever a run is created (start,
  PUT, bundle import, fork): such ids break logs, headers and terminals and no tool needs them.
- **URLs**: the ``runid`` path converter. Servers decode ``%2F`` to ``/`` before routing, so a
  percent-encoded slash would still split the path; the converter therefore escapes ``%`` and ``/``
  once more before Django percent-encodes the URL (``a/b`` -> ``a%252Fb``). After the server's one
  decoding the segment holds ``a%2Fb``: never a raw slash, and ``unquote`` gives the id back.
- **Headers**: :func:`content_disposition` writes RFC 6266 ``filename*=UTF-8''...`` with an ASCII
  fallback that cannot carry quotes, CR/LF or parameters.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

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
    return None


class RunIdConverter:
    """``<runid:run_id>``: any run id, one path segment."""

    regex = r"[^/]+"

    def to_python(self, value: str) -> str:
        return unquote(value)

    def to_url(self, value: str) -> str:
        return value.replace("%", "%25").replace("/", "%2F")


def run_path_segment(run_id: str) -> str:
    """The segment ``reverse()`` would produce for ``run_id`` (for URLs built by hand)."""
    return quote(RunIdConverter().to_url(run_id), safe="")


_ASCII_SAFE = re.compile(r"[^A-Za-z0-9._-]")


def content_disposition(filename: str, *, attachment: bool = True) -> str:
    """``attachment; filename="ascii"; filename*=UTF-8''percent-encoded`` (RFC 6266 / 8187)."""
    fallback = _ASCII_SAFE.sub("_", filename)[:150] or "download"
    kind = "attachment" if attachment else "inline"
    return f"{kind}; filename=\"{fallback}\"; filename*=UTF-8''{quote(filename, safe='')}"
