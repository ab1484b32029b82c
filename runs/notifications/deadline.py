"""A hard deadline on one delivery attempt: total wall time, not only the time between bytes.

httpx's timeouts bound each connect, read and write; a receiver that trickles one byte every few
seconds never trips them. The attempt's thread sets its deadline (:func:`deadline`), and every
connect, read and write on a connection of :class:`DeadlineBackend` waits at most the time left
(looked up in the thread doing it, so a kept-alive connection serves the next attempt's own
deadline); past it, the operation raises httpcore's timeout at once. Only the name lookup before
the connection is not bounded here (the sender stops waiting for such an attempt a moment after
its deadline, see ``runs.notifications.delivery``).

Pure Python on httpcore (no Django).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpcore2

_local = threading.local()


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Every network operation of this thread inside the block ends ``seconds`` from now at the latest."""
    previous = getattr(_local, "at", None)
    _local.at = time.monotonic() + seconds
    try:
        yield
    finally:
        _local.at = previous


def passed() -> bool:
    """Whether this thread's deadline (if any) has passed."""
    at = getattr(_local, "at", None)
    return at is not None and time.monotonic() >= at


def _left(timeout: float | None, exc: type[Exception]) -> float | None:
    at = getattr(_local, "at", None)
    if at is None:
        return timeout
    left = at - time.monotonic()
    if left <= 0:
        raise exc("the attempt's deadline has passed")
    return left if timeout is None else min(timeout, left)


class DeadlineStream(httpcore2.NetworkStream):
    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout, httpcore2.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout, httpcore2.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> DeadlineStream:
        inner = self._inner.start_tls(ssl_context, server_hostname, _left(timeout, httpcore2.ConnectTimeout))
        return DeadlineStream(inner)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class DeadlineBackend(httpcore2.NetworkBackend):
    """httpcore's sync backend, every operation bounded by the calling thread's deadline."""

    def __init__(self, inner: httpcore2.NetworkBackend | None = None) -> None:
        self.inner = inner or httpcore2.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.NetworkStream:
        stream = self.inner.connect_tcp(
            host,
            port,
            timeout=_left(timeout, httpcore2.ConnectTimeout),
            local_address=local_address,
            socket_options=socket_options,
        )
        return DeadlineStream(stream)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.NetworkStream:  # pragma: no cover - webhooks are http(s) URLs
        raise httpcore2.ConnectError("unix sockets are not webhook endpoints")

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)
