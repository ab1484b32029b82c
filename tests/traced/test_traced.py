"""Traced provider clients through the real anthropic/openai SDKs against the loopback fakes."""

from __future__ import annotations

import asyncio
import json
from decimal import Decimal

import anthropic
import openai
import pytest
from workbench_sdk.traced import ClientSink, Tracer, traced_anthropic, traced_openai

from runs.engine.divergence import comparable
from runs.execution.host import Workbench
from runs.execution.tracing import SessionSink, tracer_for_session
from runs.models import Event
from runs.protocol.values import loads
from runs.providers.pricing import Price
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.openai_api import FakeOpenAI

HAIKU = "claude-haiku-4-5"
GPT = "gpt-5-mini"
PRICES = {
    ("anthropic", HAIKU): Price(
        input=Decimal("1"), output=Decimal("5"), cache_read=Decimal("0.1"), cache_write=Decimal("1.25")
    ),
    ("openai", GPT): Price(input=Decimal("0.25"), output=Decimal("2"), cache_read=Decimal("0.025")),
}
WEATHER_TOOL_A = {
    "name": "get_weather",
    "description": "Weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
WEATHER_TOOL_O = {
    "type": "function",
    "function": {
        **{k: WEATHER_TOOL_A[k] for k in ("name", "description")},
        "parameters": WEATHER_TOOL_A["input_schema"],
    },
}


@pytest.fixture
def anthropic_fake():
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
def openai_fake():
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def session(db, workspace, workflow):
    return Workbench(workspace=workspace, actor="host").start_run(workflow=workflow, run_id="run_traced")


def events(run_id: str = "run_traced") -> list[dict]:
    return [
        loads(b)
        for b in Event.objects.filter(run__workspace__slug="acme")
        .order_by("seq")
        .values_list("body", flat=True)
    ]


def one_call(evts: list[dict]) -> dict:
    corr = {e.get("correlationId") for e in evts if e["type"] in ("model_io", "tool_call", "error")}
    assert len(corr) == 1 and None not in corr  # one correlation id per call
    return {
        "request": [e for e in evts if e.get("direction") == "request"],
        "chunks": [e for e in evts if e.get("direction") == "stream_chunk"],
        "response": [e for e in evts if e.get("direction") == "response"],
        "tools": [e for e in evts if e["type"] == "tool_call"],
        "errors": [e for e in evts if e["type"] == "error"],
    }


def a_client(fake, cls=anthropic.Anthropic):
    return cls(api_key="test-anthropic-key", base_url=fake.url, max_retries=0)


def o_client(fake, cls=openai.OpenAI):
    return cls(api_key="test-openai-key", base_url=fake.url + "/v1", max_retries=0)


def test_anthropic_sync_call_with_usage_and_cost(session, anthropic_fake):
    tracer = Tracer(SessionSink(session), step_id="parse", prices=PRICES)
    claude = traced_anthropic(a_client(anthropic_fake), tracer)
    message = claude.messages.create(
        model=HAIKU, max_tokens=100, messages=[{"role": "user", "content": "Hello there"}]
    )
    assert isinstance(message, anthropic.types.Message)
    call = one_call(events())
    [req], [resp] = call["request"], call["response"]
    assert (
        req["payload"]["messages"] == [{"role": "user", "content": "Hello there"}]
        and req["stepId"] == "parse"
    )
    u = message.usage
    expected_in = u.input_tokens + (u.cache_read_input_tokens or 0) + (u.cache_creation_input_tokens or 0)
    assert resp["usage"]["inputTokens"] == expected_in and resp["usage"]["outputTokens"] == u.output_tokens
    assert resp["usage"]["totalTokens"] == expected_in + u.output_tokens
    assert resp["cost"]["currency"] == "USD" and resp["cost"]["amount"] > 0
    assert resp["payload"]["content"][0]["text"] == message.content[0].text
    assert resp["provider"] == "anthropic" and resp["durationMs"] >= 0
    assert claude.models is not None  # everything else passes through to the real client


def test_anthropic_stream_records_chunks_and_the_assembled_response(session, anthropic_fake):
    claude = traced_anthropic(a_client(anthropic_fake), Tracer(SessionSink(session), prices=PRICES))
    stream = claude.messages.create(
        model=HAIKU, max_tokens=100, stream=True, messages=[{"role": "user", "content": "Stream me"}]
    )
    text = "".join(
        e.delta.text for e in stream if e.type == "content_block_delta" and e.delta.type == "text_delta"
    )
    call = one_call(events())
    assert len(call["chunks"]) >= 3 and call["chunks"][0]["payload"]["type"] == "message_start"
    [resp] = call["response"]
    assert resp["payload"]["content"][0]["text"] == text == "Echo: Stream me"
    assert resp["usage"]["outputTokens"] > 0 and "cost" in resp


@pytest.mark.django_db(transaction=True)  # async: the sink runs in a worker thread
def test_anthropic_async_tool_use_stays_in_the_response_until_the_tool_runs(session, anthropic_fake):
    anthropic_fake.script({"tool": "get_weather", "input": {"city": "Paris"}})
    claude = traced_anthropic(
        a_client(anthropic_fake, anthropic.AsyncAnthropic), Tracer(SessionSink(session))
    )

    async def go():
        return await claude.messages.create(
            model=HAIKU,
            max_tokens=100,
            tools=[WEATHER_TOOL_A],
            messages=[{"role": "user", "content": "Weather?"}],
        )

    message = asyncio.run(go())
    assert message.stop_reason == "tool_use"
    call = one_call(events())
    assert call["tools"] == []  # asked for, not run: part of the response only
    [use] = [b for b in call["response"][0]["payload"]["content"] if b["type"] == "tool_use"]
    assert (use["name"], use["input"]) == ("get_weather", {"city": "Paris"})
    assert call["request"][0]["payload"]["tools"][0]["name"] == "get_weather"
    assert "cost" not in call["response"][0]  # no price given: unknown, never 0

    async def run_it():
        async with Tracer(SessionSink(session)).tool_run(message.content[-1]) as tool:
            tool.result = {"sky": "clear"}

    asyncio.run(run_it())
    [ran] = [e for e in events() if e["type"] == "tool_call"]
    assert (ran["name"], ran["args"], ran["result"]) == ("get_weather", {"city": "Paris"}, {"sky": "clear"})
    assert ran["correlationId"] == use["id"]  # the run names the call the model asked with


def test_openai_structured_output_and_cached_reasoning_usage(session, openai_fake):
    gpt = traced_openai(o_client(openai_fake), Tracer(SessionSink(session), prices=PRICES))
    fmt = {
        "type": "json_schema",
        "json_schema": {
            "name": "answer",
            "schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
        },
    }
    completion = gpt.chat.completions.create(
        model=GPT,
        messages=[{"role": "user", "content": "Is it fine?"}],
        response_format=fmt,
        reasoning_effort="low",
    )
    call = one_call(events())
    assert call["request"][0]["payload"]["response_format"] == fmt
    [resp] = call["response"]
    usage = completion.usage
    assert resp["usage"] == {
        "inputTokens": usage.prompt_tokens,
        "outputTokens": usage.completion_tokens,  # reasoning included, not added
        "totalTokens": usage.total_tokens,
        "cachedInputTokens": usage.prompt_tokens_details.cached_tokens,
        "reasoningTokens": usage.completion_tokens_details.reasoning_tokens,
    }
    assert (
        resp["usage"]["reasoningTokens"] > 0
        and resp["usage"]["reasoningTokens"] <= resp["usage"]["outputTokens"]
    )
    assert resp["payload"]["choices"][0]["message"]["content"] == completion.choices[0].message.content


@pytest.mark.django_db(transaction=True)
def test_openai_async_stream_with_tools(session, openai_fake):
    openai_fake.script({"tool": "get_weather", "input": {"city": "Oslo"}})
    gpt = traced_openai(
        o_client(openai_fake, openai.AsyncOpenAI), Tracer(SessionSink(session), prices=PRICES)
    )

    async def go():
        stream = await gpt.chat.completions.create(
            model=GPT, messages=[{"role": "user", "content": "Weather?"}], tools=[WEATHER_TOOL_O], stream=True
        )
        return [chunk async for chunk in stream]

    chunks = asyncio.run(go())
    call = one_call(events())
    assert len(call["chunks"]) == len(chunks)
    [resp] = call["response"]
    assert resp["usage"]["inputTokens"] > 0  # stream_options.include_usage was asked for
    assert call["tools"] == []  # the accumulated response holds the call the model asked for
    [asked] = resp["payload"]["choices"][0]["message"]["tool_calls"]
    assert asked["function"]["name"] == "get_weather" and json.loads(asked["function"]["arguments"]) == {
        "city": "Oslo"
    }
    assert openai_fake.requests[-1]["stream_options"] == {"include_usage": True}


def test_a_failed_call_records_an_error(session, openai_fake):
    openai_fake.script({"error": (500, "boom")})
    gpt = traced_openai(o_client(openai_fake), Tracer(SessionSink(session)))
    with pytest.raises(openai.InternalServerError):
        gpt.chat.completions.create(model=GPT, messages=[{"role": "user", "content": "x"}])
    call = one_call(events())
    assert len(call["request"]) == 1 and call["response"] == []
    assert "InternalServerError" in call["errors"][0]["message"]


def test_replay_answers_without_calling_the_provider(session, openai_fake):
    gpt = traced_openai(o_client(openai_fake), Tracer(SessionSink(session)))
    first = gpt.chat.completions.create(model=GPT, messages=[{"role": "user", "content": "Once"}])
    cache = {("openai", GPT): first.model_dump(mode="json")}
    sent = len(openai_fake.requests)
    replaying = traced_openai(
        o_client(openai_fake), Tracer(SessionSink(session), replay=lambda p, m, req: cache.get((p, m)))
    )
    again = replaying.chat.completions.create(model=GPT, messages=[{"role": "user", "content": "Once"}])
    assert len(openai_fake.requests) == sent  # nothing reached the provider
    assert again.choices[0].message.content == first.choices[0].message.content
    responses = [e for e in events() if e.get("direction") == "response"]
    assert responses[-1]["summary"] == "replayed" and responses[-1]["usage"] == responses[0]["usage"]


@pytest.mark.django_db(transaction=True)
def test_through_the_rest_client(live_server, workspace, workflow, anthropic_fake):
    from workbench_sdk.client import WorkbenchClient

    from accounts.tokens import create_token

    token = create_token(workspace=workspace, name="host", scopes=["read", "write"]).secret
    with WorkbenchClient(live_server.url, token) as wb:
        run_id = wb.start_run(workflow=workflow)["runId"]
        claude = traced_anthropic(a_client(anthropic_fake), Tracer(ClientSink(wb, run_id), prices=PRICES))
        claude.messages.create(model=HAIKU, max_tokens=50, messages=[{"role": "user", "content": "Remote"}])
        recorded = [e["event"] for e in wb.events(run_id)["events"]]
    assert [e.get("direction") for e in recorded] == ["request", "response"]
    assert recorded[1]["usage"]["inputTokens"] > 0 and recorded[1]["cost"]["amount"] > 0


def test_a_replay_run_answers_from_the_response_cache(session, openai_fake, workspace):
    gpt = traced_openai(o_client(openai_fake), Tracer(SessionSink(session)))
    first = gpt.chat.completions.create(model=GPT, messages=[{"role": "user", "content": "Cached?"}])
    sent = len(openai_fake.requests)

    replay = Workbench(workspace=workspace, actor="host").replay("run_traced")
    tracer = tracer_for_session(replay)
    assert tracer.replay is not None
    again = traced_openai(o_client(openai_fake), tracer).chat.completions.create(
        model=GPT, messages=[{"role": "user", "content": "Cached?"}]
    )
    assert len(openai_fake.requests) == sent  # answered from the cache, not the provider
    assert again.choices[0].message.content == first.choices[0].message.content
    # A request the source never made goes to the provider.
    traced_openai(o_client(openai_fake), tracer).chat.completions.create(
        model=GPT, messages=[{"role": "user", "content": "New question"}]
    )
    assert len(openai_fake.requests) == sent + 1
    # An ordinary run has no replay.
    assert tracer_for_session(session).replay is None


def _host_pipeline(session, a_fake, o_fake, *, prompt: str = "Summarise ticket 42") -> None:
    """Host step code: one Anthropic and one OpenAI call through the traced wrappers."""
    tracer = tracer_for_session(session, step_id="parse", prices=PRICES)
    session.begin_step("parse")
    claude = traced_anthropic(a_client(a_fake), tracer)
    claude.messages.create(model=HAIKU, max_tokens=50, messages=[{"role": "user", "content": prompt}])
    gpt = traced_openai(o_client(o_fake), tracer)
    gpt.chat.completions.create(model=GPT, messages=[{"role": "user", "content": "Is it fine?"}])
    session.complete_step("parse")
    session.cancel("the test ends here")


def test_a_faithful_traced_replay_scores_one_and_a_changed_request_diverges(
    session, workspace, anthropic_fake, openai_fake
):
    _host_pipeline(session, anthropic_fake, openai_fake)
    sent = len(anthropic_fake.requests) + len(openai_fake.requests)
    wb = Workbench(workspace=workspace, actor="host")

    faithful = wb.replay("run_traced")
    _host_pipeline(faithful, anthropic_fake, openai_fake)
    assert len(anthropic_fake.requests) + len(openai_fake.requests) == sent  # all answered from the cache
    replayed = [e for e in events() if e.get("direction") == "response" and e.get("summary") == "replayed"]
    assert len(replayed) == 2  # the replayed answers say so
    report = wb.determinism(faithful.run_id)
    assert report["finished"] and report["firstDivergenceSeq"] is None
    assert report["score"] == 1.0

    changed = wb.replay("run_traced")
    _host_pipeline(changed, anthropic_fake, openai_fake, prompt="Summarise ticket 43")
    report = wb.determinism(changed.run_id)
    source = [e for e in events() if e["runId"] == "run_traced"]
    first_request = next(i + 1 for i, e in enumerate(source) if e.get("direction") == "request")
    assert report["firstDivergenceSeq"] == first_request and report["score"] < 1
    assert len(anthropic_fake.requests) == 2  # the new prompt went to the provider


def _replay_session(workspace):
    return Workbench(workspace=workspace, actor="host").replay("run_traced")


def _run_events(run_id: str) -> list[dict]:
    return [e for e in events() if e["runId"] == run_id]


def _stream_text_anthropic(stream) -> str:
    return "".join(
        e.delta.text for e in stream if e.type == "content_block_delta" and e.delta.type == "text_delta"
    )


def test_an_anthropic_stream_is_replayed_from_the_cache_as_a_stream(session, anthropic_fake, workspace):
    ask = {
        "model": HAIKU,
        "max_tokens": 100,
        "stream": True,
        "messages": [{"role": "user", "content": "Stream me"}],
    }
    claude = traced_anthropic(a_client(anthropic_fake), tracer_for_session(session, prices=PRICES))
    text = _stream_text_anthropic(claude.messages.create(**ask))
    sent = len(anthropic_fake.requests)

    replay = _replay_session(workspace)
    with traced_anthropic(
        a_client(anthropic_fake), tracer_for_session(replay, prices=PRICES)
    ).messages.create(**ask) as stream:
        kinds = []
        again = ""
        for event in stream:
            assert isinstance(event, anthropic.types.RawMessageStreamEvent.__args__[0].__args__)  # SDK types
            kinds.append(event.type)
            if event.type == "content_block_delta" and event.delta.type == "text_delta":
                again += event.delta.text
    assert len(anthropic_fake.requests) == sent  # no provider request
    assert again == text == "Echo: Stream me" and kinds[0] == "message_start" and kinds[-1] == "message_stop"
    source = one_call(_run_events("run_traced"))
    replayed = [e for e in _run_events(replay.run_id) if e["type"] == "model_io"]
    assert [comparable(e) for e in replayed if e["direction"] == "stream_chunk"] == [
        comparable(e) for e in source["chunks"]
    ]  # the same stream, recorded again
    [response] = [e for e in replayed if e["direction"] == "response"]
    assert response["summary"] == "replayed" and response["payload"] == source["response"][0]["payload"]
    session.cancel("end")
    replay.cancel("end")
    assert Workbench(workspace=workspace).determinism(replay.run_id)["score"] == 1.0


@pytest.mark.django_db(transaction=True)
def test_an_openai_async_stream_with_tools_is_replayed_from_the_cache(session, openai_fake, workspace):
    openai_fake.script({"tool": "get_weather", "input": {"city": "Oslo"}})
    ask = {"model": GPT, "messages": [{"role": "user", "content": "Weather?"}], "tools": [WEATHER_TOOL_O]}

    async def stream_all(tracer):
        gpt = traced_openai(o_client(openai_fake, openai.AsyncOpenAI), tracer)
        stream = await gpt.chat.completions.create(**ask, stream=True)
        return [chunk async for chunk in stream]

    first = asyncio.run(stream_all(tracer_for_session(session)))
    sent = len(openai_fake.requests)
    replay = _replay_session(workspace)
    again = asyncio.run(stream_all(tracer_for_session(replay)))
    assert len(openai_fake.requests) == sent
    assert all(isinstance(c, openai.types.chat.ChatCompletionChunk) for c in again)
    assert [c.model_dump() for c in again] == [c.model_dump() for c in first]
    replayed = _run_events(replay.run_id)
    assert [e for e in replayed if e["type"] == "tool_call"] == []  # asked for, never run
    [resp] = [e for e in replayed if e.get("direction") == "response"]
    assert resp["payload"]["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_weather"


@pytest.mark.django_db(transaction=True)
def test_an_answer_recorded_whole_is_streamed_back_rebuilt(session, anthropic_fake, openai_fake, workspace):
    claude = traced_anthropic(a_client(anthropic_fake), tracer_for_session(session))
    whole = claude.messages.create(
        model=HAIKU, max_tokens=50, messages=[{"role": "user", "content": "Whole"}]
    )
    gpt = traced_openai(o_client(openai_fake), tracer_for_session(session))
    completion = gpt.chat.completions.create(model=GPT, messages=[{"role": "user", "content": "Whole too"}])
    sent = len(anthropic_fake.requests) + len(openai_fake.requests)
    replay = _replay_session(workspace)

    tracer = tracer_for_session(replay)  # (asks the database: outside the event loop)

    async def go():
        a = traced_anthropic(a_client(anthropic_fake, anthropic.AsyncAnthropic), tracer)
        stream = await a.messages.create(
            model=HAIKU, max_tokens=50, stream=True, messages=[{"role": "user", "content": "Whole"}]
        )
        return [e async for e in stream]

    text = "".join(
        e.delta.text
        for e in asyncio.run(go())
        if e.type == "content_block_delta" and e.delta.type == "text_delta"
    )
    o = traced_openai(o_client(openai_fake), tracer_for_session(replay))
    chunks = list(
        o.chat.completions.create(model=GPT, stream=True, messages=[{"role": "user", "content": "Whole too"}])
    )
    assert len(anthropic_fake.requests) + len(openai_fake.requests) == sent
    assert text == whole.content[0].text
    assert (
        "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        == completion.choices[0].message.content
    )
    assert chunks[-1].usage.total_tokens == completion.usage.total_tokens
    responses = [e for e in _run_events(replay.run_id) if e.get("direction") == "response"]
    assert [r["payload"]["content"][0]["text"] for r in responses[:1]] == [whole.content[0].text]


def test_the_provider_layer_plays_a_cached_stream_to_on_delta(session, anthropic_fake, workspace):
    from runs.execution import model_calls as cached
    from runs.providers.base import ProviderSettings

    ask = {"model": HAIKU, "max_tokens": 100, "messages": [{"role": "user", "content": "Stream me"}]}
    claude = traced_anthropic(a_client(anthropic_fake), tracer_for_session(session))
    text = _stream_text_anthropic(claude.messages.create(**ask, stream=True))
    sent = len(anthropic_fake.requests)
    settings = ProviderSettings(kind="anthropic", api_key="test-anthropic-key", base_url=anthropic_fake.url)
    deltas: list[tuple[str, str]] = []
    record = cached.call(settings, ask, workspace=workspace, on_delta=lambda k, t: deltas.append((k, t)))
    assert record.hit and len(anthropic_fake.requests) == sent
    chunks = one_call(_run_events("run_traced"))["chunks"]
    streamed = [
        ("text", c["payload"]["delta"]["text"])
        for c in chunks
        if c["payload"]["type"] == "content_block_delta" and c["payload"]["delta"]["type"] == "text_delta"
    ]
    assert deltas == streamed and len(deltas) > 1  # the recorded deltas, one by one
    assert "".join(t for _, t in deltas) == text and len(record.chunks) == len(chunks)


def test_the_anthropic_stream_helper_is_recorded_and_replayed(session, anthropic_fake, workspace):
    ask = {"model": HAIKU, "max_tokens": 100, "messages": [{"role": "user", "content": "Helper"}]}

    def helper_text(tracer) -> tuple[str, str]:
        claude = traced_anthropic(a_client(anthropic_fake), tracer)
        with claude.messages.stream(**ask) as stream:
            text = "".join(stream.text_stream)
            return text, stream.get_final_message().content[0].text

    assert helper_text(tracer_for_session(session, prices=PRICES)) == ("Echo: Helper", "Echo: Helper")
    call = one_call(_run_events("run_traced"))
    assert call["request"][0]["payload"]["stream"] is True and len(call["chunks"]) >= 3
    assert call["response"][0]["payload"]["content"][0]["text"] == "Echo: Helper"
    sent = len(anthropic_fake.requests)
    replay = _replay_session(workspace)
    assert helper_text(tracer_for_session(replay, prices=PRICES)) == ("Echo: Helper", "Echo: Helper")
    assert len(anthropic_fake.requests) == sent
    session.cancel("end")
    replay.cancel("end")
    assert Workbench(workspace=workspace).determinism(replay.run_id)["score"] == 1.0


@pytest.mark.django_db(transaction=True)
def test_the_openai_async_stream_helper_is_recorded_and_replayed(session, openai_fake, workspace):
    ask = {"model": GPT, "messages": [{"role": "user", "content": "Helper"}]}

    async def helper(tracer) -> tuple[list[str], str]:
        gpt = traced_openai(o_client(openai_fake, openai.AsyncOpenAI), tracer)
        async with gpt.chat.completions.stream(**ask) as stream:
            kinds = [event.type async for event in stream]
            final = await stream.get_final_completion()
        return kinds, final.choices[0].message.content

    kinds, text = asyncio.run(helper(tracer_for_session(session)))
    assert "content.delta" in kinds and text.startswith("Echo: Helper")
    assert (
        one_call(_run_events("run_traced"))["response"][0]["payload"]["choices"][0]["message"]["content"]
        == text
    )
    sent = len(openai_fake.requests)
    tracer = tracer_for_session(_replay_session(workspace))
    assert asyncio.run(helper(tracer)) == (kinds, text)
    assert len(openai_fake.requests) == sent
