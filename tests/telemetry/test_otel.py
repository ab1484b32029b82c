"""Trace events -> OTel span records, against the reference's outputs and targeted cases."""

from __future__ import annotations

import json

import pytest

from runs.protocol.otel import js_stringify, trace_events_to_otel_spans
from tests.telemetry.corpus import bundle_names, load_bundle, load_expected, same_json


@pytest.mark.parametrize("name", bundle_names("otel"))
def test_spans_equal_reference(name):
    bundle = load_bundle(name)
    expected = load_expected(name, "otel")
    same_json(trace_events_to_otel_spans(bundle["run"], bundle["trace"]), expected["result"])


RUN = {"id": "run_x"}


def _event(n, event_type, **fields):
    return {
        "id": f"e{n}",
        "runId": "run_x",
        "ts": f"2026-01-01T00:00:{n:02d}.000Z",
        "type": event_type,
        **fields,
    }


def test_model_and_tool_spans_are_parented_to_the_innermost_open_span():
    events = [
        _event(1, "span_started", spanId="outer", name="agent"),
        _event(2, "step_started", stepId="s1"),
        _event(3, "model_io", direction="request", provider="openai", model="gpt"),
        _event(4, "model_io", direction="response", provider="openai", model="gpt",
               usage={"inputTokens": 1, "outputTokens": 2}, cost={"amount": 0.5, "currency": "USD"}),
        _event(5, "step_completed", stepId="s1", ok=True),
        _event(6, "tool_call", name="search", args={"q": "x"}),
        _event(7, "span_ended", spanId="outer"),
    ]  # fmt: skip
    spans = {s["spanId"]: s for s in trace_events_to_otel_spans(RUN, events)}
    assert list(spans) == ["model-e4", "step-s1", "tool-e6", "outer"]
    assert spans["model-e4"]["parentSpanId"] == "step-s1"
    assert spans["model-e4"]["name"] == "gen_ai.chat gpt"
    assert spans["model-e4"]["kind"] == "client"
    assert spans["model-e4"]["attributes"] == {
        "gen_ai.system": "openai",
        "gen_ai.response.model": "gpt",
        "gen_ai.request.model": "gpt",
        "gen_ai.usage.input_tokens": 1,
        "gen_ai.usage.output_tokens": 2,
        "gen_ai.usage.cost.amount": 0.5,
        "gen_ai.usage.cost.currency": "USD",
    }
    assert spans["step-s1"]["parentSpanId"] == "outer"
    assert spans["step-s1"]["events"] == [
        {
            "name": "gen_ai.client.message",
            "timeIso": "2026-01-01T00:00:03.000Z",
            "attributes": {
                "gen_ai.message.direction": "request",
                "gen_ai.system": "openai",
                "gen_ai.request.model": "gpt",
            },
        }
    ]
    assert spans["tool-e6"]["parentSpanId"] == "outer"
    assert spans["tool-e6"]["attributes"] == {"gen_ai.tool.name": "search"}
    assert spans["outer"]["status"] == "ok" and "parentSpanId" not in spans["outer"]
    assert spans["outer"]["traceId"] == "lwb-run_x"


def test_unclosed_spans_end_at_the_last_event_unset_and_orphan_events_are_dropped():
    events = [
        _event(1, "annotation", text="before any span"),
        _event(2, "span_started", spanId="a", name="a", kind="server"),
        _event(3, "span_ended", spanId="nope", status="error"),
        _event(4, "error", message="boom", fatal=True),
        _event(9, "annotation", text="late", tags=["t"]),
    ]
    [span] = trace_events_to_otel_spans("run_x", events)
    assert span["endTimeIso"] == "2026-01-01T00:00:09.000Z"
    assert span["status"] == "unset" and span["kind"] == "server"
    assert "durationMs" not in span
    assert [e["name"] for e in span["events"]] == ["exception", "annotation"]
    assert span["events"][0]["attributes"] == {"exception.message": "boom", "exception.fatal": True}
    assert span["events"][1]["attributes"]["tags"] == '["t"]'


def test_span_end_sets_duration_status_attributes_and_error():
    events = [
        _event(1, "span_started", spanId="a", name="a", attributes={"k": "v", "gone": None, "obj": {"x": [1, 2.5]}}),
        _event(2, "span_ended", spanId="a", durationMs=1.5, attributes={"n": 3}, status="error",
               error={"message": "bad", "code": "E1"}),
    ]  # fmt: skip
    [span] = trace_events_to_otel_spans(RUN, events)
    assert span["attributes"] == {
        "k": "v",
        "obj": '{"x":[1,2.5]}',
        "n": 3,
        "exception.message": "bad",
        "exception.code": "E1",
    }
    assert (span["status"], span["durationMs"], span["endTimeIso"]) == (
        "error",
        1.5,
        "2026-01-01T00:00:02.000Z",
    )
    assert list(span)[-1] == "durationMs"  # set on close, as the reference adds it last


def test_js_stringify_matches_javascript():
    value = {
        "b": 1.0,
        "a": [1e-7, 5e21, 123.456, -0.0, 2**53 + 2],
        "s": 'é\u2028\x01"\\\n',
        "n": None,
        "t": True,
    }
    assert js_stringify(value) == (
        '{"b":1,"a":[1e-7,5e+21,123.456,0,9007199254740994],"s":"é\u2028\\u0001\\"\\\\\\n","n":null,"t":true}'
    )
    assert js_stringify(float("inf")) == "null"
    assert js_stringify("\ud800") == '"\\ud800"'
    assert json.loads(js_stringify({"k": [1, {"x": "y"}]})) == {"k": [1, {"x": "y"}]}


def _scrambled(value, depth=0):
    """The same JSON with every object's keys reversed (and an unknown key added at the top)."""
    if isinstance(value, dict):
        out = {k: _scrambled(v, depth + 1) for k, v in reversed(list(value.items()))}
        if depth == 0:
            out["vendorExtra"] = {"b": 1, "a": 2}
        return out
    if isinstance(value, list):
        return [_scrambled(v, depth + 1) for v in value]
    return value


@pytest.mark.parametrize("name", bundle_names("otel"))
def test_stringified_events_use_the_reference_field_order_whatever_the_source_order(name):
    """The reference parses events (zod: schema order, unknown keys dropped) before printing
    them as attributes; the source file's key order must not show."""
    bundle = load_bundle(name)
    expected = load_expected(name, "otel")
    trace = [_scrambled(event) for event in bundle["trace"]]
    # open-ended values (data, payload, args, attributes) keep their own order in the reference
    for scrambled, original in zip(trace, bundle["trace"], strict=True):
        for key in ("payload", "args", "result", "attributes"):
            if key in original:
                scrambled[key] = original[key]
        if "artifact" in original and "data" in original["artifact"]:
            scrambled["artifact"]["data"] = original["artifact"]["data"]
        if "patch" in original:
            for op, source in zip(scrambled["patch"], original["patch"], strict=True):
                if "value" in source:
                    op["value"] = source["value"]
        if "snapshot" in original:
            for rule, source in zip(
                scrambled["snapshot"]["rules"], original["snapshot"]["rules"], strict=True
            ):
                rule["payload"] = source["payload"]
    same_json(trace_events_to_otel_spans(bundle["run"], trace), expected["result"])
