"""What the transport of a provider call watches: the Stop button, and the body it received.

:class:`Stop` is a Stop button's reach into a call that is under way inside an SDK. Once it is
set, no request leaves (the SDK's retries included: the transport refuses to send), and every
socket of the call is shut down, so a read blocked before the first byte returns at once
instead of waiting for the timeout. The call then raises :class:`StopRequested`, which is a
``BaseException``: the SDKs retry on any ``Exception``, and a stopped call must not be retried.

:class:`BodyTap` keeps the first and the last bytes of the response body: the first give a short
excerpt when the body is not the event stream it should be (an HTML page from a proxy), the
last say whether an OpenAI stream ended with ``data: [DONE]``.

Pure Python (no Django).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpcore2
import httpx2

EXCERPT_CHARS = 160


class StopRequested(BaseException):
    """Raised inside the SDK once Stop was pressed (not an ``Exception``: the SDKs retry those)."""


class Stop:
    """Set once, from any thread; the call's transport checks it and its sockets obey it."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._streams: list[httpcore2.NetworkStream] = []

    def is_set(self) -> bool:
        return self._event.is_set()

    def set(self) -> None:
        with self._lock:
            self._event.set()
            streams = list(self._streams)
        for stream in streams:
            _shutdown(stream)

    def check(self) -> None:
        if self._event.is_set():
            raise StopRequested()

    def track(self, stream: httpcore2.NetworkStream) -> None:
        """Shut ``stream`` down when Stop is pressed (at once if it already was)."""
        with self._lock:
            self._streams.append(stream)
            stopped = self._event.is_set()
        if stopped:
            _shutdown(stream)
            raise StopRequested()


def _shutdown(stream: httpcore2.NetworkStream) -> None:
    """Shut the socket down (a blocked ``recv`` in another thread returns; closing would not wake it)."""
    sock = stream.get_extra_info("socket")
    if sock is None:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed
        pass


class StoppableStream(httpcore2.NetworkStream):
    """A network stream that raises StopRequested instead of reading or writing after Stop."""

    def __init__(self, inner: httpcore2.NetworkStream, stop: Stop) -> None:
        self._inner = inner
        self._stop = stop
        stop.track(inner)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self._stop.check()
        try:
            data = self._inner.read(max_bytes, timeout)
        except Exception:
            self._stop.check()  # the read failed because the socket was shut down
            raise
        self._stop.check()
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stop.check()
        try:
            self._inner.write(buffer, timeout)
        except Exception:
            self._stop.check()
            raise

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> StoppableStream:
        return StoppableStream(self._inner.start_tls(ssl_context, server_hostname, timeout), self._stop)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class BodyTap:
    """The status, content type and first and last bytes of the latest response of a call."""

    HEAD = 600
    TAIL = 200

    def __init__(self) -> None:
        self.begin(None)

    def begin(self, response: httpx2.Response | None) -> None:
        self.status = response.status_code if response is not None else None
        headers = response.headers if response is not None else {}
        self.content_type = headers.get("content-type", "")
        self.encoding = headers.get("content-encoding", "").strip().lower()
        self.head = bytearray()
        self.tail = b""

    def feed(self, chunk: bytes) -> None:
        if len(self.head) < self.HEAD:
            self.head += chunk[: self.HEAD - len(self.head)]
        self.tail = (self.tail + chunk)[-self.TAIL :]

    @property
    def readable(self) -> bool:
        """False when the bytes seen are compressed (then nothing is concluded from them)."""
        return self.encoding in ("", "identity")

    def ended_with_done(self) -> bool | None:
        """Did the body end with ``data: [DONE]``? None when that cannot be told."""
        if not self.readable:
            return None
        return self.tail.rstrip().endswith(b"[DONE]")

    def head_excerpt(self) -> str:
        return excerpt(bytes(self.head)) if self.readable else ""

    def tail_excerpt(self) -> str:
        return excerpt(self.tail.strip().rsplit(b"\n\n", 1)[-1]) if self.readable else ""


class TappedStream(httpx2.SyncByteStream):
    def __init__(self, inner: httpx2.SyncByteStream, tap: BodyTap) -> None:
        self._inner = inner
        self._tap = tap

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._inner:
            self._tap.feed(chunk)
            yield chunk

    def close(self) -> None:
        self._inner.close()


def excerpt(data: bytes, limit: int = EXCERPT_CHARS) -> str:
    """A short, single-line excerpt of a foreign body: whitespace collapsed, control characters
    written as escapes, cut at ``limit`` characters (pages escape it again when they show it)."""
    text = " ".join(data.decode("utf-8", "replace").split())
    text = "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}" for ch in text)
    if len(text) > limit:
        text = text[: limit - 1] + "…"
    return text
