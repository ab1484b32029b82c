"""wb.prompt(): fetched by label, cached with a TTL, stale-while-revalidate, and a fallback to the
last version fetched when the server is down that always warns; compile() fills {{variables}}."""

from __future__ import annotations

import threading
import warnings

import httpx
import pytest

from workbench_sdk.client import WorkbenchAPIError, WorkbenchClient
from workbench_sdk.prompt_context import active_prompt
from workbench_sdk.prompts import Prompt, PromptCache, PromptFallbackWarning, prompt


def doc(version: int, body: object = "Hello {{name}}") -> dict:
    return {
        "name": "team/greet",
        "type": "text",
        "version": version,
        "labels": ["production"],
        "body": body,
        "config": {"model": "m"},
        "variables": ["name"],
    }


class Server:
    def __init__(self) -> None:
        self.version = 1
        self.down = False
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.down:
            raise httpx.ConnectError("refused")
        return httpx.Response(200, json=doc(self.version))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make(server: Server, **kw) -> tuple[PromptCache, Clock]:
    clock = Clock()
    client = WorkbenchClient("http://wb.test", "t", transport=httpx.MockTransport(server), retries=0)
    return PromptCache(client, clock=clock, **kw), clock


def test_fetch_by_label_is_cached_for_the_ttl_then_refetched():
    server = Server()
    cache, clock = make(server, background=False)
    first = prompt("team/greet", label="production", cache=cache)
    assert first.version == 1 and first.compile(name="Ann") == "Hello Ann"
    assert str(server.requests[0].url) == "http://wb.test/api/prompts/team/greet?label=production"
    server.version = 2
    clock.now += 59
    assert cache.get("team/greet", label="production").version == 1  # fresh: no request
    assert len(server.requests) == 1
    clock.now += 2
    assert cache.get("team/greet", label="production").version == 2  # the label moved: seen after the TTL


def test_stale_while_revalidate_answers_at_once_and_refreshes_in_the_background():
    server = Server()
    cache, clock = make(server)
    cache.get("team/greet", label="production")
    server.version = 2
    clock.now += 120
    assert cache.get("team/greet", label="production").version == 1  # stale, answered now
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and thread.daemon:
            thread.join(timeout=5)
    assert cache.get("team/greet", label="production").version == 2


def test_server_down_falls_back_to_the_cached_version_with_a_warning():
    server = Server()
    cache, clock = make(server, background=False)
    cache.get("team/greet", label="production")
    server.down = True
    clock.now += 61
    with pytest.warns(
        PromptFallbackWarning, match=r"cached prompt team/greet@1 \(the server cannot be reached"
    ):
        assert cache.get("team/greet", label="production").version == 1
    fresh, _ = make(server, background=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(WorkbenchAPIError):  # nothing cached: never a silent answer
            fresh.get("team/greet", label="production")


def test_compile_chat_prompts_and_record_the_version_in_context():
    p = Prompt.from_doc(
        doc(3, [{"role": "system", "content": "Be {{tone}}"}, {"role": "user", "content": "{{q}}"}])
    )
    token = active_prompt.set(None)
    try:
        assert p.compile(tone="brief", q="Why?") == [
            {"role": "system", "content": "Be brief"},
            {"role": "user", "content": "Why?"},
        ]
        assert active_prompt.get() == {"name": "team/greet", "version": 3}
        assert p.ref == "team/greet@3"
    finally:
        active_prompt.reset(token)
