"""OTLP/HTTP ingest: the two encodings (protobuf, JSON) of traces and logs decoded into the plain
shapes :mod:`runs.protocol.otlp_map` maps, and the answers OTLP expects.

``POST /v1/traces`` and ``POST /v1/logs`` (``runs/api/otlp.py``) decode here, then call
``runs.actions.otlp`` (the write path: routing, runs created per trace, pricing, appends).

Decoded span: ``{traceId, spanId, parentSpanId, name, kind, start, end, status, statusMessage,
attributes, events: [{name, time, attributes}], resource}`` (ids as lowercase hex, times in ns).
Decoded log record: ``{traceId, spanId, time, eventName, attributes, body}``.

One malformed span or record never refuses the request: what cannot be decoded becomes an entry
with ``decodeProblem`` (refused on its own and counted in the response's ``partial_success``);
only a body that is not an export request at all (not protobuf, not JSON, too deep) is a 400.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from runs.protocol.errors import ErrorCode, ProtocolError
from runs.protocol.otlp_map import load_otlp_json


def _bad(message: str) -> ProtocolError:
    return ProtocolError(ErrorCode.INVALID_INPUT, message)


# --------------------------------------------------------------------------------------------
# Protobuf


def _pb_value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        return value.double_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "array_value":
        return [_pb_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _pb_value(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode()  # as OTLP/JSON spells bytes
    return None


def _pb_attributes(items: Any) -> dict[str, Any]:
    return {kv.key: _pb_value(kv.value) for kv in items}


def spans_from_protobuf(body: bytes) -> list[dict]:
    # Deferred: the protobuf runtime costs start-up time every process would pay (tests/ops/test_startup).
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise _bad(f"not an OTLP protobuf ExportTraceServiceRequest: {exc}") from None
    out = []
    for rs in request.resource_spans:
        resource = _pb_attributes(rs.resource.attributes)
        for ss in rs.scope_spans:
            for span in ss.spans:
                status = span.status
                out.append(
                    {
                        "traceId": span.trace_id.hex(),
                        "spanId": span.span_id.hex(),
                        "parentSpanId": span.parent_span_id.hex() or None,
                        "name": span.name,
                        "kind": span.kind,
                        "start": span.start_time_unix_nano,
                        "end": span.end_time_unix_nano,
                        "attributes": _pb_attributes(span.attributes),
                        "status": status.code,
                        "statusMessage": status.message or None,
                        "events": [
                            {
                                "name": e.name,
                                "time": e.time_unix_nano,
                                "attributes": _pb_attributes(e.attributes),
                            }
                            for e in span.events
                        ],
                        "resource": resource,
                    }
                )
    return out


_ZERO_TRACE, _ZERO_SPAN = bytes(16), bytes(8)
_MAX_NS = 253402300799 * 1_000_000_000  # as runs.protocol.otlp_map checks a decoded span's times


def spoolable_protobuf_spans(body: bytes) -> int | None:
    """How many spans a protobuf body holds when the queue may spool it as it came, its spans
    decoded, mapped and checked by the worker (runs/actions/otlp_queue.py, :func:`do_queue_body`):
    the body parses as an ``ExportTraceServiceRequest`` (else :class:`ProtocolError`, a 400), names
    no run (no ``workbench.`` attribute anywhere: routing then needs no lookup) and every span has
    what :func:`runs.protocol.otlp_map.span_problem` asks of a protobuf span (ids of 16 and 8
    bytes, not all zero; a start or an end time an ISO timestamp can hold). ``None``: some span
    would be refused, or one names a run, so the request takes the full check (each refusal
    counted in the answer's ``partial_success``)."""
    # Deferred: the protobuf runtime costs start-up time (tests/ops/test_startup).
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise _bad(f"not an OTLP protobuf ExportTraceServiceRequest: {exc}") from None
    if b"workbench." in body:  # a run named by an attribute (or a lookalike): the full check
        return None
    count = 0
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                trace_id, span_id = span.trace_id, span.span_id
                start, end = span.start_time_unix_nano, span.end_time_unix_nano
                if (
                    len(trace_id) != 16
                    or len(span_id) != 8
                    or trace_id == _ZERO_TRACE
                    or span_id == _ZERO_SPAN
                    or start > _MAX_NS
                    or end > _MAX_NS
                    or not (start or end)
                ):
                    return None
                count += 1
    return count


def logs_from_protobuf(body: bytes) -> list[dict]:
    # Deferred: the protobuf runtime costs start-up time (tests/ops/test_startup).
    from google.protobuf.message import DecodeError
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

    request = ExportLogsServiceRequest()
    try:
        request.ParseFromString(body)
    except DecodeError as exc:
        raise _bad(f"not an OTLP protobuf ExportLogsServiceRequest: {exc}") from None
    out = []
    for rl in request.resource_logs:
        for sl in rl.scope_logs:
            for record in sl.log_records:
                out.append(
                    {
                        "traceId": record.trace_id.hex(),
                        "spanId": record.span_id.hex(),
                        "time": record.time_unix_nano or record.observed_time_unix_nano,
                        "eventName": record.event_name or None,
                        "attributes": _pb_attributes(record.attributes),
                        "body": _pb_value(record.body) if record.HasField("body") else None,
                    }
                )
    return out


# --------------------------------------------------------------------------------------------
# JSON (OTLP/JSON: ids as hex, 64-bit integers as decimal text)


def _json_value(value: Any) -> Any:
    if not isinstance(value, Mapping) or not value:
        return None
    kind, inner = next(iter(value.items()))
    if kind == "intValue":
        return int(inner)
    if kind == "doubleValue":
        return float(inner)
    if kind == "arrayValue":
        return [_json_value(v) for v in (inner or {}).get("values") or ()]
    if kind == "kvlistValue":
        return _json_attributes((inner or {}).get("values"))
    return inner  # stringValue, boolValue, bytesValue (base64 text)


def _json_attributes(items: Any) -> dict[str, Any]:
    if items is None:
        return {}
    if not isinstance(items, list):
        raise ValueError("attributes must be a list")
    return {
        kv["key"]: _json_value(kv.get("value")) for kv in items if isinstance(kv, Mapping) and "key" in kv
    }


def _nanos(value: Any) -> Any:
    """A ``fixed64`` time (text or number) as an int; anything else as it is (refused later)."""
    if value is None or value == "":
        return 0
    if type(value) is int:
        return value
    if type(value) is str and value.isdigit():
        return int(value)
    return value


def _hex(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


def _json_span(span: Any, resource: dict) -> dict:
    if not isinstance(span, Mapping):
        return {"decodeProblem": "a span must be an object"}
    try:
        status = span.get("status") or {}
        kind = span.get("kind", 0)
        return {
            "traceId": _hex(span.get("traceId")),
            "spanId": _hex(span.get("spanId")),
            "parentSpanId": _hex(span.get("parentSpanId")) or None,
            "name": span.get("name") or "",
            "kind": kind if type(kind) is int else 0,
            "start": _nanos(span.get("startTimeUnixNano")),
            "end": _nanos(span.get("endTimeUnixNano")),
            "attributes": _json_attributes(span.get("attributes")),
            "status": int(status.get("code") or 0) if isinstance(status, Mapping) else 0,
            "statusMessage": status.get("message") if isinstance(status, Mapping) else None,
            "events": [
                {
                    "name": e.get("name"),
                    "time": _nanos(e.get("timeUnixNano")),
                    "attributes": _json_attributes(e.get("attributes")),
                }
                for e in span.get("events") or ()
                if isinstance(e, Mapping)
            ],
            "resource": resource,
        }
    except (ValueError, TypeError, AttributeError, KeyError) as exc:
        return {"decodeProblem": f"cannot decode the span: {exc}"}


def _resource(item: Mapping) -> dict:
    try:
        return _json_attributes((item.get("resource") or {}).get("attributes"))
    except (ValueError, TypeError, AttributeError):
        return {}


def spans_from_json(body: bytes) -> list[dict]:
    doc = load_otlp_json(body)
    if not isinstance(doc, Mapping) or not isinstance(doc.get("resourceSpans", []), list):
        raise _bad("an ExportTraceServiceRequest object is required")
    out = []
    for rs in doc.get("resourceSpans") or ():
        if not isinstance(rs, Mapping):
            out.append({"decodeProblem": "resourceSpans items must be objects"})
            continue
        resource = _resource(rs)
        for ss in rs.get("scopeSpans") or ():
            for span in (ss.get("spans") if isinstance(ss, Mapping) else None) or ():
                out.append(_json_span(span, resource))
    return out


def logs_from_json(body: bytes) -> list[dict]:
    doc = load_otlp_json(body)
    if not isinstance(doc, Mapping) or not isinstance(doc.get("resourceLogs", []), list):
        raise _bad("an ExportLogsServiceRequest object is required")
    out: list[dict] = []
    for rl in doc.get("resourceLogs") or ():
        for sl in (rl.get("scopeLogs") if isinstance(rl, Mapping) else None) or ():
            for record in (sl.get("logRecords") if isinstance(sl, Mapping) else None) or ():
                try:
                    out.append(
                        {
                            "traceId": _hex(record.get("traceId")) or "",
                            "spanId": _hex(record.get("spanId")) or "",
                            "time": _nanos(record.get("timeUnixNano") or record.get("observedTimeUnixNano")),
                            "eventName": record.get("eventName") or None,
                            "attributes": _json_attributes(record.get("attributes")),
                            "body": _json_value(record.get("body")),
                        }
                    )
                except (ValueError, TypeError, AttributeError) as exc:
                    out.append({"decodeProblem": f"cannot decode the log record: {exc}"})
    return out


# --------------------------------------------------------------------------------------------
# Answers


def trace_response(protobuf: bool, rejected: int, message: str | None) -> tuple[bytes | dict, str]:
    """The ``ExportTraceServiceResponse`` (``partial_success`` only when something was refused or
    a warning is due), in the request's encoding."""
    if protobuf:
        # Deferred: start-up cost (tests/ops/test_startup); a protobuf request has loaded it already.
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

        response = ExportTraceServiceResponse()
        if rejected or message:
            response.partial_success.rejected_spans = rejected
            response.partial_success.error_message = message or ""
        return response.SerializeToString(), "application/x-protobuf"
    if not rejected and not message:
        return {}, "application/json"
    return {
        "partialSuccess": {"rejectedSpans": str(rejected), "errorMessage": message or ""}
    }, "application/json"


def logs_response(protobuf: bool, rejected: int, message: str | None) -> tuple[bytes | dict, str]:
    if protobuf:
        # Deferred: start-up cost (tests/ops/test_startup); a protobuf request has loaded it already.
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse

        response = ExportLogsServiceResponse()
        if rejected or message:
            response.partial_success.rejected_log_records = rejected
            response.partial_success.error_message = message or ""
        return response.SerializeToString(), "application/x-protobuf"
    if not rejected and not message:
        return {}, "application/json"
    return {
        "partialSuccess": {"rejectedLogRecords": str(rejected), "errorMessage": message or ""}
    }, "application/json"
