"""workbench_sdk.traced: the recorded events, through a list sink (and the real SDKs, when
installed, against a loopback fake of their APIs)."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from workbench_sdk.client import WorkbenchClient
from workbench_sdk.events import RecordedAnswer
from workbench_sdk.traced import ClientSink, Tracer, traced_anthropic, traced_openai, usage_of

HAIKU = "claude-haiku-4-5"
GPT = "gpt-5-mini"
PRICES = {
    HAIKU: {"input": 1, "output": 5, "cache_read": 0.1, "cache_write": 1.25},
    ("openai", GPT): {"input": "0.25", "output": "2", "cache_read": "0.025"},
}
MESSAGE = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": HAIKU,
    "content": [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "tu_1", "name": "get_weather", "input": {"city": "Oslo"}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {
        "input_tokens": 100,
        "output_tokens": 20,
        "cache_read_input_tokens": 50,
        "cache_creation_input_tokens": 0,
    },
}
COMPLETION = {
    "id": "chatcmpl_1",
    "object": "chat.completion",
    "created": 1700000000,
    "model": GPT,
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello"}, "finish_reason": "stop"}],
    "usage": {
        "prompt_tokens": 40,
        "completion_tokens": 10,
        "total_tokens": 50,
        "prompt_tokens_details": {"cached_tokens": 8},
        "completion_tokens_details": {"reasoning_tokens": 4},
    },
}


class ListSink:
    run_id = "run_host"

    def __init__(self) -> None:
        self.batches: list[list[dict]] = []

    def record(self, events: list[dict]) -> None:
        self.batches.append(events)

    @property
    def events(self) -> list[dict]:
        return [e for batch in self.batches for e in batch]


class Fake(BaseHTTPRequestHandler):
    """Anthropic ``POST /v1/messages`` and OpenAI ``POST /v1/chat/completions``, JSON only."""

    received: list[dict] = []

    def do_POST(self):  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Fake.received.append(body)
        answer = MESSAGE if self.path.endswith("/messages") else COMPLETION
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_url():
    Fake.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Fake)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_usage_conventions():
    assert usage_of("anthropic", MESSAGE["usage"]) == {
        "inputTokens": 150,
        "outputTokens": 20,
        "totalTokens": 170,
        "cachedInputTokens": 50,
    }
    assert usage_of("openai", COMPLETION["usage"]) == {
        "inputTokens": 40,
        "outputTokens": 10,
        "totalTokens": 50,
        "cachedInputTokens": 8,
        "reasoningTokens": 4,
    }
    assert usage_of("openai", None) is None


def test_one_call_by_hand_with_dict_prices():
    sink = ListSink()
    tracer = Tracer(sink, step_id="parse", prices=PRICES)
    call = tracer.begin("anthropic", HAIKU, {"model": HAIKU, "messages": [], "extra_headers": {"x-key": "s"}})
    call.chunk({"type": "message_start"})
    call.finish(MESSAGE, usage=MESSAGE["usage"], tool_calls=[("get_weather", {"city": "Oslo"})])
    call.finish(MESSAGE, usage=None, tool_calls=[])  # a second end records nothing
    request, chunk, response, tool = sink.events
    assert len(sink.batches) == 2  # the request when the call starts, the rest in one append
    assert request["payload"] == {"model": HAIKU, "messages": []}  # transport settings stay out
    assert {e["correlationId"] for e in sink.events} == {call.correlation_id}
    assert {e["stepId"] for e in sink.events} == {"parse"}
    assert chunk["direction"] == "stream_chunk" and response["direction"] == "response"
    # 100 uncached x 1 + 20 x 5 + 50 x 0.1, per million
    assert response["cost"] == {"amount": 0.000205, "currency": "USD"}
    assert tool["type"] == "tool_call" and tool["name"] == "get_weather" and tool["args"] == {"city": "Oslo"}


def test_a_failed_call_records_an_error():
    sink = ListSink()
    call = Tracer(sink).begin("openai", GPT, {"model": GPT})
    call.chunk({"object": "chat.completion.chunk"})
    call.fail(TimeoutError("slow"))
    assert [e.get("direction") or e["type"] for e in sink.events] == ["request", "stream_chunk", "error"]
    assert sink.events[-1]["message"] == "TimeoutError: slow"


def test_the_client_sink_appends_over_rest():
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"appended": 1})

    with WorkbenchClient("http://wb.test", "t", transport=httpx.MockTransport(handler)) as wb:
        Tracer(ClientSink(wb, "run_9")).tool("search", args={"q": "x"}, result=["hit"])
    assert seen[0].url.path == "/api/runs/run_9/events"
    (event,) = json.loads(seen[0].content)["events"]
    assert event["type"] == "tool_call" and event["runId"] == "run_9" and event["result"] == ["hit"]


def test_anthropic_recorded_and_replayed(fake_url):
    anthropic = pytest.importorskip("anthropic")
    sink = ListSink()
    claude = traced_anthropic(
        anthropic.Anthropic(api_key="k", base_url=fake_url), Tracer(sink, prices=PRICES)
    )
    message = claude.messages.create(model=HAIKU, max_tokens=50, messages=[{"role": "user", "content": "Hi"}])
    assert message.content[0].text == "Let me look." and len(Fake.received) == 1
    kinds = [e.get("direction") or e["type"] for e in sink.events]
    assert kinds == ["request", "response", "tool_call"]
    assert sink.events[1]["usage"]["inputTokens"] == 150 and sink.events[1]["cost"]["amount"] > 0

    replaying = Tracer(ListSink(), replay=lambda provider, model, request: RecordedAnswer(MESSAGE))
    again = traced_anthropic(anthropic.Anthropic(api_key="k", base_url=fake_url), replaying)
    message = again.messages.create(model=HAIKU, max_tokens=50, messages=[{"role": "user", "content": "Hi"}])
    assert message.content[1].input == {"city": "Oslo"} and len(Fake.received) == 1  # not sent
    assert replaying.sink.events[1]["summary"] == "replayed"
    # a streaming call gets the SDK's stream events, rebuilt from the recorded message
    stream = again.messages.create(model=HAIKU, max_tokens=50, messages=[], stream=True)
    assert [event.type for event in stream][0] == "message_start" and len(Fake.received) == 1


def test_async_openai_through_a_worker_thread(fake_url):
    openai = pytest.importorskip("openai")
    sink = ListSink()
    gpt = traced_openai(
        openai.AsyncOpenAI(api_key="k", base_url=fake_url + "/v1"), Tracer(sink, prices=PRICES)
    )

    async def ask():
        return await gpt.chat.completions.create(model=GPT, messages=[{"role": "user", "content": "Hi"}])

    completion = asyncio.run(ask())
    assert completion.choices[0].message.content == "Hello"
    response = sink.events[1]
    assert response["usage"]["reasoningTokens"] == 4
    # 32 uncached x 0.25 + 10 x 2 + 8 x 0.025, per million
    assert response["cost"] == {"amount": 0.0000282, "currency": "USD"}
