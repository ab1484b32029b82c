"""OTLP/HTTP trace ingest: spans of an OpenTelemetry-instrumented application become trace events.

``POST /v1/traces`` (protobuf ``application/x-protobuf`` or JSON ``application/json``, the two
OTLP/HTTP encodings) with a workspace token (write scope). The run the spans belong to is named
by the span or resource attribute ``workbench.run.id`` (``lwb.run.id``, what our own export
writes, is accepted too) or the ``X-Workbench-Run`` header; it must exist in the token's
workspace (else ``UNKNOWN_RUN``, the same for another workspace's run).

GenAI semantic conventions (1.42) drive the mapping:

* a span with ``gen_ai.operation.name`` ``execute_tool`` (or a ``gen_ai.tool.name``) becomes a
  ``tool_call`` (``gen_ai.tool.call.arguments`` / ``.result`` as args and result);
* a span with another GenAI operation or a ``gen_ai.request.model`` becomes a ``model_io``
  response: provider from ``gen_ai.provider.name`` (or the older ``gen_ai.system``), model,
  usage (``gen_ai.usage.input_tokens`` is the whole prompt, ``cache_read.input_tokens`` a part
  of it; ``output_tokens`` includes ``reasoning.output_tokens``: nothing is added twice), the
  span's duration, and ``gen_ai.input.messages`` / ``gen_ai.output.messages`` in the payload;
* any other span becomes ``span_started`` / ``span_ended`` (kind, parent, status, attributes).

Events get ids derived from the trace and span ids, and spans already ingested are skipped, so
an exporter's retry does not record a span twice. All events of a request are appended in one
action (validated by the engine), in time order.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from runs.protocol.errors import ErrorCode, ProtocolError

RUN_ATTRIBUTES = ("workbench.run.id", "lwb.run.id")
KINDS = {1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}
TOOL_OPERATION = "execute_tool"


def _bad(message: str) -> ProtocolError:
    return ProtocolError(ErrorCode.INVALID_INPUT, message)


# --------------------------------------------------------------------------------------------
# Decoding both encodings into one plain shape


def _any_value(value: dict) -> Any:
    """An OTLP AnyValue in its JSON form."""
    if not isinstance(value, dict) or not value:
        return None
    (kind, inner), *_ = value.items()
    if kind == "intValue":
        return int(inner)
    if kind == "doubleValue":
        return float(inner)
    if kind == "arrayValue":
        return [_any_value(v) for v in (inner or {}).get("values", [])]
    if kind == "kvlistValue":
        return {kv["key"]: _any_value(kv.get("value", {})) for kv in (inner or {}).get("values", [])}
    return inner  # stringValue, boolValue, bytesValue


def _attributes(items: list | None) -> dict[str, Any]:
    return {kv["key"]: _any_value(kv.get("value", {})) for kv in items or [] if "key" in kv}


def spans_from_json(body: bytes) -> list[dict]:
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise ProtocolError(ErrorCode.INVALID_JSON, f"not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise _bad("an ExportTraceServiceRequest object is required")
    out = []
    for rs in doc.get("resourceSpans") or []:
        resource = _attributes((rs.get("resource") or {}).get("attributes"))
        for ss in rs.get("scopeSpans") or []:
            for span in ss.get("spans") or []:
                out.append(
                    {
                        "traceId": str(span.get("traceId") or "").lower(),
                        "spanId": str(span.get("spanId") or "").lower(),
                        "parentSpanId": str(span.get("parentSpanId") or "").lower() or None,
                        "name": span.get("name") or "",
                        "kind": int(span.get("kind") or 0) if str(span.get("kind", 0)).isdigit() else 0,
                        "start": int(span.get("startTimeUnixNano") or 0),
                        "end": int(span.get("endTimeUnixNano") or 0),
                        "attributes": _attributes(span.get("attributes")),
                        "status": int((span.get("status") or {}).get("code") or 0),
                        "statusMessage": (span.get("status") or {}).get("message"),
                        "resource": resource,
                    }
                )
    return out


def spans_from_protobuf(body: bytes) -> list[dict]:
    from google.protobuf.json_format import MessageToDict
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise _bad(f"not an OTLP protobuf ExportTraceServiceRequest: {exc}") from None
    out = []
    for rs in request.resource_spans:
        resource = _attributes(MessageToDict(rs.resource).get("attributes"))
        for ss in rs.scope_spans:
            for span in ss.spans:
                out.append(
                    {
                        "traceId": span.trace_id.hex(),
                        "spanId": span.span_id.hex(),
                        "parentSpanId": span.parent_span_id.hex() or None,
                        "name": span.name,
                        "kind": int(span.kind),
                        "start": int(span.start_time_unix_nano),
                        "end": int(span.end_time_unix_nano),
                        "attributes": _attributes(MessageToDict(span).get("attributes")),
                        "status": int(span.status.code),
                        "statusMessage": span.status.message or None,
                        "resource": resource,
                    }
                )
    return out


# --------------------------------------------------------------------------------------------
# Spans -> events (pure)


def iso(nanos: int) -> str:
    moment = datetime.fromtimestamp(nanos // 1_000_000_000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{(nanos % 1_000_000_000) // 1_000_000:03d}Z"


def run_id_of(span: dict, header: str | None) -> str | None:
    for source in (span["attributes"], span["resource"]):
        for key in RUN_ATTRIBUTES:
            if isinstance(source.get(key), str) and source[key]:
                return source[key]
    return header or None


def _json_attr(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _int(value: Any) -> int | None:
    return (
        int(value) if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0 else None
    )


def _scalar_attributes(attributes: dict) -> dict:
    return {k: v for k, v in attributes.items() if isinstance(v, str | int | float | bool)}


def event_id(span: dict, suffix: str) -> str:
    return f"otel_{span['traceId']}_{span['spanId']}_{suffix}"


def span_events(span: dict, run_id: str) -> list[tuple[int, dict]]:
    """``(time in ns, event)`` pairs for one span."""
    attrs = span["attributes"]
    base = {"runId": run_id, "correlationId": f"otel:{span['traceId']}:{span['spanId']}"}
    end, start = span["end"] or span["start"], span["start"] or span["end"]
    duration = max(0, end - start) / 1_000_000
    operation = attrs.get("gen_ai.operation.name")
    if operation == TOOL_OPERATION or (
        attrs.get("gen_ai.tool.name") and not attrs.get("gen_ai.request.model")
    ):
        event = {
            **base,
            "id": event_id(span, "tool"),
            "ts": iso(end),
            "type": "tool_call",
            "name": str(attrs.get("gen_ai.tool.name") or span["name"] or "tool"),
        }
        if "gen_ai.tool.call.arguments" in attrs:
            event["args"] = _json_attr(attrs["gen_ai.tool.call.arguments"])
        if "gen_ai.tool.call.result" in attrs:
            event["result"] = _json_attr(attrs["gen_ai.tool.call.result"])
        return [(end, event)]
    if operation or attrs.get("gen_ai.request.model"):
        event = {
            **base,
            "id": event_id(span, "model"),
            "ts": iso(end),
            "type": "model_io",
            "direction": "response",
            "durationMs": duration,
        }
        provider = attrs.get("gen_ai.provider.name") or attrs.get("gen_ai.system")
        model = attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model")
        if provider:
            event["provider"] = str(provider)
        if model:
            event["model"] = str(model)
        inp, out = _int(attrs.get("gen_ai.usage.input_tokens")), _int(attrs.get("gen_ai.usage.output_tokens"))
        if inp is not None or out is not None:
            usage = {
                "inputTokens": inp or 0,
                "outputTokens": out or 0,
                "totalTokens": (inp or 0) + (out or 0),
            }
            cached = _int(attrs.get("gen_ai.usage.cache_read.input_tokens"))
            reasoning = _int(attrs.get("gen_ai.usage.reasoning.output_tokens"))
            if cached is not None:
                usage["cachedInputTokens"] = cached
            if reasoning is not None:
                usage["reasoningTokens"] = reasoning
            event["usage"] = usage
        payload: dict[str, Any] = {
            "otel": {"traceId": span["traceId"], "spanId": span["spanId"], "name": span["name"]}
        }
        for key, name in (
            ("gen_ai.input.messages", "inputMessages"),
            ("gen_ai.output.messages", "outputMessages"),
            ("gen_ai.system_instructions", "systemInstructions"),
        ):
            if key in attrs:
                payload[name] = _json_attr(attrs[key])
        cache_write = _int(attrs.get("gen_ai.usage.cache_creation.input_tokens"))
        if cache_write is not None:
            payload["cacheCreationInputTokens"] = cache_write  # the protocol's usage has no field for it
        event["payload"] = payload
        return [(end, event)]
    started = {
        **base,
        "id": event_id(span, "start"),
        "ts": iso(start),
        "type": "span_started",
        "spanId": span["spanId"],
        "name": span["name"] or "span",
        "kind": KINDS.get(span["kind"], "internal"),
        "attributes": _scalar_attributes(attrs),
    }
    if span["parentSpanId"]:
        started["parentSpanId"] = span["parentSpanId"]
    ended = {
        **base,
        "id": event_id(span, "end"),
        "ts": iso(end),
        "type": "span_ended",
        "spanId": span["spanId"],
        "durationMs": duration,
    }
    if span["status"] == 2:
        ended["status"] = "error"
        if span.get("statusMessage"):
            ended["error"] = {"message": span["statusMessage"]}
    elif span["status"] == 1:
        ended["status"] = "ok"
    return [(start, started), (end, ended)]


def events_by_run(spans: list[dict], header_run_id: str | None) -> dict[str, list[dict]]:
    """Events per run id, each list in time order (a span's start before its end)."""
    grouped: dict[str, list[tuple[int, int, dict]]] = {}
    for index, span in enumerate(spans):
        if not span["traceId"] or not span["spanId"]:
            raise _bad(f"span {index} has no traceId or spanId")
        run_id = run_id_of(span, header_run_id)
        if run_id is None:
            raise _bad(
                "spans must name their run: attribute workbench.run.id (span or resource) "
                "or the X-Workbench-Run header"
            )
        for order, (when, event) in enumerate(span_events(span, run_id)):
            grouped.setdefault(run_id, []).append((when, index * 2 + order, event))
    return {
        run_id: [e for _w, _i, e in sorted(items, key=lambda t: (t[0], t[1]))]
        for run_id, items in grouped.items()
    }
