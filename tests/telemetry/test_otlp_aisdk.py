"""The Vercel AI SDK's own OTel spans (``experimental_telemetry``: ``ai.*`` attributes) mapped to
protocol events (pure: runs.protocol.otlp_semconv_in with runs.protocol.otlp_aisdk_in). The live
export from the real ``ai`` package is in tests/live/test_typescript_sdk.py."""

from __future__ import annotations

import json

from runs.protocol.otlp_semconv_in import span_events, span_role

TRACE = "0af7651916cd43dd8448eb211c80319c"


def span(span_id: str, name: str, attributes: dict, parent: str | None = None) -> dict:
    out = {
        "traceId": TRACE,
        "spanId": span_id,
        "name": name,
        "kind": 1,
        "start": 1_700_000_000_000_000_000,
        "end": 1_700_000_000_500_000_000,
        "status": 1,
        "attributes": attributes,
    }
    if parent:
        out["parentSpanId"] = parent
    return out


DO_GENERATE = {
    "operation.name": "ai.generateText.doGenerate weather",
    "ai.operationId": "ai.generateText.doGenerate",
    "ai.model.provider": "openai.chat",
    "ai.model.id": "gpt-4o-mini",
    "ai.prompt.messages": json.dumps(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "use get_weather for Paris"}]},
        ]
    ),
    "ai.response.text": "",
    "ai.response.toolCalls": json.dumps(
        [{"toolCallId": "call_1", "toolName": "get_weather", "input": '{"city":"Paris"}'}]
    ),
    "ai.response.finishReason": "tool-calls",
    "ai.usage.inputTokens": 120,
    "ai.usage.outputTokens": 30,
    "ai.usage.inputTokenDetails.cacheReadTokens": 100,
    "ai.usage.outputTokenDetails.reasoningTokens": 10,
    "gen_ai.system": "openai.chat",
    "gen_ai.request.model": "gpt-4o-mini",
    "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
    "gen_ai.usage.input_tokens": 120,
    "gen_ai.usage.output_tokens": 30,
}


def test_do_generate_is_a_model_call_priced_as_its_provider_with_content_and_cache_reads():
    events = [
        e for _, e in span_events(span("b" * 16, "ai.generateText.doGenerate", DO_GENERATE, "a" * 16), "r1")
    ]
    types = [(e["type"], e.get("direction")) for e in events]
    assert types == [
        ("span_started", None),
        ("model_io", "request"),
        ("model_io", "response"),
        ("span_ended", None),
    ]
    request, response = events[1], events[2]
    assert request["provider"] == response["provider"] == "openai"  # not "openai.chat": priced as OpenAI
    assert request["model"] == "gpt-4o-mini" and response["model"] == "gpt-4o-mini-2024-07-18"
    assert request["payload"]["inputMessages"] == [
        {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
        {"role": "user", "parts": [{"type": "text", "content": "use get_weather for Paris"}]},
    ]
    assert response["usage"] == {
        "inputTokens": 120,
        "outputTokens": 30,
        "totalTokens": 150,
        "cachedInputTokens": 100,
        "reasoningTokens": 10,
    }
    assert response["payload"]["outputMessages"][0]["finish_reason"] == "tool-calls"
    # the tool it asked for is part of its output, not a tool_call (only a tool span is one)
    [asked] = [p for p in response["payload"]["outputMessages"][0]["parts"] if p["type"] == "tool_call"]
    assert (asked["name"], asked["arguments"]) == ("get_weather", {"city": "Paris"})
    # the content went to the model events, not into the span's attributes
    assert "ai.prompt.messages" not in events[0]["attributes"]
    assert events[0]["attributes"]["ai.model.provider"] == "openai.chat"


def test_the_outer_call_is_a_plain_span_and_a_tool_call_span_is_a_tool_with_its_result():
    outer = {
        "operation.name": "ai.generateText weather",
        "ai.operationId": "ai.generateText",
        "ai.model.provider": "openai.chat",
        "ai.model.id": "gpt-4o-mini",
        "ai.usage.inputTokens": 240,
        "ai.usage.outputTokens": 60,
    }
    assert span_role(outer) == "span"  # its steps' doGenerate spans are the calls: none counted twice
    assert [e["type"] for _, e in span_events(span("a" * 16, "ai.generateText", outer), "r1")] == [
        "span_started",
        "span_ended",
    ]
    tool = {
        "operation.name": "ai.toolCall weather",
        "ai.operationId": "ai.toolCall",
        "ai.toolCall.name": "get_weather",
        "ai.toolCall.id": "call_1",
        "ai.toolCall.args": '{"city":"Paris"}',
        "ai.toolCall.result": '{"sky":"clear"}',
    }
    assert span_role(tool) == "tool"
    [call] = [
        e
        for _, e in span_events(span("c" * 16, "ai.toolCall", tool, "a" * 16), "r1")
        if e["type"] == "tool_call"
    ]
    assert (call["name"], call["args"], call["result"]) == (
        "get_weather",
        {"city": "Paris"},
        {"sky": "clear"},
    )


def test_ai_sdk_4_flat_usage_and_a_stream_span():
    attrs = {
        "ai.operationId": "ai.streamText.doStream",
        "ai.model.provider": "anthropic.messages",
        "ai.model.id": "claude-haiku-4-5",
        "ai.usage.promptTokens": 12,
        "ai.usage.completionTokens": 3,
        "ai.response.text": "Hi!",
    }
    events = [e for _, e in span_events(span("d" * 16, "ai.streamText.doStream", attrs), "r1")]
    response = next(e for e in events if e.get("direction") == "response")
    assert (response["provider"], response["model"]) == ("anthropic", "claude-haiku-4-5")
    assert response["usage"] == {"inputTokens": 12, "outputTokens": 3, "totalTokens": 15}
    assert response["payload"]["outputMessages"] == [
        {"role": "assistant", "parts": [{"type": "text", "content": "Hi!"}]}
    ]
