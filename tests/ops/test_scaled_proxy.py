"""The proxy of scripts/scaled.py: connections spread over the web processes (fewest open first),
a process that refuses connections is skipped, none left answers 503; bytes pass both ways."""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

from scaled import Proxy  # noqa: E402


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def backend(name: bytes):
    async def handle(reader, writer):
        data = await reader.read(100)
        writer.write(name + b":" + data)
        await writer.drain()
        await reader.read()  # hold the connection until the client closes
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def ask(port: int, payload: bytes):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(payload)
    await writer.drain()
    reply = await reader.read(100)
    return reply, writer


@pytest.mark.asyncio
async def test_spreads_skips_dead_and_answers_503():
    a, port_a = await backend(b"a")
    b, port_b = await backend(b"b")
    dead = closed_port()
    proxy = Proxy([port_a, dead, port_b])
    front = await asyncio.start_server(proxy.handle, "127.0.0.1", 0)
    front_port = front.sockets[0].getsockname()[1]
    try:
        held = [await ask(front_port, f"hello {i}".encode()) for i in range(4)]
        assert all(reply.endswith(f":hello {i}".encode()) for i, (reply, _) in enumerate(held))
        assert sorted(reply.split(b":")[0] for reply, _ in held) == [b"a", b"a", b"b", b"b"]
        assert proxy.open[dead] == 0 and proxy.open[port_a] == 2 and proxy.open[port_b] == 2
        for _, writer in held:
            writer.close()

        only_dead = Proxy([dead])
        front2 = await asyncio.start_server(only_dead.handle, "127.0.0.1", 0)
        reply, writer = await ask(front2.sockets[0].getsockname()[1], b"GET / HTTP/1.1\r\n\r\n")
        assert reply.startswith(b"HTTP/1.1 503")
        writer.close()
        front2.close()
    finally:
        front.close()
        a.close()
        b.close()
