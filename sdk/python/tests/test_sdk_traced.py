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
    call.finish(MESSAGE, usage=MESSAGE["usage"])
    call.finish(MESSAGE, usage=None)  # a second end records nothing
    request, chunk, response = sink.events
    assert len(sink.batches) == 2  # the request when the call starts, the rest in one append
    assert request["payload"] == {"model": HAIKU, "messages": []}  # transport settings stay out
    assert {e["correlationId"] for e in sink.events} == {call.correlation_id}
    assert {e["stepId"] for e in sink.events} == {"parse"}
    assert chunk["direction"] == "stream_chunk" and response["direction"] == "response"
    # 100 uncached x 1 + 20 x 5 + 50 x 0.1, per million
    assert response["cost"] == {"amount": 0.000205, "currency": "USD"}
    # the tool the model asked for is part of the response, not a tool_call: nothing ran it
    assert response["payload"]["content"][1] == MESSAGE["content"][1]


def test_requested_tools_are_not_tool_calls_until_one_runs():
    """A model asks for two tools; the host runs one and refuses the other: exactly one
    tool_call (name, args, result, duration, the model's call id), both requests in the response."""
    sink = ListSink()
    tracer = Tracer(sink, step_id="agent", prices=PRICES)
    two = {
        **MESSAGE,
        "content": [
            *MESSAGE["content"],
            {"type": "tool_use", "id": "tu_2", "name": "delete_files", "input": {"path": "/"}},
        ],
    }
    call = tracer.begin("anthropic", HAIKU, {"model": HAIKU, "messages": []})
    call.finish(two, usage=two["usage"])
    assert [e["type"] for e in sink.events] == ["model_io", "model_io"]
    for block in two["content"][1:]:
        if block["name"] == "delete_files":
            continue  # refused: never run, so never a tool_call
        with tracer.tool_run(block) as tool:
            tool.result = {"temp": 12}
    (ran,) = [e for e in sink.events if e["type"] == "tool_call"]
    assert (ran["name"], ran["args"], ran["result"]) == ("get_weather", {"city": "Oslo"}, {"temp": 12})
    assert ran["correlationId"] == "tu_1" and ran["stepId"] == "agent"
    response = sink.events[1]
    asked = [b["id"] for b in response["payload"]["content"] if b["type"] == "tool_use"]
    assert asked == ["tu_1", "tu_2"]  # both requests stay visible in the model's response
    # a block may also decide not to run its tool: skip() records nothing
    with tracer.tool_run(two["content"][2]) as tool:
        tool.skip()
    assert len([e for e in sink.events if e["type"] == "tool_call"]) == 1


def test_one_tool_run_is_a_span_around_one_tool_call():
    sink = ListSink()
    tracer = Tracer(sink, step_id="agent")
    with tracer.tool_run(
        {"id": "call_7", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}
    ) as tool:
        assert tool.args == {"a": 1, "b": 2}
        tool.result = 3
    started, call, ended = sink.events
    assert len(sink.batches) == 1
    assert started["type"] == "span_started" and started["name"] == "execute_tool add"
    assert started["attributes"] == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": "call_7",
    }
    assert call == {**call, "type": "tool_call", "name": "add", "args": {"a": 1, "b": 2}, "result": 3}
    assert ended["spanId"] == started["spanId"] and ended["status"] == "ok" and ended["durationMs"] >= 0
    assert {e["correlationId"] for e in sink.events} == {"call_7"}
    assert {e["stepId"] for e in sink.events} == {"agent"}
    assert started["ts"] <= ended["ts"]


def test_a_tool_that_raises_is_a_run_with_an_error_and_no_result():
    sink = ListSink()
    with pytest.raises(KeyError):
        with Tracer(sink).tool_run("lookup", {"k": "x"}):
            raise KeyError("x")
    started, call, ended = sink.events
    assert call["name"] == "lookup" and call["args"] == {"k": "x"} and "result" not in call
    assert ended["status"] == "error" and ended["error"] == {"message": "KeyError: 'x'", "code": "KeyError"}
    assert call["correlationId"].startswith("tool_")  # no call id given: one of its own


def test_async_tool_run_and_a_reported_failure():
    sink = ListSink()

    async def main() -> None:
        async with Tracer(sink).tool_run(
            {"type": "function_call", "call_id": "fc_1", "name": "ping", "arguments": "{}"}
        ) as tool:
            tool.fail("host unreachable")

    asyncio.run(main())
    _, call, ended = sink.events
    assert call["correlationId"] == "fc_1" and call["args"] == {} and "result" not in call
    assert ended["error"] == {"message": "host unreachable"}


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
    started, event, ended = json.loads(seen[0].content)["events"]
    assert event["type"] == "tool_call" and event["runId"] == "run_9" and event["result"] == ["hit"]
    assert started["type"] == "span_started" and ended["type"] == "span_ended"


def test_anthropic_recorded_and_replayed(fake_url):
    anthropic = pytest.importorskip("anthropic")
    sink = ListSink()
    claude = traced_anthropic(
        anthropic.Anthropic(api_key="k", base_url=fake_url), Tracer(sink, prices=PRICES)
    )
    message = claude.messages.create(model=HAIKU, max_tokens=50, messages=[{"role": "user", "content": "Hi"}])
    assert message.content[0].text == "Let me look." and len(Fake.received) == 1
    kinds = [e.get("direction") or e["type"] for e in sink.events]
    assert kinds == ["request", "response"]  # the tool_use asked for is in the response's payload
    assert sink.events[1]["payload"]["content"][1]["name"] == "get_weather"
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
