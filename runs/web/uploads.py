"""One body limit for every way in, and uploads that expire.

`WORKBENCH_MAX_BODY_BYTES` (settings.DATA_UPLOAD_MAX_MEMORY_SIZE) bounds every request body, at
the door and the same for all: pages (the /import/ upload), REST (bundle import), OTLP ingest,
MCP, playground endpoints.

- :class:`BodyLimitASGI` wraps the whole ASGI application (workbench/asgi.py), in front of Django
  and the MCP app: a declared ``Content-Length`` over the limit is answered 413 before one byte of
  the body is read; a body without one (chunked) or longer than declared is counted as it
  arrives and cut off at the limit (the application sees a disconnect, the client a 413). Django
  would otherwise read the whole body into a temporary file before any view could refuse it.
- Under daphne, which collects a whole body before it calls the application,
  :func:`install_daphne_body_limit` (called by workbench/asgi.py) refuses at the HTTP layer: at
  the headers for a declared length, at the limit for a body that keeps coming.
- :class:`BodyLimitMiddleware` gives the same answer under WSGI (and the test client).
- Both answer ``413`` with the code ``PAYLOAD_TOO_LARGE``: JSON ``{"error", "code"}`` for the
  machine paths (``/api/``, ``/v1/``), a short HTML page elsewhere.
- Multipart uploads larger than FILE_UPLOAD_MAX_MEMORY_SIZE (256 KB) stream to a temporary file,
  and the import page moves them to `var/imports/` in chunks: an upload is never held whole in
  memory (the bundle is parsed when it is checked, as any bundle is).

:class:`BodyLimitUploadHandler` (first in FILE_UPLOAD_HANDLERS) applies the same limit to
multipart uploads (the /import/ page, any form with a file): file data stops being read at the
limit (the form fields before it, the CSRF token among them, are still parsed, so the page can
answer clearly). The request is
marked (`request.body_too_large`) so the view answers 413 with a clear message.

Bundles uploaded on the import page wait in `var/imports/` for their confirmation; those older
than `WORKBENCH_IMPORT_UPLOAD_TTL_SECONDS` (default 1 h) are deleted by :func:`purge_stale_uploads`,
which runs on every upload and confirmation.
"""

from __future__ import annotations

import html
import io
import json
import time
from pathlib import Path

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import HttpResponse
from django.utils.deprecation import MiddlewareMixin

PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
_MACHINE_PATHS = ("/api/", "/v1/")
API_DESCRIBED_BY = '</api/openapi.json>; rel="describedby"'


def body_limit() -> int:
    return int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)


def refusal(path: str) -> tuple[str, bytes, dict[str, str]]:
    """The 413 answer for a body over the limit: (content type, body, more headers), JSON or
    HTML by path; API answers carry their ``Link`` to the OpenAPI document, as all of them do."""
    message = (
        f"the request body exceeds the server's limit of {body_limit()} bytes "
        "(WORKBENCH_MAX_BODY_BYTES), the same for every way in"
    )
    if path.startswith(_MACHINE_PATHS):
        headers = {"Link": API_DESCRIBED_BY} if path.startswith("/api/") else {}
        return "application/json", json.dumps({"error": message, "code": PAYLOAD_TOO_LARGE}).encode(), headers
    page = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Too large</title></head>'
        f"<body><h1>Too large</h1><p>{PAYLOAD_TOO_LARGE}: {html.escape(message)}.</p>"
        '<p><a href="javascript:history.back()">Back</a></p></body></html>'
    )
    return "text/html; charset=utf-8", page.encode(), {}


def declared_length(value: str | bytes | None) -> int | None:
    """A Content-Length header's value, or None when absent or not a number."""
    if value is None:
        return None
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    text = text.strip()
    return int(text) if text.isascii() and text.isdigit() else None


class BodyLimitASGI:
    """ASGI middleware: no HTTP request body over :func:`body_limit` gets past the door."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        limit = body_limit()
        headers = dict(scope.get("headers") or [])
        declared = declared_length(headers.get(b"content-length"))
        if declared is not None and declared > limit:
            await self._refuse(scope, send)  # nothing of the body is read
            return
        received = 0
        over = False
        started = False

        async def counted_receive():
            nonlocal received, over
            if over:
                return {"type": "http.disconnect"}
            message = await receive()
            if message.get("type") == "http.request":
                received += len(message.get("body") or b"")
                if received > limit:
                    over = True  # stop reading: the application sees the client go
                    return {"type": "http.disconnect"}
            return message

        async def tracked_send(message) -> None:
            nonlocal started
            if over and not started:
                return  # the application's answer to a cut body is replaced by the 413
            if message.get("type") == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, counted_receive, tracked_send)
        if over and not started:
            await self._refuse(scope, send)

    @staticmethod
    async def _refuse(scope, send) -> None:
        content_type, body, more = refusal(scope.get("path", ""))
        headers = [
            (b"content-type", content_type.encode()),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
            *((name.lower().encode(), value.encode()) for name, value in more.items()),
        ]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def install_daphne_body_limit() -> bool:
    """Under daphne, refuse at the HTTP layer: daphne (Twisted) collects the whole body in a
    temporary file before it calls the ASGI application, so :class:`BodyLimitASGI` would only see
    it afterwards. Patched here: a declared length over the limit is answered 413 as soon as the
    headers are in, a body is counted as it arrives and the connection closed at the limit, and
    the application is never called for a refused request. Returns False when daphne is absent."""
    try:
        from daphne.http_protocol import WebRequest
    except ImportError:
        return False
    if getattr(WebRequest, "_workbench_body_limit", False):
        return True
    got_length, content_chunk, process = (
        WebRequest.gotLength,
        WebRequest.handleContentChunk,
        WebRequest.process,
    )

    def refuse(request) -> None:
        if getattr(request, "_workbench_refused", False):
            return
        request._workbench_refused = True
        raw_path = getattr(request.channel, "_path", b"") or b""
        content_type, body, more = refusal(raw_path.decode("latin-1").split("?", 1)[0])
        head = [
            "HTTP/1.1 413 Payload Too Large",
            f"Content-Type: {content_type}",
            f"Content-Length: {len(body)}",
            "Connection: close",
            *(f"{name}: {value}" for name, value in more.items()),
        ]
        transport = request.channel.transport
        transport.write("\r\n".join(head).encode("latin-1") + b"\r\n\r\n" + body)
        transport.loseConnection()

    def limited_got_length(self, length):
        self._workbench_received = 0
        if length is not None and length > body_limit():
            refuse(self)
            self.content = io.BytesIO()  # stays empty: nothing more is kept
            return
        got_length(self, length)

    def limited_content_chunk(self, data):
        if getattr(self, "_workbench_refused", False):
            return
        self._workbench_received = getattr(self, "_workbench_received", 0) + len(data)
        if self._workbench_received > body_limit():
            refuse(self)
            return
        content_chunk(self, data)

    def limited_process(self):
        if getattr(self, "_workbench_refused", False):
            return None
        return process(self)

    WebRequest.gotLength = limited_got_length
    WebRequest.handleContentChunk = limited_content_chunk
    WebRequest.process = limited_process
    WebRequest._workbench_body_limit = True
    return True


class BodyLimitMiddleware(MiddlewareMixin):
    """The same refusal inside Django (WSGI servers, the test client): by the declared length."""

    def process_request(self, request):
        declared = declared_length(request.META.get("CONTENT_LENGTH"))
        if declared is not None and declared > body_limit():
            content_type, body, more = refusal(request.path)
            response = HttpResponse(body, content_type=content_type, status=413, headers=more)
            response["Connection"] = "close"
            return response
        return None


class BodyLimitUploadHandler(FileUploadHandler):
    def __init__(self, request=None) -> None:
        super().__init__(request)
        self.received = 0

    def _refuse(self) -> None:
        if self.request is not None:
            self.request.body_too_large = True
        raise StopUpload(connection_reset=True)

    def receive_data_chunk(self, raw_data, start):
        self.received += len(raw_data)
        if self.received > body_limit():
            self._refuse()
        return raw_data

    def file_complete(self, file_size):
        return None


def upload_ttl() -> float:
    return float(getattr(settings, "WORKBENCH_IMPORT_UPLOAD_TTL_SECONDS", 3600))


def purge_stale_uploads(directory: Path, *, now: float | None = None) -> int:
    """Delete waiting uploads older than the TTL; returns how many went."""
    cutoff = (time.time() if now is None else now) - upload_ttl()
    removed = 0
    for path in directory.glob("*.json"):
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
                removed += 1
        except FileNotFoundError:
            continue
    return removed
