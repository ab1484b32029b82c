"""A loopback webhook receiver: records each request's raw body and headers and the moment it
arrived, and answers what the test says (status, headers, a delay before answering)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Hit:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float  # time.time() when the request was read

    @property
    def json(self) -> dict:
        return json.loads(self.body)


@dataclass
class Answer:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b"ok"
    delay: float = 0.0  # seconds to wait before answering (a slow receiver)


class Receiver:
    """``with Receiver() as rx: rx.url`` -> http://127.0.0.1:<port>/hook; ``rx.hits``."""

    def __init__(self, answer: Callable[[Hit], Answer] | None = None, path: str = "/hook") -> None:
        self.answer = answer or (lambda hit: Answer())
        self.hits: list[Hit] = []
        self.path = path
        self.arrived = threading.Condition()
        outer = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                hit = Hit(
                    self.path,
                    {k.lower(): v for k, v in self.headers.items()},
                    self.rfile.read(length),
                    time.time(),
                )
                with outer.arrived:
                    outer.hits.append(hit)
                    outer.arrived.notify_all()
                reply = outer.answer(hit)
                if reply.delay:
                    time.sleep(reply.delay)
                try:
                    self.send_response(reply.status)
                    for key, value in reply.headers.items():
                        self.send_header(key, value)
                    self.send_header("content-length", str(len(reply.body)))
                    self.end_headers()
                    self.wfile.write(reply.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.path}"

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Hit]:
        deadline = time.time() + timeout
        with self.arrived:
            while len(self.hits) < count and time.time() < deadline:
                self.arrived.wait(timeout=max(0.01, deadline - time.time()))
            return list(self.hits)

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
