"""runs.live.transport.send_now: a frame goes to the kernel at once when the Twisted TCP transport holds
nothing; anything else takes Twisted's buffered path (transport.write), in order. A real
twisted.internet.tcp.Connection on a socket pair, with a reactor stand-in that records what Twisted
registers; the path under a real daphne is in tests/live/test_hub_broadcast_daphne.py."""

from __future__ import annotations

import socket

import pytest
from twisted.internet.tcp import Connection

from runs.live.transport import backlog, send_now


class Reactor:
    def __init__(self) -> None:
        self.writers: list = []

    def addWriter(self, writer) -> None:  # noqa: N802  (Twisted's names; a reactor registers once)
        if writer not in self.writers:
            self.writers.append(writer)

    def removeWriter(self, writer) -> None:  # noqa: N802
        if writer in self.writers:
            self.writers.remove(writer)


@pytest.fixture
def pair():
    ours, theirs = socket.socketpair()
    reactor = Reactor()
    transport = Connection(ours, protocol=None, reactor=reactor)  # type: ignore[arg-type]
    transport.connected = 1
    theirs.setblocking(False)
    yield transport, theirs, reactor
    ours.close()
    theirs.close()


def read_all(sock: socket.socket) -> bytes:
    chunks = []
    while True:
        try:
            chunk = sock.recv(1 << 20)
        except BlockingIOError:
            return b"".join(chunks)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def test_an_empty_transport_sends_at_once_without_registering_a_writer(pair):
    transport, theirs, reactor = pair
    assert send_now(transport, b"frame-1") is True
    assert send_now(transport, b"frame-2") is True
    assert read_all(theirs) == b"frame-1frame-2"
    assert reactor.writers == [] and backlog(transport) == 0


def test_data_already_buffered_goes_first(pair):
    transport, theirs, reactor = pair
    transport.write(b"earlier")  # e.g. daphne's own send of a hello, not flushed yet
    assert send_now(transport, b"later") is False
    assert reactor.writers == [transport] and read_all(theirs) == b""
    transport.doWrite()  # the reactor's turn
    assert read_all(theirs) == b"earlierlater"
    assert reactor.writers == [] and backlog(transport) == 0


def test_what_the_kernel_does_not_take_is_left_to_the_reactor(pair):
    transport, theirs, reactor = pair
    transport.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    big = bytes(range(256)) * 8192  # 2 MB: more than the socket buffers hold
    assert send_now(transport, big) is False
    assert reactor.writers == [transport] and backlog(transport) > 0
    assert send_now(transport, b"next") is False  # behind the rest, never before it
    received = b""
    for _ in range(10_000):
        received += read_all(theirs)
        if not backlog(transport):
            break
        transport.doWrite()
    received += read_all(theirs)
    assert received == big + b"next"


def test_a_closing_or_foreign_transport_takes_the_normal_path(pair):
    transport, theirs, reactor = pair
    transport.disconnecting = 1
    assert send_now(transport, b"x") is False
    assert transport._tempDataLen == 1

    class Fake:
        def __init__(self) -> None:
            self.written: list[bytes] = []

        def write(self, data: bytes) -> None:
            self.written.append(data)

    fake = Fake()
    assert send_now(fake, b"y") is False
    assert fake.written == [b"y"]


def test_a_send_error_is_left_to_twisted(pair):
    transport, theirs, reactor = pair
    theirs.close()
    transport.socket.shutdown(socket.SHUT_WR)
    assert send_now(transport, b"z") is False  # EPIPE: buffered; Twisted's doWrite loses the connection
    assert reactor.writers == [transport]
    assert transport.doWrite() is not None  # CONNECTION_LOST, as Twisted reports it


def test_a_twisted_without_the_buffer_attributes_falls_back_to_the_public_path(pair, monkeypatch):
    """The buffer attributes are Twisted's internals: if a release renames one, frames still go
    out (through transport.write, in order) and nothing raises."""
    transport, theirs, reactor = pair
    monkeypatch.delattr(transport, "_tempDataLen")
    assert backlog(transport) == 0
    written: list[bytes] = []
    monkeypatch.setattr(transport, "write", written.append, raising=False)
    assert send_now(transport, b"frame") is False
    assert written == [b"frame"] and read_all(theirs) == b""
