"""Golden decoded spans as the field's instrumentations emit them (the shape ``runs.otlp_ingest``
decodes: ``{traceId, spanId, parentSpanId, name, kind, start, end, attributes, status,
statusMessage, resource, events?}``).

* ``opentelemetry-instrumentation-openai-v2`` 2.3b0 (contrib, OTel GenAI semconv): a ``chat``
  CLIENT span with ``gen_ai.system`` / usage attributes, message content as OTLP log events
  (``gen_ai.system.message``, ``gen_ai.user.message``, ``gen_ai.choice``) carrying the span's
  trace and span ids;
* ``openinference-instrumentation-openai`` 0.1.66: an ``LLM`` span ``ChatCompletion`` with
  flattened ``llm.input_messages.*`` / ``llm.output_messages.*``, ``llm.token_count.*``,
  ``input.value`` / ``output.value`` (JSON of the request and response), under a ``CHAIN`` root
  and beside a ``TOOL`` span (what ``openinference-instrumentation`` 's ``@tracer.tool`` writes).
"""

from __future__ import annotations

import json

T0 = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z
MS = 1_000_000

OPENAI_V2_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
OPENAI_V2_SPAN = "00f067aa0ba902b7"
OI_TRACE = "a3ce929d0e0e47364bf92f3577b34da6"
OI_ROOT, OI_LLM, OI_TOOL = "1111111111111111", "2222222222222222", "3333333333333333"

WEATHER_CALL = {
    "id": "call_Wx1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
}


def span(
    trace,
    span_id,
    name,
    start_ms,
    end_ms,
    attributes,
    *,
    parent=None,
    kind=1,
    status=0,
    resource=None,
    events=None,
    message=None,
):
    out = {
        "traceId": trace,
        "spanId": span_id,
        "parentSpanId": parent,
        "name": name,
        "kind": kind,
        "start": T0 + start_ms * MS,
        "end": T0 + end_ms * MS,
        "attributes": attributes,
        "status": status,
        "statusMessage": message,
        "resource": resource or {"service.name": "weather-app", "telemetry.sdk.language": "python"},
    }
    if events is not None:
        out["events"] = events
    return out


def openai_v2_chat_span(**overrides):
    """The contrib instrumentation's chat span (no content on the span: it goes to log events)."""
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.request.temperature": 0.0,
        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.response.id": "chatcmpl-AbC123",
        "gen_ai.response.finish_reasons": ["tool_calls"],
        "gen_ai.openai.response.service_tier": "default",
        "gen_ai.usage.input_tokens": 82,
        "gen_ai.usage.output_tokens": 17,
        "server.address": "api.openai.com",
        "server.port": 443,
    }
    attributes.update(overrides)
    return span(OPENAI_V2_TRACE, OPENAI_V2_SPAN, "chat gpt-4o-mini", 0, 420, attributes, kind=3)


def openai_v2_log_records():
    """The contrib instrumentation's content log events (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true)."""
    base = {"traceId": OPENAI_V2_TRACE, "spanId": OPENAI_V2_SPAN, "attributes": {"gen_ai.system": "openai"}}
    return [
        {
            **base,
            "time": T0 + 1 * MS,
            "eventName": "gen_ai.system.message",
            "body": {"content": "You are a weather bot."},
        },
        {
            **base,
            "time": T0 + 1 * MS,
            "eventName": "gen_ai.user.message",
            "body": {"content": "Weather in Paris?"},
        },
        {
            **base,
            "time": T0 + 419 * MS,
            "eventName": "gen_ai.choice",
            "body": {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {"role": "assistant", "tool_calls": [WEATHER_CALL]},
            },
        },
        # a log record of the app itself, same span: not GenAI content
        {**base, "time": T0 + 2 * MS, "attributes": {}, "body": "calling openai"},
    ]


OI_REQUEST = {
    "messages": [
        {"role": "system", "content": "You are a weather bot."},
        {"role": "user", "content": "Weather in Paris?"},
    ],
    "model": "gpt-4o-mini",
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
}
OI_RESPONSE = {
    "id": "chatcmpl-AbC123",
    "object": "chat.completion",
    "model": "gpt-4o-mini-2024-07-18",
    "choices": [
        {
            "index": 0,
            "finish_reason": "tool_calls",
            "message": {"role": "assistant", "content": None, "tool_calls": [WEATHER_CALL]},
        }
    ],
    "usage": {"prompt_tokens": 1200, "completion_tokens": 300, "total_tokens": 1500},
}


def openinference_llm_span(parent=OI_ROOT, trace=OI_TRACE, span_id=OI_LLM):
    attributes = {
        "openinference.span.kind": "LLM",
        "llm.system": "openai",
        "llm.provider": "openai",
        "llm.model_name": "gpt-4o-mini-2024-07-18",
        "llm.invocation_parameters": json.dumps({"model": "gpt-4o-mini", "temperature": 0}),
        "input.value": json.dumps(OI_REQUEST),
        "input.mime_type": "application/json",
        "output.value": json.dumps(OI_RESPONSE),
        "output.mime_type": "application/json",
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": "You are a weather bot.",
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.content": "Weather in Paris?",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_Wx1",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_weather",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"city":"Paris"}',
        "llm.tools.0.tool.json_schema": json.dumps(OI_REQUEST["tools"][0]),
        "llm.token_count.prompt": 1200,
        "llm.token_count.completion": 300,
        "llm.token_count.total": 1500,
        "llm.token_count.prompt_details.cache_read": 1000,
        "llm.token_count.prompt_details.cache_write": 64,
        "llm.token_count.completion_details.reasoning": 200,
        "session.id": "sess-42",
    }
    return span(trace, span_id, "ChatCompletion", 10, 900, attributes, parent=parent, status=1)


def openinference_trace():
    """CHAIN root > LLM (asks for get_weather) + TOOL (runs it); children finish first, as exported."""
    root = span(
        OI_TRACE,
        OI_ROOT,
        "weather-agent",
        0,
        1500,
        {
            "openinference.span.kind": "CHAIN",
            "input.value": "Weather in Paris?",
            "input.mime_type": "text/plain",
            "output.value": "It is 21 C in Paris.",
            "session.id": "sess-42",
            "user.id": "u-7",
        },
        status=1,
    )
    tool = span(
        OI_TRACE,
        OI_TOOL,
        "get_weather",
        910,
        1400,
        {
            "openinference.span.kind": "TOOL",
            "tool.name": "get_weather",
            "tool.description": "Current weather of a city",
            "tool.parameters": json.dumps({"type": "object", "properties": {"city": {"type": "string"}}}),
            "input.value": '{"city": "Paris"}',
            "input.mime_type": "application/json",
            "output.value": '{"temp_c": 21}',
            "output.mime_type": "application/json",
        },
        parent=OI_ROOT,
        status=1,
    )
    return [openinference_llm_span(), tool, root]


def genai_current_spans(trace="5b8efff798038103d269b633813fc60c"):
    """1.42 names: an invoke_agent root, a chat call with content attributes, an execute_tool."""
    root = span(
        trace,
        "aaaaaaaaaaaaaaaa",
        "invoke_agent planner",
        0,
        2000,
        {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"},
    )
    chat = span(
        trace,
        "bbbbbbbbbbbbbbbb",
        "chat claude-sonnet-4-5",
        5,
        805,
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "anthropic",
            "gen_ai.request.model": "claude-sonnet-4-5",
            "gen_ai.response.model": "claude-sonnet-4-5-20250929",
            "gen_ai.usage.input_tokens": 1200,
            "gen_ai.usage.output_tokens": 300,
            "gen_ai.usage.cache_read.input_tokens": 1000,
            "gen_ai.usage.cache_creation.input_tokens": 100,
            "gen_ai.usage.reasoning.output_tokens": 200,
            "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Be brief."}]),
            "gen_ai.input.messages": json.dumps(
                [{"role": "user", "parts": [{"type": "text", "content": "find jobs"}]}]
            ),
            "gen_ai.output.messages": json.dumps(
                [
                    {
                        "role": "assistant",
                        "parts": [
                            {
                                "type": "tool_call",
                                "id": "toolu_1",
                                "name": "search",
                                "arguments": {"q": "jobs"},
                            }
                        ],
                        "finish_reason": "tool_use",
                    }
                ]
            ),
        },
        parent="aaaaaaaaaaaaaaaa",
        kind=3,
    )
    tool = span(
        trace,
        "cccccccccccccccc",
        "execute_tool search",
        810,
        990,
        {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": "search",
            "gen_ai.tool.call.id": "toolu_1",
            "gen_ai.tool.call.arguments": '{"q": "jobs"}',
            "gen_ai.tool.call.result": '{"hits": 3}',
        },
        parent="aaaaaaaaaaaaaaaa",
        status=1,
    )
    return [chat, tool, root]


def genai_legacy_span(trace="6c9f0000000000000000000000000001"):
    """Older names still emitted (OpenLLMetry-style flattened prompt/completion)."""
    return span(
        trace,
        "dddddddddddddddd",
        "openai.chat",
        0,
        300,
        {
            "gen_ai.system": "OpenAI",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.response.model": "gpt-4o-2024-08-06",
            "gen_ai.usage.prompt_tokens": 40,
            "gen_ai.usage.completion_tokens": 12,
            "llm.request.type": "chat",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "What's 2+2?",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.content": "",
            "gen_ai.completion.0.finish_reason": "tool_calls",
            "gen_ai.completion.0.tool_calls.0.id": "call_c1",
            "gen_ai.completion.0.tool_calls.0.name": "calculator",
            "gen_ai.completion.0.tool_calls.0.arguments": '{"expr": "2+2"}',
        },
        kind=3,
    )
