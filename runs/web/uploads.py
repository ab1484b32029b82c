"""Body limits at the door, the same on every way in, and uploads that expire.

`WORKBENCH_MAX_BODY_BYTES` (settings.DATA_UPLOAD_MAX_MEMORY_SIZE, 25 MiB) bounds every request
body: pages, REST, OTLP ingest, MCP, playground endpoints. Bundle imports alone (``POST
/api/bundles`` and the ``POST /import/`` upload, :data:`BUNDLE_ROUTES`) have the larger
`WORKBENCH_MAX_BUNDLE_BYTES` (8 GiB by default): their body is copied to a file in chunks
(runs/web/spool.py, the /import/ page's upload handlers), never held in memory.
:func:`limit_for` says which limit a request has; every place below asks it.

- :class:`BodyLimitASGI` wraps the whole ASGI application (workbench/asgi.py), in front of Django
  and the MCP app: a declared ``Content-Length`` over the limit is answered 413 before one byte of
  the body is read; a body without one (chunked) or longer than declared is counted as it
  arrives and cut off at the limit (the application sees a disconnect, the client a 413). Django
  would otherwise read the whole body into a temporary file before any view could refuse it.
- Under daphne, which collects a whole body before it calls the application,
  :func:`install_daphne_body_limit` (called by workbench/asgi.py) refuses at the HTTP layer: at
  the headers for a declared length, at the limit for a body that keeps coming. It also hands a
  body daphne kept in a temporary file to the application a chunk at a time as the application
  reads it (daphne would queue the whole body in memory at once).
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

import asyncio
import html
import io
import json
import time
from functools import partial
from pathlib import Path

from django.conf import settings
from django.core.files.uploadhandler import FileUploadHandler, StopUpload
from django.http import HttpResponse
from django.utils.deprecation import MiddlewareMixin

from runs.presenters import errors

PAYLOAD_TOO_LARGE = "PAYLOAD_TOO_LARGE"
_MACHINE_PATHS = ("/api/", "/v1/")
API_DESCRIBED_BY = '</api/openapi.json>; rel="describedby"'


# (method, path) of the bundle imports: the only requests with the larger limit
BUNDLE_ROUTES = frozenset({("POST", "/api/bundles"), ("POST", "/import/")})


def body_limit() -> int:
    return int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)


def bundle_limit() -> int:
    return int(getattr(settings, "WORKBENCH_MAX_BUNDLE_BYTES", 8 * 1024**3))


def is_bundle_route(method: str | bytes | None, path: str | bytes | None) -> bool:
    """True for a bundle import (``POST /api/bundles``, ``POST /import/``), whose body may be large."""
    if isinstance(method, bytes):
        method = method.decode("latin-1")
    if isinstance(path, bytes):
        path = path.decode("latin-1")
    return ((method or "").upper(), (path or "").split("?", 1)[0]) in BUNDLE_ROUTES


def _text(value: str | bytes | None) -> str:
    return value.decode("latin-1") if isinstance(value, bytes) else (value or "")


def presents_credentials(authorization: str | bytes | None, cookie: str | bytes | None) -> bool:
    """Whether a request carries a credential at all: a bearer token, or a session cookie.

    Checked at the door, before any database is at hand, so it is only the credential's presence:
    the view still authenticates it. It keeps the large bundle limit from anyone who sends none
    (a stranger's body is refused at 25 MiB, not stored up to the bundle limit)."""
    if _text(authorization).lstrip().lower().startswith("bearer "):
        return True
    name = str(settings.SESSION_COOKIE_NAME)
    return any(part.strip().startswith(name + "=") for part in _text(cookie).split(";"))


def limit_for(
    method: str | bytes | None,
    path: str | bytes | None,
    authorization: str | bytes | None = None,
    cookie: str | bytes | None = None,
) -> int:
    """The body limit of a request: :func:`bundle_limit` for a bundle import that presents a
    credential, else :func:`body_limit`."""
    if is_bundle_route(method, path) and presents_credentials(authorization, cookie):
        return bundle_limit()
    return body_limit()


def request_limit(request) -> int:
    """:func:`limit_for` of a Django request."""
    return limit_for(
        request.method, request.path, request.META.get("HTTP_AUTHORIZATION"), request.META.get("HTTP_COOKIE")
    )


def refusal(path: str, method: str = "POST", limit: int | None = None) -> tuple[str, bytes, dict[str, str]]:
    """The 413 answer for a body over ``limit`` (the request's limit, by default the body limit):
    (content type, body, more headers), JSON or HTML by path; API answers carry their ``Link`` to
    the OpenAPI document, as all of them do."""
    limit = body_limit() if limit is None else limit
    if limit == bundle_limit() and is_bundle_route(method, path):
        message = (
            f"the request body exceeds the server's limit of {limit} bytes for a bundle "
            "import (WORKBENCH_MAX_BUNDLE_BYTES)"
        )
    elif is_bundle_route(method, path):
        message = (
            f"the request body exceeds the server's limit of {limit} bytes (WORKBENCH_MAX_BODY_BYTES); "
            "a bundle import that presents a credential (a bearer token or a session) may be larger, "
            f"up to {bundle_limit()} bytes (WORKBENCH_MAX_BUNDLE_BYTES)"
        )
    else:
        message = (
            f"the request body exceeds the server's limit of {limit} bytes "
            "(WORKBENCH_MAX_BODY_BYTES), the same for every way in but bundle imports"
        )
    if path.startswith(_MACHINE_PATHS):
        headers = {"Link": API_DESCRIBED_BY} if path.startswith("/api/") else {}
        return "application/json", json.dumps({"error": message, "code": PAYLOAD_TOO_LARGE}).encode(), headers
    page = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Too large</title></head>'
        f"<body><h1>Too large</h1><p>{html.escape(errors.sentence(message))} "
        f'<code class="error-code">{PAYLOAD_TOO_LARGE}</code></p>'
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
    """ASGI middleware: no HTTP request body over its :func:`limit_for` gets past the door."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        limit = limit_for(
            scope.get("method"), scope.get("path"), headers.get(b"authorization"), headers.get(b"cookie")
        )
        declared = declared_length(headers.get(b"content-length"))
        if declared is not None and declared > limit:
            await self._refuse(scope, send, limit)  # nothing of the body is read
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
            await self._refuse(scope, send, limit)

    @staticmethod
    async def _refuse(scope, send, limit: int) -> None:
        content_type, body, more = refusal(scope.get("path", ""), scope.get("method", "POST"), limit)
        headers = [
            (b"content-type", content_type.encode()),
            (b"content-length", str(len(body)).encode()),
            (b"connection", b"close"),
            *((name.lower().encode(), value.encode()) for name, value in more.items()),
        ]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})


def _daphne_target(request) -> tuple[str, str]:
    """(method, path) of a daphne request whose headers are in (its body may not be)."""
    channel = request.channel
    method = getattr(channel, "_command", b"") or b""
    raw_path = getattr(channel, "_path", b"") or b""
    return method.decode("latin-1"), raw_path.decode("latin-1").split("?", 1)[0]


def _daphne_limit(request) -> int:
    """:func:`limit_for` of a daphne request whose headers are in."""
    headers = request.requestHeaders
    authorization = (headers.getRawHeaders(b"authorization") or [b""])[0]
    cookie = b"; ".join(headers.getRawHeaders(b"cookie") or [])
    return limit_for(*_daphne_target(request), authorization, cookie)


FILE_BODY_CHUNK = 1 << 20


class FileBodyQueue(asyncio.Queue):
    """daphne's input queue for a request whose body daphne kept in a temporary file.

    daphne puts the whole body into its (unbounded) queue in one go before the application reads
    any of it: a body of N bytes costs N bytes of memory. This queue instead reads the file a
    chunk (:data:`FILE_BODY_CHUNK`) at a time as the application asks, then answers with what
    daphne puts later (the disconnect). daphne's own body messages are dropped (it is handed an
    empty body to send: see :func:`install_daphne_body_limit`)."""

    def __init__(self, content, chunk: int = FILE_BODY_CHUNK) -> None:
        super().__init__()
        self._content = content
        self._chunk = chunk
        self._size = content.seek(0, io.SEEK_END)
        content.seek(0)
        self._body_done = False

    def put_nowait(self, item) -> None:
        if item.get("type") == "http.request":
            return  # daphne's copy of the body: empty, the body is read from the file instead
        super().put_nowait(item)

    async def get(self):
        if self._body_done:
            return await super().get()
        chunk = self._content.read(self._chunk)
        more = bool(chunk) and self._content.tell() < self._size
        if not more:
            self._body_done = True
            self._content.close()
        return {"type": "http.request", "body": chunk, "more_body": more}


def _install_daphne_file_bodies(Server) -> None:  # noqa: N803 (daphne's class)
    create = Server.create_application

    def create_application(self, protocol, scope):
        content = getattr(protocol, "content", None)
        if scope.get("type") != "http" or content is None or isinstance(content, io.BytesIO):
            return create(self, protocol, scope)  # small bodies (Twisted keeps them in memory)
        # daphne's Server.create_application (4.2), with the queue above: daphne's own loop then
        # sends the empty body it is left with, which the queue drops
        queue = FileBodyQueue(content)
        protocol.content = io.BytesIO()
        scope.setdefault("asgi", {"version": "3.0"})
        instance = self.application(scope=scope, receive=queue.get, send=partial(self.handle_reply, protocol))
        if protocol not in self.connections:
            return None
        self.connections[protocol]["application_instance"] = asyncio.ensure_future(
            instance, loop=asyncio.get_event_loop()
        )
        return queue

    Server.create_application = create_application


def install_daphne_body_limit() -> bool:
    """Under daphne, refuse at the HTTP layer: daphne (Twisted) collects the whole body in a
    temporary file before it calls the ASGI application, so :class:`BodyLimitASGI` would only see
    it afterwards. Patched here: a declared length over the limit is answered 413 as soon as the
    headers are in, a body is counted as it arrives and the connection closed at the limit, and
    the application is never called for a refused request. A body daphne kept in a temporary
    file reaches the application a chunk at a time (:class:`FileBodyQueue`): the server's memory
    does not grow with the body. Returns False when daphne is absent."""
    try:
        from daphne.http_protocol import WebRequest
        from daphne.server import Server
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
        method, path = _daphne_target(request)
        content_type, body, more = refusal(path, method, _daphne_limit(request))
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
        if length is not None and length > _daphne_limit(self):
            refuse(self)
            self.content = io.BytesIO()  # stays empty: nothing more is kept
            return
        got_length(self, length)

    def limited_content_chunk(self, data):
        if getattr(self, "_workbench_refused", False):
            return
        self._workbench_received = getattr(self, "_workbench_received", 0) + len(data)
        if self._workbench_received > _daphne_limit(self):
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
    _install_daphne_file_bodies(Server)
    return True


class BodyLimitMiddleware(MiddlewareMixin):
    """The same refusal inside Django (WSGI servers, the test client): by the declared length."""

    def process_request(self, request):
        declared = declared_length(request.META.get("CONTENT_LENGTH"))
        if declared is not None and declared > request_limit(request):
            content_type, body, more = refusal(request.path, request.method or "POST", request_limit(request))
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
            self.request.body_too_large = True  # type: ignore[attr-defined]  # a marker read with getattr
        raise StopUpload(connection_reset=True)

    def receive_data_chunk(self, raw_data, start):
        self.received += len(raw_data)
        request = self.request
        limit = body_limit() if request is None else request_limit(request)
        if self.received > limit:
            self._refuse()
        return raw_data

    def file_complete(self, file_size):
        return None


# import jobs keep their bundles as var/imports/<job id>.json, ids made by new_id("imp")
IMPORT_JOB_FILE_PREFIX = "imp_"


def upload_ttl() -> float:
    return float(getattr(settings, "WORKBENCH_IMPORT_UPLOAD_TTL_SECONDS", 3600))


def purge_stale_uploads(directory: Path, *, now: float | None = None) -> int:
    """Delete waiting uploads (and bodies a request left half-copied, ``*.part``: see
    runs/web/spool.py) older than the TTL; returns how many went. An import job's bundle
    (``imp_*.json``) is not an upload waiting for a confirmation: its job removes it when it ends,
    however long it waited in the queue."""
    cutoff = (time.time() if now is None else now) - upload_ttl()
    removed = 0
    for path in [*directory.glob("*.json"), *directory.glob("*.part")]:
        if path.name.startswith(IMPORT_JOB_FILE_PREFIX):
            continue
        try:
            if path.stat().st_mtime < cutoff:
                path.unlink()
                removed += 1
        except FileNotFoundError:
            continue
    return removed
