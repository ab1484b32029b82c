"""A tiny threaded HTTP server on 127.0.0.1 for wire-protocol fakes (JSON and SSE)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    status: int = 200
    body: dict | None = None
    headers: dict[str, str] = field(default_factory=dict)
    stream: Iterator[bytes] | None = None  # SSE: yields already-framed chunks


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]
    json: dict | None


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
                req = Received(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                outer.received.append(req)
                reply = outer.handler(req)
                self.send_response(reply.status)
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                if reply.stream is not None:
                    self.send_header("content-type", "text/event-stream")
                    self.send_header("cache-control", "no-cache")
                    self.send_header("connection", "close")
                    self.end_headers()
                    self.close_connection = True
                    try:
                        for chunk in reply.stream:
                            self.wfile.write(chunk)
                            self.wfile.flush()
                    except (BrokenPipeError, ConnectionResetError):
                        pass
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
