"""Long URLs and large headers get an answer, never a dropped connection.

- A URL (path and query string) over :data:`MAX_URL_CHARS` is answered ``414 URI_TOO_LONG``;
  request headers over :data:`MAX_HEADER_BYTES` in all (or one header line over
  :data:`MAX_LINE_BYTES`, or more than :data:`MAX_HEADERS` of them) ``431 HEADERS_TOO_LARGE``.
  Machine paths (``/api/``, ``/v1/``) get JSON ``{"error", "code"}``, pages a short HTML page.
- Under daphne the HTTP layer (Twisted's ``HTTPChannel``) refuses a request line over 16 KiB by
  dropping the connection without a word, and oversized headers with a bare 400.
  :func:`install_daphne_request_limits` (called by workbench/asgi.py) answers those with the 414
  or 431 above instead, then closes the connection gracefully (the answer is sent, the rest of
  the request read and dropped) so the client sees it.
- :class:`UrlLengthMiddleware` gives the same 414 inside Django (any server, the test client) for
  URLs that fit in the server's request line but pass :data:`MAX_URL_CHARS`.
"""

from __future__ import annotations

import html
import json

from django.http import HttpResponse
from django.utils.deprecation import MiddlewareMixin

from runs.web.uploads import API_DESCRIBED_BY

MAX_LINE_BYTES = 16 * 1024  # Twisted's LineReceiver.MAX_LENGTH: one request or header line
MAX_URL_CHARS = 16_000  # path and query string (what fits in one request line with its method)
MAX_HEADER_BYTES = 32 * 1024  # all header lines of one request, request line excluded
MAX_HEADERS = 200

URI_TOO_LONG = "URI_TOO_LONG"
HEADERS_TOO_LARGE = "HEADERS_TOO_LARGE"
_REASONS = {414: "URI Too Long", 431: "Request Header Fields Too Large"}
_MACHINE_PATHS = ("/api/", "/v1/")


def answer(status: int, path: str) -> tuple[str, bytes, dict[str, str]]:
    """(content type, body, more headers) of a 414 or 431, JSON or HTML by path."""
    if status == 414:
        code = URI_TOO_LONG
        message = (
            f"the URL is longer than the server accepts ({MAX_URL_CHARS} characters for path and "
            "query string): send long input in a POST body"
        )
    else:
        code = HEADERS_TOO_LARGE
        message = (
            f"the request headers are larger than the server accepts ({MAX_HEADER_BYTES} bytes in all, "
            f"{MAX_LINE_BYTES} per header, {MAX_HEADERS} headers): clear this site's cookies or send fewer headers"
        )
    if path.startswith(_MACHINE_PATHS):
        headers = {"Link": API_DESCRIBED_BY} if path.startswith("/api/") else {}
        return "application/json", json.dumps({"error": message, "code": code}).encode(), headers
    title = "Address too long" if status == 414 else "Request too large"
    page = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title}</title></head>'
        f"<body><h1>{title}</h1><p>{code}: {html.escape(message)}.</p>"
        '<p><a href="/">Start page</a></p></body></html>'
    )
    return "text/html; charset=utf-8", page.encode(), {}


def _path_of(target: bytes) -> str:
    """The path of a request target (``/a/b?q`` or a partial request line ``GET /a/b?q...``)."""
    text = target.decode("latin-1")
    if " " in text:
        parts = text.split(" ")
        text = parts[1] if len(parts) > 1 else ""
    return text.split("?", 1)[0]


class UrlLengthMiddleware(MiddlewareMixin):
    """414 for a URL over :data:`MAX_URL_CHARS`, before anything routes or parses it."""

    def process_request(self, request):
        query = request.META.get("QUERY_STRING", "")
        if len(request.path) + len(query) > MAX_URL_CHARS:
            content_type, body, more = answer(414, request.path)
            return HttpResponse(
                body,
                content_type=content_type,
                status=414,
                headers={**more, "Content-Length": str(len(body))},
            )
        return None


def install_daphne_request_limits() -> bool:
    """Patch Twisted's HTTPChannel (daphne's HTTP layer) to answer 414 and 431 instead of
    dropping the connection or answering a bare 400. Returns False when Twisted is absent."""
    try:
        from twisted.web.http import HTTPChannel
    except ImportError:
        return False
    if getattr(HTTPChannel, "_workbench_request_limits", False):
        return True
    line_received, header_received = HTTPChannel.lineReceived, HTTPChannel.headerReceived

    def first_line(channel) -> bool:
        return bool(getattr(channel, "_HTTPChannel__first_line", 0))

    def refuse(channel, status: int, target: bytes) -> None:
        if getattr(channel, "_workbench_refused", False):
            return
        channel._workbench_refused = True
        content_type, body, more = answer(status, _path_of(target))
        head = [
            f"HTTP/1.1 {status} {_REASONS[status]}",
            f"Content-Type: {content_type}",
            f"Content-Length: {len(body)}",
            "Connection: close",
            *(f"{name}: {value}" for name, value in more.items()),
        ]
        # Read and drop the rest of the request, so closing does not reset the connection
        # before the client has read the answer; give the client a few seconds to go.
        channel.dataReceived = lambda data: None
        channel.lineReceived = lambda line: None
        transport = channel.transport
        transport.write("\r\n".join(head).encode("latin-1") + b"\r\n\r\n" + body)
        lose_write = getattr(transport, "loseWriteConnection", None)
        if lose_write is not None:
            lose_write()
            from twisted.internet import reactor  # the running reactor (daphne installed it)

            # Twisted declares zope interface methods without `self` (read right by mypy-zope only)
            reactor.callLater(5, transport.loseConnection)  # type: ignore[arg-type]
        else:  # pragma: no cover - TCP transports have it
            transport.loseConnection()

    def limited_line_length_exceeded(self, line):
        if first_line(self):
            refuse(self, 414, line)
        else:
            refuse(self, 431, getattr(self, "_path", b"") or b"")

    def limited_line_received(self, line):
        if not first_line(self):
            headers = getattr(self, "_workbench_header_bytes", 0) + len(line)
            self._workbench_header_bytes = headers
            if headers > MAX_HEADER_BYTES:
                refuse(self, 431, getattr(self, "_path", b"") or b"")
                return None
        else:
            self._workbench_header_bytes = 0
        return line_received(self, line)

    def limited_header_received(self, line):
        if getattr(self, "_receivedHeaderCount", 0) >= MAX_HEADERS:
            refuse(self, 431, getattr(self, "_path", b"") or b"")
            return False
        return header_received(self, line)

    HTTPChannel.MAX_LENGTH = MAX_LINE_BYTES
    # Twisted's own total (request line and headers) sits above ours, so ours answers first.
    HTTPChannel.totalHeadersSize = MAX_LINE_BYTES + MAX_HEADER_BYTES + 4096
    # A patch of the class on purpose (daphne builds the channels): setattr says so to mypy.
    patches = {
        "lineLengthExceeded": limited_line_length_exceeded,
        "lineReceived": limited_line_received,
        "headerReceived": limited_header_received,
        "_workbench_request_limits": True,
    }
    for name, value in patches.items():
        setattr(HTTPChannel, name, value)
    return True
