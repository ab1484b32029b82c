"""The MCP endpoint is one object per process, but event loops come and go (each test gets its own;
a server can be restarted in-process). A session manager started on a loop that was then closed
must not be taken for a running one: the next request on a new loop starts a fresh manager."""

from __future__ import annotations

import asyncio

import pytest

from runs.mcp.asgi import McpEndpoint


def _scope() -> dict:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/api/mcp",
        "raw_path": b"/api/mcp",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"content-type", b"application/json"),
            (b"accept", b"application/json, text/event-stream"),
        ],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }


async def _ping(endpoint: McpEndpoint) -> int:
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'
    messages = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict] = []

    async def receive():
        if messages:
            return messages.pop()
        await asyncio.sleep(3600)

    async def send(message):
        sent.append(message)

    await asyncio.wait_for(endpoint(_scope(), receive, send), timeout=30)
    return next(m for m in sent if m["type"] == "http.response.start")["status"]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("stop_first", [False, True], ids=["left running", "stopped"])
def test_a_request_on_a_new_loop_after_the_old_one_closed_is_served(stop_first):
    endpoint = McpEndpoint()
    endpoint._build()
    for _ in range(3):  # loop after loop, none of them stopping the manager first
        loop = asyncio.new_event_loop()
        try:
            status = loop.run_until_complete(_ping(endpoint))
            if stop_first:  # a lifespan shutdown, or daphne's reactor hook
                loop.run_until_complete(endpoint.stop())
        finally:
            loop.close()
        assert status < 500, status
