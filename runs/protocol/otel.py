"""Trace events -> OpenTelemetry GenAI span records (the reference's ``traceEventsToOtelSpans``).

The output is a list of plain dicts, equal to the reference's output for the same events:

``{traceId, spanId, parentSpanId?, name, startTimeIso, endTimeIso, durationMs?, status,
kind, attributes, events: [{name, timeIso, attributes}]}``

How events map (one pass, in trace order; "the open span" is the most recently opened
span not yet closed):

* ``span_started`` opens a span (``kind`` default ``internal``, status ``unset``); its
  parent is the event's ``parentSpanId`` or else the open span. ``span_ended`` closes it:
  end time, ``durationMs``, status (default ``ok``), extra attributes, and an ``error``
  as ``exception.message`` / ``exception.code`` attributes. An end for a span that is not
  open is ignored.
* ``step_started`` / ``step_completed`` open and close a span ``step-<stepId>`` named
  ``step <stepId>`` (status ``ok`` or ``error``).
* ``model_io`` with direction ``response`` becomes a finished ``client`` span
  ``model-<eventId>`` named ``gen_ai.chat <model>`` with the GenAI attributes; other
  directions become a ``gen_ai.client.message`` span event on the open span.
* ``tool_call`` becomes a finished ``client`` span ``tool-<eventId>``
  (``gen_ai.tool <name>``, attribute ``gen_ai.tool.name``).
* ``error`` becomes an ``exception`` span event; any other event becomes a span event
  named after its type carrying all its fields. Span events with no open span are dropped.
* Spans still open at the end are closed at the last event's timestamp, status ``unset``.

Spans are listed in the order they finish. Attribute values that are objects or arrays
are JSON text exactly as JavaScript's ``JSON.stringify`` writes them; an event that becomes a
span event is first rebuilt in the reference's field order (``runs.protocol.shapes``: zod's
schema order, unknown keys dropped), since that order shows in the stringified attributes.
``null`` attributes are dropped.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from runs.protocol.canonical import js_number
from runs.protocol.shapes import event_in_reference_order

TRACE_ID_PREFIX = "lwb-"

AttributeValue = str | int | float | bool


# --- JSON.stringify ------------------------------------------------------------------

_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _js_quote(text: str) -> str:
    parts = ['"']
    for ch in text:
        code = ord(ch)
        if ch in _SHORT_ESCAPES:
            parts.append(_SHORT_ESCAPES[ch])
        elif code < 0x20 or 0xD800 <= code <= 0xDFFF:
            # Controls, and lone surrogates (well-formed JSON.stringify escapes them).
            parts.append(f"\\u{code:04x}")
        else:
            parts.append(ch)
    parts.append('"')
    return "".join(parts)


def js_stringify(value: Any) -> str:
    """``JSON.stringify(value)`` as JavaScript writes it (compact, key order kept).

    Non-finite numbers are written as ``null``, like JavaScript does.
    """
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _js_quote(value)
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            return "null"
        return js_number(value)
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{_js_quote(str(k))}:{js_stringify(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(js_stringify(item) for item in value) + "]"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def attribute_value(value: Any) -> AttributeValue | None:
    """An OTel attribute value: scalars as they are, objects/arrays as JSON text, null dropped."""
    if value is None:
        return None
    if isinstance(value, str | bool | int | float):
        return value
    return js_stringify(value)


def flatten_attributes(attributes: Mapping[str, Any] | None) -> dict[str, AttributeValue]:
    out: dict[str, AttributeValue] = {}
    if not attributes:
        return out
    for key, value in attributes.items():
        converted = attribute_value(value)
        if converted is not None:
            out[key] = converted
    return out


# --- the mapping ---------------------------------------------------------------------


def _new_span(
    trace_id: str,
    span_id: str,
    parent: str | None,
    name: str,
    ts: str,
    *,
    status: str,
    kind: str,
    attributes: dict[str, AttributeValue],
    duration_ms: Any = None,
) -> dict[str, Any]:
    span: dict[str, Any] = {"traceId": trace_id, "spanId": span_id}
    if parent is not None:
        span["parentSpanId"] = parent
    span["name"] = name
    span["startTimeIso"] = ts
    span["endTimeIso"] = ts
    if duration_ms is not None:
        span["durationMs"] = duration_ms
    span["status"] = status
    span["kind"] = kind
    span["attributes"] = attributes
    span["events"] = []
    return span


def _apply_error(span: dict[str, Any], error: Mapping[str, Any] | None) -> None:
    if error:
        span["attributes"]["exception.message"] = error.get("message")
        if error.get("code"):
            span["attributes"]["exception.code"] = error["code"]


def _model_attributes(event: Mapping[str, Any]) -> dict[str, AttributeValue]:
    attributes: dict[str, AttributeValue] = {}
    provider = event.get("provider")
    model = event.get("model")
    if provider:
        attributes["gen_ai.system"] = provider
    if model:
        attributes["gen_ai.response.model"] = model
        attributes["gen_ai.request.model"] = model
    usage = event.get("usage") or {}
    for field, name in (
        ("inputTokens", "gen_ai.usage.input_tokens"),
        ("outputTokens", "gen_ai.usage.output_tokens"),
        ("totalTokens", "gen_ai.usage.total_tokens"),
    ):
        if usage.get(field) is not None:
            attributes[name] = usage[field]
    cost = event.get("cost")
    if cost:
        attributes["gen_ai.usage.cost.amount"] = cost.get("amount")
        attributes["gen_ai.usage.cost.currency"] = cost.get("currency")
    if event.get("summary"):
        attributes["gen_ai.response.summary"] = event["summary"]
    return attributes


class _SpanBuilder:
    def __init__(self, trace_id: str) -> None:
        self.trace_id = trace_id
        self.open: dict[str, dict[str, Any]] = {}
        self.stack: list[str] = []
        self.out: list[dict[str, Any]] = []
        self.last_ts = ""

    def top(self) -> dict[str, Any] | None:
        for span_id in reversed(self.stack):
            span = self.open.get(span_id)
            if span is not None:
                return span
        return None

    def top_id(self) -> str | None:
        span = self.top()
        return span["spanId"] if span is not None else None

    def record_event(self, name: str, ts: str, attributes: Mapping[str, Any]) -> None:
        parent = self.top()
        if parent is not None:
            parent["events"].append(
                {"name": name, "timeIso": ts, "attributes": flatten_attributes(attributes)}
            )

    def start(self, span: dict[str, Any]) -> None:
        # Re-opening an open id replaces it in place: a JavaScript Map keeps a re-set key at
        # its first position, and so does a dict.
        self.open[span["spanId"]] = span
        self.stack.append(span["spanId"])

    def finish(self, span_id: str) -> None:
        span = self.open.pop(span_id, None)
        if span is None:
            return
        self.out.append(span)
        for index in range(len(self.stack) - 1, -1, -1):
            if self.stack[index] == span_id:
                del self.stack[index]
                break

    def feed(self, event: Mapping[str, Any]) -> None:
        ts = event["ts"]
        self.last_ts = ts
        kind = event.get("type")
        span: dict[str, Any] | None  # a new span, or the open one an event closes (None: not open)
        if kind == "span_started":
            span_id = event["spanId"]
            parent = event.get("parentSpanId")
            span = _new_span(
                self.trace_id,
                span_id,
                parent if parent is not None else self.top_id(),
                event["name"],
                ts,
                status="unset",
                kind=event.get("kind") or "internal",
                attributes=flatten_attributes(event.get("attributes")),
            )
            self.start(span)
        elif kind == "span_ended":
            span = self.open.get(event["spanId"])
            if span is not None:
                span["endTimeIso"] = ts
                if event.get("durationMs") is not None:
                    span["durationMs"] = event["durationMs"]
                span["status"] = event.get("status") or "ok"
                if event.get("attributes"):
                    span["attributes"].update(flatten_attributes(event["attributes"]))
                _apply_error(span, event.get("error"))
                self.finish(event["spanId"])
        elif kind == "model_io":
            if event.get("direction") != "response":
                self.record_event(
                    "gen_ai.client.message",
                    ts,
                    {
                        "gen_ai.message.direction": event.get("direction"),
                        "gen_ai.system": event.get("provider"),
                        "gen_ai.request.model": event.get("model"),
                    },
                )
                return
            model = event.get("model")
            self.out.append(
                _new_span(
                    self.trace_id,
                    f"model-{event['id']}",
                    self.top_id(),
                    f"gen_ai.chat {model}" if model else "gen_ai.chat",
                    ts,
                    status="ok",
                    kind="client",
                    attributes=_model_attributes(event),
                    duration_ms=event.get("durationMs"),
                )
            )
        elif kind == "tool_call":
            self.out.append(
                _new_span(
                    self.trace_id,
                    f"tool-{event['id']}",
                    self.top_id(),
                    f"gen_ai.tool {event['name']}",
                    ts,
                    status="ok",
                    kind="client",
                    attributes={"gen_ai.tool.name": event["name"]},
                )
            )
        elif kind == "step_started":
            step_id = event["stepId"]
            span = _new_span(
                self.trace_id,
                f"step-{step_id}",
                self.top_id(),
                f"step {step_id}",
                ts,
                status="unset",
                kind="internal",
                attributes={"lwb.step.id": step_id},
            )
            self.start(span)
        elif kind == "step_completed":
            span_id = f"step-{event['stepId']}"
            span = self.open.get(span_id)
            if span is not None:
                span["endTimeIso"] = ts
                span["status"] = "ok" if event.get("ok") else "error"
                _apply_error(span, event.get("error"))
                self.finish(span_id)
        elif kind == "error":
            self.record_event(
                "exception",
                ts,
                {
                    "exception.message": event.get("message"),
                    "exception.code": event.get("code"),
                    "exception.fatal": event.get("fatal"),
                },
            )
        else:
            # the whole event as attributes: objects print in the reference's field order
            self.record_event(str(kind), ts, event_in_reference_order(event))

    def close(self) -> list[dict[str, Any]]:
        for span_id in list(self.open):
            span = self.open[span_id]
            span["endTimeIso"] = self.last_ts or span["startTimeIso"]
            self.finish(span_id)
        return self.out


def trace_events_to_otel_spans(
    run: Mapping[str, Any] | str, events: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """OTel span records for a run's trace events (see the module doc).

    ``run`` is the run dict (or its id); the trace id is ``lwb-<run id>``.
    """
    run_id = run if isinstance(run, str) else run["id"]
    builder = _SpanBuilder(f"{TRACE_ID_PREFIX}{run_id}")
    for event in events:
        builder.feed(event)
    return builder.close()
