"""A tiny threaded HTTP server on 127.0.0.1 for wire-protocol fakes (JSON and SSE)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    status: int = 200
    body: dict | None = None
    headers: dict[str, str] = field(default_factory=dict)
    stream: Iterator[bytes] | None = None  # SSE: yields already-framed chunks
    # Misbehaviours: wait before the first byte; a raw body with its own content type; the stream
    # sent with chunked transfer encoding, and cut in the middle of a chunk (no final chunk).
    delay: float = 0.0
    raw: bytes | None = None
    content_type: str | None = None
    chunked: bool = False
    cut_chunked: bool = False


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    json: dict | None
    at: float = field(default_factory=time.monotonic)  # when it reached the server
    raw: bytes = b""  # the body as sent (a form-encoded one has no json)


Handler = Callable[[Received], Reply]


class LoopbackServer:
    """``with LoopbackServer(handler) as server: server.url`` -> http://127.0.0.1:<port>."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.received: list[Received] = []
        outer = self

        class _RequestHandler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:  # quiet
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                req = Received(
                    self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body, raw=raw
                )
                outer.received.append(req)
                reply = outer.handler(req)
                if reply.delay:
                    time.sleep(reply.delay)
                try:
                    self._reply(reply)
                except (BrokenPipeError, ConnectionResetError):  # the client went away (Stop)
                    self.close_connection = True

            def _reply(self, reply: Reply) -> None:
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                if reply.stream is not None:
                    self.send_header("content-type", reply.content_type or "text/event-stream")
                    self.send_header("cache-control", "no-cache")
                    if reply.chunked:
                        self.send_header("transfer-encoding", "chunked")
                    else:
                        self.send_header("connection", "close")
                    self.end_headers()
                    self.close_connection = True
                    for chunk in reply.stream:
                        if reply.chunked:
                            chunk = b"%x\r\n%s\r\n" % (len(chunk), chunk)
                        self.wfile.write(chunk)
                        self.wfile.flush()
                    if reply.cut_chunked:  # announce a chunk, send half of it, close
                        self.wfile.write(b'40\r\ndata: {"type": "cont')
                        self.wfile.flush()
                    elif reply.chunked:
                        self.wfile.write(b"0\r\n\r\n")
                        self.wfile.flush()
                    return
                if reply.raw is not None:
                    self.send_header("content-type", reply.content_type or "text/html; charset=utf-8")
                    self.send_header("content-length", str(len(reply.raw)))
                    self.end_headers()
                    self.wfile.write(reply.raw)
                    return
                data = json.dumps(reply.body if reply.body is not None else {}).encode()
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_POST = _handle
            do_GET = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _RequestHandler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="loopback-fake", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> LoopbackServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def sse(event: str | None, data: dict | str) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


HTML_PAGE = (
    b"<!DOCTYPE html>\n<html><head><title>502 Bad Gateway</title></head>"
    b"<body><h1>Bad Gateway</h1><script>alert('x')</script><p>"
    + b"The proxy waited. " * 40
    + b"upstream sent nothing</p></body></html>\n"
)


def misbehave(reply: Reply, scripted: dict | None) -> Reply:
    """``reply`` changed the way a scripted ``{"misbehave": ...}`` asks (shared by both fakes):

    - ``slow``: nothing for ``delay`` seconds (default 3), then the answer;
    - ``html``: a 200 with an HTML page instead of a stream;
    - ``chunked``: the stream with chunked transfer encoding (a well-formed body);
    - ``cut_chunked``: the same, cut in the middle of a chunk (no final chunk).
    Cutting the stream itself (``cut``) and garbage events (``garbage``) are the fakes' own."""
    kind = (scripted or {}).get("misbehave")
    if kind == "slow":
        reply.delay = float(scripted.get("delay", 3.0))
    elif kind == "html":
        return Reply(status=200, raw=HTML_PAGE, content_type="text/html; charset=utf-8")
    elif kind in ("chunked", "cut_chunked"):
        reply.chunked = True
        reply.cut_chunked = kind == "cut_chunked"
    return reply


CUT = ("cut", "cut_chunked")


def cut_or_garble(
    frames: Iterator[bytes], scripted: dict | None, *, keep: int, garbage: bytes
) -> Iterator[bytes]:
    """The first ``keep`` SSE frames of a stream, then: nothing (``cut``, ``cut_chunked``: the
    stream closes without its final event) or ``garbage`` (an event that is not JSON)."""
    kind = (scripted or {}).get("misbehave")
    if kind not in (*CUT, "garbage"):
        yield from frames
        return
    for i, frame in enumerate(frames):
        if i >= keep:
            break
        yield frame
    if kind == "garbage":
        yield garbage


def after_stop(received: list[Received], moment: float) -> list[Received]:
    """The requests that reached the server after ``moment`` (a ``time.monotonic()``)."""
    return [r for r in received if r.at > moment]


class ScriptedFake:
    """What both provider fakes share: a loopback server, the requests it saw, and a script of
    replies (errors, delays, tool calls...) consumed one per request before the default answer."""

    def __init__(self, *, api_key: str | None, min_cache_tokens: int = 0) -> None:
        self.api_key = api_key
        self.min_cache_tokens = min_cache_tokens
        self.requests: list[dict] = []
        self._script: list[dict] = []
        self._lock = threading.Lock()
        self.chunk_delay = 0.0
        self.server = LoopbackServer(self.handle)

    def handle(self, req: Received) -> Reply:
        raise NotImplementedError

    @property
    def url(self) -> str:
        return self.server.url

    def __enter__(self):
        self.server.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.stop()

    def script(self, *replies: dict) -> None:
        with self._lock:
            self._script.extend(replies)
