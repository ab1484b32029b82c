"""Writing a prepared websocket frame to a Twisted TCP transport in one step.

Twisted writes in two steps: `transport.write` appends to the transport's buffer and registers it
as a writer with the reactor (an `epoll_ctl`); on the next loop turn the reactor calls `doWrite`,
which sends and, the buffer empty, unregisters the writer (a second `epoll_ctl`). For a frame of a
few kilobytes to a socket whose buffers are empty that is two system calls, a ready-queue handle
and Twisted's bookkeeping around one `send`. `send_now` does what `doWrite` would do at once
(`tcp.Connection.writeSomeData`: one `socket.send`) when nothing is buffered, and hands anything
else to `transport.write`, the normal path: a transport of another kind (TLS, a test's fake), data
already waiting (it must go first), a closing connection, an error (Twisted's path then finds it
and closes the connection as it always does), or the part of the frame the kernel did not take.
"""

from __future__ import annotations

try:
    from twisted.internet.tcp import Connection as _TCPConnection
except ImportError:  # pragma: no cover  (daphne, hence Twisted, is a dependency)
    _TCPConnection = None  # type: ignore[assignment,misc]


# Twisted has no public API for what a transport still buffers: `FileDescriptor` keeps it in
# `dataBuffer`, `offset` and `_tempDataLen`, and `_writeDisconnected` says a half-close happened.
# They are read here and nowhere else, each with a fallback: a transport without them (another
# kind, or a Twisted release that renamed them) reports nothing buffered to `backlog` and always
# takes the public path, `transport.write`, in `send_now`. tests/live/test_transport_send_now.py
# runs against the installed Twisted, so a rename shows there as a lost fast path, not a crash.


def _buffered(transport) -> int | None:
    """Bytes Twisted still holds for `transport`, or None when it does not keep them where this
    module reads them."""
    try:
        return len(transport.dataBuffer) - transport.offset + transport._tempDataLen
    except (AttributeError, TypeError):
        return None


def backlog(transport) -> int:
    """Bytes the transport still holds (0: everything written went to the kernel, or unknown)."""
    return _buffered(transport) or 0


def can_send_now(transport) -> bool:
    """A plain TCP connection, open, with nothing buffered: a send now keeps the frames in order."""
    if _TCPConnection is None or not isinstance(transport, _TCPConnection):
        return False
    if transport.TLS or not transport.connected or transport.disconnecting:
        return False
    if getattr(transport, "_writeDisconnected", True):  # unknown: take the public path
        return False
    return _buffered(transport) == 0


def send_now(transport, data: bytes) -> bool:
    """Write `data` to `transport`; True when it went to the kernel at once, whole (nothing left
    for the reactor), False when (some of) it took the normal path, `transport.write`."""
    if not can_send_now(transport):
        transport.write(data)
        return False
    try:
        sent = transport.socket.send(data)
    except OSError:
        # would block: the reactor sends it when the socket is writable; anything else: Twisted's own
        # write path meets the same error and loses the connection the usual way
        transport.write(data)
        return False
    if sent < len(data):
        transport.write(data[sent:])
        return False
    return True
