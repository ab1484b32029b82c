"""The pure OTLP span mapping (runs.protocol.otlp_map): both GenAI conventions, routing,
per-span refusal, bounded JSON. Fixtures: tests/telemetry/otlp_span_fixtures.py."""

from __future__ import annotations

import json

import pytest

from runs.protocol.errors import ErrorCode, ProtocolError
from runs.protocol.otlp_derived import DERIVED, span_attributes, split_derivable
from runs.protocol.otlp_map import (
    join_content_logs,
    load_otlp_json,
    map_batch,
    map_spans,
    partial_success,
    route_spans,
)
from runs.protocol.otlp_semconv_in import span_events, span_key, span_of_key, span_role
from runs.protocol.validate import validate_event
from tests.telemetry import otlp_span_fixtures as fx


def events_of(spans, run_id="run_x"):
    batch = map_spans(spans, [run_id] * len(spans))
    assert batch.rejected_spans == 0, batch.message
    events = batch.events_by_run[run_id]
    for event in events:
        validate_event(event)
    return events


def by_type(events, kind, **match):
    return [e for e in events if e["type"] == kind and all(e.get(k) == v for k, v in match.items())]


def asked_tools(response):
    """The tool calls a model asked for: parts of its output messages (not ``tool_call`` events)."""
    return [p for m in response["payload"]["outputMessages"] for p in m["parts"] if p["type"] == "tool_call"]


def test_openai_v2_chat_span_with_content_log_records_joined():
    spans, unmatched = join_content_logs([fx.openai_v2_chat_span()], fx.openai_v2_log_records())
    assert unmatched == []
    events = events_of(spans)
    assert [e["type"] for e in events] == ["span_started", "model_io", "model_io", "span_ended"]
    started, request, response, ended = events
    # the attributes the model_io events hold are named, not kept twice (issue 53); all come back
    attributes = span_attributes(started, request, response)
    assert started["kind"] == "client" and "gen_ai.usage.input_tokens" in attributes
    assert "gen_ai.usage.input_tokens" not in started["attributes"] and DERIVED in started["attributes"]
    assert attributes["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert request["direction"] == "request" and request["ts"] == "2026-01-01T00:00:00.000Z"
    assert request["provider"] == "openai" and request["model"] == "gpt-4o-mini"
    assert request["payload"]["inputMessages"] == [
        {"role": "system", "parts": [{"type": "text", "content": "You are a weather bot."}]},
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]},
    ]
    assert response["direction"] == "response" and response["model"] == "gpt-4o-mini-2024-07-18"
    assert response["usage"] == {"inputTokens": 82, "outputTokens": 17, "totalTokens": 99}
    assert response["durationMs"] == 420 and response["ts"] == "2026-01-01T00:00:00.420Z"
    assert response["payload"]["outputMessages"][0]["finish_reason"] == "tool_calls"
    assert response["payload"]["responseId"] == "chatcmpl-AbC123"
    # the tool the model asked for: part of its output, not a tool_call of its own (issue 54)
    [call] = [p for p in response["payload"]["outputMessages"][0]["parts"] if p["type"] == "tool_call"]
    assert call["name"] == "get_weather" and call["arguments"] == {"city": "Paris"}
    assert {e["correlationId"] for e in events} == {f"o:{span_key(fx.OPENAI_V2_TRACE, fx.OPENAI_V2_SPAN)}"}
    assert ended["spanId"] == started["spanId"] == fx.OPENAI_V2_SPAN


def test_log_records_of_a_span_not_in_the_batch_are_returned_unmatched():
    other = fx.span("f" * 32, "e" * 16, "x", 0, 1, {})
    spans, unmatched = join_content_logs([other], fx.openai_v2_log_records())
    assert spans == [other] and len(unmatched) == 3  # the app's own log record is not content


def test_content_as_span_events():
    chat = fx.openai_v2_chat_span()
    chat["events"] = [
        {
            "name": "gen_ai.user.message",
            "time": chat["start"],
            "attributes": {"gen_ai.system": "openai", "content": "hi"},
        },
        {
            "name": "gen_ai.choice",
            "time": chat["end"],
            "attributes": {
                "index": 0,
                "finish_reason": "stop",
                "message": json.dumps({"role": "assistant", "content": "hello"}),
            },
        },
    ]
    _s, request, response, _e = events_of([chat])
    assert request["payload"]["inputMessages"] == [
        {"role": "user", "parts": [{"type": "text", "content": "hi"}]}
    ]
    assert response["payload"]["outputMessages"] == [
        {"role": "assistant", "parts": [{"type": "text", "content": "hello"}], "finish_reason": "stop"}
    ]


def test_openinference_trace():
    spans = fx.openinference_trace()
    assert [span_role(s["attributes"]) for s in spans] == ["model", "tool", "span"]
    events = events_of(spans)
    # time order: the root starts first and ends last
    assert events[0]["type"] == "span_started" and events[0]["spanId"] == fx.OI_ROOT
    assert events[-1]["type"] == "span_ended" and events[-1]["spanId"] == fx.OI_ROOT
    assert events[-1]["status"] == "ok"
    root_started = events[0]
    assert root_started["attributes"]["openinference.span.kind"] == "CHAIN"
    assert root_started["attributes"]["input.value"] == "Weather in Paris?"  # a chain keeps its I/O
    [request] = by_type(events, "model_io", direction="request")
    [response] = by_type(events, "model_io", direction="response")
    assert response["provider"] == "openai" and response["model"] == "gpt-4o-mini-2024-07-18"
    assert response["usage"] == {
        "inputTokens": 1200,
        "outputTokens": 300,
        "totalTokens": 1500,
        "cachedInputTokens": 1000,
        "reasoningTokens": 200,
    }
    assert response["payload"]["cacheCreationInputTokens"] == 64
    assert request["payload"]["inputMessages"][1] == {
        "role": "user",
        "parts": [{"type": "text", "content": "Weather in Paris?"}],
    }
    assert response["payload"]["outputMessages"] == [
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": "call_Wx1", "name": "get_weather", "arguments": {"city": "Paris"}}
            ],
        }
    ]
    llm_started = by_type(events, "span_started", spanId=fx.OI_LLM)[0]
    assert llm_started["parentSpanId"] == fx.OI_ROOT
    # the flattened messages and the counts are rebuilt from the model_io events (not kept twice);
    # input.value holds more than the messages (the request's parameters): kept as sent
    kept = llm_started["attributes"]
    assert not any(k.startswith("llm.input_messages.") or k == "llm.token_count.prompt" for k in kept)
    assert kept["input.value"] == fx.openinference_llm_span()["attributes"]["input.value"]
    llm_request, llm_response = by_type(events, "model_io", correlationId=llm_started["correlationId"])
    assert span_attributes(llm_started, llm_request, llm_response)["llm.token_count.prompt"] == 1200
    # one tool run, one tool_call: the tool span (what the model asked for is in its output above)
    [ran] = by_type(events, "tool_call")
    assert ran["name"] == "get_weather"
    assert ran["args"] == {"city": "Paris"} and ran["result"] == {"temp_c": 21}
    assert ran["correlationId"] == f"o:{span_key(fx.OI_TRACE, fx.OI_TOOL)}"


def test_openinference_llm_from_input_output_values_only():
    llm = fx.openinference_llm_span()
    llm["attributes"] = {
        k: v
        for k, v in llm["attributes"].items()
        if not k.startswith(("llm.input_messages", "llm.output_messages"))
    }
    _s, request, response, _e = events_of([llm])
    assert [m["role"] for m in request["payload"]["inputMessages"]] == ["system", "user"]
    assert response["payload"]["outputMessages"][0]["finish_reason"] == "tool_calls"
    assert [c["name"] for c in asked_tools(response)] == ["get_weather"]


def test_current_genai_conventions():
    events = events_of(fx.genai_current_spans())
    [request] = by_type(events, "model_io", direction="request")
    [response] = by_type(events, "model_io", direction="response")
    assert response["provider"] == "anthropic" and response["model"] == "claude-sonnet-4-5-20250929"
    assert request["model"] == "claude-sonnet-4-5"
    assert response["usage"] == {
        "inputTokens": 1200,
        "outputTokens": 300,
        "totalTokens": 1500,
        "cachedInputTokens": 1000,
        "reasoningTokens": 200,
    }
    assert response["payload"]["cacheCreationInputTokens"] == 100
    assert request["payload"]["systemInstructions"] == [{"type": "text", "content": "Be brief."}]
    [asked] = asked_tools(response)
    [ran] = by_type(events, "tool_call")
    assert asked["arguments"] == {"q": "jobs"}
    assert ran["args"] == {"q": "jobs"} and ran["result"] == {"hits": 3}
    # invoke_agent is a span, not a model call
    assert by_type(events, "span_started", name="invoke_agent planner")


def test_the_same_call_in_both_conventions_gives_the_same_usage():
    oi = by_type(events_of([fx.openinference_llm_span()]), "model_io", direction="response")[0]
    semconv = fx.openai_v2_chat_span(
        **{
            "gen_ai.usage.input_tokens": 1200,
            "gen_ai.usage.output_tokens": 300,
            "gen_ai.usage.cache_read.input_tokens": 1000,
            "gen_ai.usage.reasoning.output_tokens": 200,
        }
    )
    genai = by_type(events_of([semconv]), "model_io", direction="response")[0]
    assert oi["usage"] == genai["usage"] and oi["provider"] == genai["provider"]


def test_older_attribute_names():
    events = events_of([fx.genai_legacy_span()])
    _s, request, response, _e = events
    assert response["provider"] == "OpenAI" and response["usage"] == {
        "inputTokens": 40,
        "outputTokens": 12,
        "totalTokens": 52,
    }
    assert request["payload"]["inputMessages"] == [
        {"role": "user", "parts": [{"type": "text", "content": "What's 2+2?"}]}
    ]
    assert response["payload"]["outputMessages"][0]["finish_reason"] == "tool_calls"
    [call] = asked_tools(response)
    assert call["name"] == "calculator" and call["arguments"] == {"expr": "2+2"}
    assert not any(k.startswith("gen_ai.prompt.") for k in events[0]["attributes"])
    # the completion's tool call has no place in the rebuilt flattened form: kept as sent
    assert events[0]["attributes"]["gen_ai.completion.0.tool_calls.0.name"] == "calculator"


def test_error_status_and_exception_event():
    spans = fx.openinference_trace()
    tool = spans[1]
    tool["status"] = 2
    tool["events"] = [
        {
            "name": "exception",
            "time": tool["end"],
            "attributes": {"exception.type": "TimeoutError", "exception.message": "upstream timed out"},
        }
    ]
    [ended] = by_type(events_of(spans), "span_ended", spanId=fx.OI_TOOL)
    assert ended["status"] == "error" and ended["error"] == {"message": "upstream timed out"}


def test_retried_export_maps_to_the_same_ids():
    first = [e["id"] for e in events_of(fx.openinference_trace())]
    assert first == [e["id"] for e in events_of(fx.openinference_trace())]
    assert len(set(first)) == len(first)


# --- routing -----------------------------------------------------------------------------------


def test_each_trace_without_a_run_becomes_its_own_run():
    spans = fx.openinference_trace() + fx.genai_current_spans()
    routes, traces = route_spans(spans)
    assert {r.source for r in routes} == {"new"}
    oi = traces[fx.OI_TRACE]
    assert oi.root_span_id == fx.OI_ROOT and oi.root_status == "ok" and oi.span_count == 3
    assert oi.title == "weather-agent (weather-app)"
    assert oi.session_id == "sess-42" and oi.tags == ["service:weather-app", "session:sess-42"]
    assert oi.metadata == {
        "otel": {"traceId": fx.OI_TRACE, "serviceName": "weather-app", "sessionId": "sess-42"}
    }
    created = {}

    def resolve(info):
        return created.setdefault(info.trace_id, f"run_{len(created)}")

    batch, _routes, _traces = map_batch(spans, None, resolve)
    assert sorted(batch.events_by_run) == ["run_0", "run_1"] and batch.accepted_spans == 6
    assert all(e["runId"] == "run_0" for e in batch.events_by_run["run_0"])


def test_a_child_without_its_root_is_titled_from_its_earliest_span():
    llm = fx.openinference_llm_span()
    _routes, traces = route_spans([llm])
    info = traces[fx.OI_TRACE]
    assert info.root_span_id is None and info.title == "ChatCompletion (weather-app)"


def test_a_tagged_root_takes_its_untagged_children():
    spans = fx.openinference_trace()
    spans[2]["attributes"]["workbench.run.id"] = "run_root"
    routes, _ = route_spans(spans, header_run_id="run_header")
    assert [(r.run_id, r.source) for r in routes] == [
        ("run_root", "trace"),
        ("run_root", "trace"),
        ("run_root", "span"),
    ]


def test_resource_then_header():
    spans = fx.genai_current_spans()
    spans[0]["resource"] = {"service.name": "app", "workbench.run.id": "run_res"}
    routes, _ = route_spans(spans, header_run_id="run_header")
    assert [(r.run_id, r.source) for r in routes] == [
        ("run_res", "resource"),
        ("run_header", "header"),
        ("run_header", "header"),
    ]


# --- one bad span never refuses the batch ------------------------------------------------------


def test_malformed_spans_are_rejected_one_by_one():
    good = fx.openinference_trace()
    no_id = fx.openai_v2_chat_span()
    no_id["spanId"] = ""
    bad_time = fx.genai_legacy_span()
    bad_time["end"] = -5
    deep = fx.openai_v2_chat_span()
    deep["spanId"] = "0123456789abcdef"
    deep["attributes"]["gen_ai.input.messages"] = "[" * 600 + "]" * 600
    spans = [no_id, *good, bad_time, deep]
    batch, routes, _ = map_batch(spans, "run_h", lambda info: None)
    assert routes[0] is None
    assert batch.accepted_spans == 3 and batch.rejected_spans == 3
    assert batch.message.startswith("span 0: spanId must be 16 lowercase hex digits")
    assert (
        "span 4: end time" in batch.message
        and "span 5:" in batch.message
        and "nested deeper" in batch.message
    )
    assert partial_success(batch) == {"partialSuccess": {"rejectedSpans": "3", "errorMessage": batch.message}}
    assert len(batch.events_by_run["run_h"]) == len(events_of(good))
    assert partial_success(map_spans(good, ["r"] * 3)) == {}


def test_spans_whose_trace_finds_no_run_are_rejected():
    batch, _, _ = map_batch(fx.genai_current_spans(), None, lambda info: None)
    assert batch.rejected_spans == 3 and "names no run" in batch.message


def test_a_lone_surrogate_or_a_non_finite_number_rejects_only_its_span():
    spans = fx.genai_current_spans()
    spans[1]["attributes"]["gen_ai.tool.call.result"] = "\ud800"
    spans[2]["attributes"]["x.ratio"] = float("nan")
    batch = map_spans(spans, ["r"] * 3)
    assert batch.rejected_spans == 1 and "span 1:" in batch.message
    [root] = by_type(batch.events_by_run["r"], "span_started", name="invoke_agent planner")
    assert root["attributes"]["x.ratio"] == "nan"


# --- bounded JSON ------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [513, 700, 5000, 200_000])
def test_deep_json_bodies_are_refused_with_a_code(depth):
    with pytest.raises(ProtocolError) as caught:
        load_otlp_json(b"[" * depth + b"]" * depth)
    assert caught.value.code == ErrorCode.INVALID_INPUT and "nested deeper than 512" in caught.value.message


def test_json_bodies_within_the_limit_parse():
    assert load_otlp_json(b"[" * 512 + b"]" * 512) is not None
    assert load_otlp_json(b'{"resourceSpans": []}') == {"resourceSpans": []}
    with pytest.raises(ProtocolError) as caught:
        load_otlp_json(b"{nope")
    assert caught.value.code == ErrorCode.INVALID_JSON


def test_span_events_of_a_plain_span_match_the_ingest_shape():
    root = fx.genai_current_spans()[2]
    [(start, started), (end, ended)] = span_events(root, "r")
    key = span_key(root["traceId"], root["spanId"])
    assert started["id"] == f"o{key}_start" and ended["id"] == f"o{key}_end"
    assert len(key) == 32 and span_of_key(key) == root["spanId"]  # 24 bytes in base64url, not 48 hex
    assert start == root["start"] and end == root["end"] and ended["durationMs"] == 2000


WEIRD = [
    None,
    True,
    -1,
    2**60,
    2**70,
    1.5,
    float("inf"),
    "",
    "12",
    "x",
    [],
    [1, "a"],
    {"a": [1]},
    "[1,",
    '{"a": 1}',
]


@pytest.mark.parametrize("weird", WEIRD, ids=repr)
def test_odd_attribute_values_map_to_valid_events_or_reject_their_span(weird):
    """Every event built from any attribute value passes the protocol's schema (so the engine's
    validation of the whole append cannot fail on a mapped span), or the span is refused alone."""
    spans = (
        fx.openinference_trace()
        + fx.genai_current_spans()
        + [fx.genai_legacy_span(), fx.openai_v2_chat_span()]
    )
    for span in spans:
        span["attributes"] = {key: weird for key in span["attributes"]} | {
            k: v
            for k, v in span["attributes"].items()
            if k in ("openinference.span.kind", "gen_ai.operation.name")
        }
    batch = map_spans(spans, ["r"] * len(spans), validate=False)
    for event in batch.events_by_run.get("r", []):
        validate_event(event)
    assert batch.accepted_spans + batch.rejected_spans == len(spans)


def test_openinference_agent_retriever_and_embedding_kinds():
    """AGENT and RETRIEVER spans keep their place in the span tree (kind and I/O kept as
    attributes); an EMBEDDING span is a model call with its model and prompt tokens."""
    trace, agent, retriever, embedding = (
        fx.OI_TRACE,
        "4444444444444444",
        "5555555555555555",
        "6666666666666666",
    )
    spans = [
        fx.span(
            trace,
            embedding,
            "embed query",
            110,
            120,
            {
                "openinference.span.kind": "EMBEDDING",
                "embedding.model_name": "text-embedding-3-small",
                "llm.provider": "openai",
                "llm.token_count.prompt": 7,
                "llm.token_count.total": 7,
            },
            parent=retriever,
        ),
        fx.span(
            trace,
            retriever,
            "retrieve",
            100,
            150,
            {"openinference.span.kind": "RETRIEVER", "input.value": "Weather in Paris?"},
            parent=agent,
        ),
        fx.span(
            trace,
            agent,
            "agent",
            0,
            200,
            {"openinference.span.kind": "AGENT", "agent.name": "planner"},
            status=1,
        ),
    ]
    assert [span_role(s["attributes"]) for s in spans] == ["model", "span", "span"]
    events = events_of(spans)
    kinds = {e["spanId"]: e["attributes"]["openinference.span.kind"] for e in by_type(events, "span_started")}
    assert kinds == {agent: "AGENT", retriever: "RETRIEVER", embedding: "EMBEDDING"}
    assert by_type(events, "span_started", spanId=retriever)[0]["parentSpanId"] == agent
    [response] = by_type(events, "model_io", direction="response")
    assert response["model"] == "text-embedding-3-small" and response["provider"] == "openai"
    assert response["usage"]["inputTokens"] == 7 and response["usage"]["totalTokens"] == 7
    assert by_type(events, "span_ended", spanId=agent)[0]["status"] == "ok"


@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        ({"input.mime_type": "application/json", "output.mime_type": "text/plain"}, {}),
        # a MIME type the mapped events would not rebuild stays as sent
        ({"input.mime_type": "text/plain", "output.mime_type": "application/json"},
         {"input.mime_type": "text/plain", "output.mime_type": "application/json"}),
    ],
)  # fmt: skip
def test_openinference_mime_types_are_rebuilt_or_kept(sent, kept):
    request = {"type": "model_io", "direction": "request", "payload": {
        "inputMessages": [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]}}  # fmt: skip
    response = {"type": "model_io", "direction": "response", "payload": {
        "outputMessages": [{"role": "assistant", "parts": [{"type": "text", "content": "yo"}]}]}}  # fmt: skip
    attrs = dict(sent)
    split_derivable(attrs, request, response)
    assert {k: v for k, v in attrs.items() if k != DERIVED} == kept
    assert span_attributes({"attributes": attrs}, request, response) == sent
