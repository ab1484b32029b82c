"""Ship a run's trace to an OTLP/HTTP collector through the OpenTelemetry SDK.

The spans are those of :func:`runs.protocol.otel.trace_events_to_otel_spans` (the
reference's mapping), turned into SDK ``ReadableSpan`` objects and sent with the official
``OTLPSpanExporter`` (OTLP/HTTP, protobuf). Nothing here touches Django.

Identifiers are deterministic, so exporting the same run twice yields the same trace:

* trace id = first 16 bytes of SHA-256 of the mapping's trace id (``lwb-<run id>``);
* span id = first 8 bytes of SHA-256 of ``<trace id>`` NUL ``<span id>`` (the span ids of
  the mapping, such as ``step-parse``, repeat across runs);
* the mapping's string ids travel as attributes ``lwb.trace.id`` / ``lwb.span.id``, and the
  run id as ``lwb.run.id``.

A run created from OTLP ingest (``run.metadata.otel.traceId``, see ``runs.actions.otlp``) goes
back out as the application's own trace: its original trace id, the original span ids and
parents of its spans, and the application's ``service.name``; a model or tool call recorded
from a span is folded into that span (its GenAI attributes added) instead of becoming a span of
its own, so another backend joins the export to the app's trace span for span.

Times are the events' ISO timestamps in nanoseconds. ``model_io`` spans are instants in the
mapping (the response event's time) with a ``durationMs``: here they end at the response
time and start ``durationMs`` earlier, so backends show the call's latency. Status ``ok``
and ``error`` map to OTel status codes (the error description is the span's
``exception.message``), ``unset`` stays unset.

The collector is reached through the server's one egress guard (:mod:`runs.providers.egress`):
callers pass the operator's allowance (``egress_allow``), checked before the export and again
when the connection is made.
"""

from __future__ import annotations

import calendar
import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from runs.protocol.otel import trace_events_to_otel_spans
from runs.protocol.otel_semconv import to_current_conventions
from runs.protocol.otlp_semconv_in import span_of_key
from runs.providers import egress
from runs.providers.egress_requests import guarded_session

SEMCONV_CHOICES = ("reference", "current")

SCOPE = InstrumentationScope("workbench.runs", "1.0.0")

_KINDS = {
    "internal": SpanKind.INTERNAL,
    "client": SpanKind.CLIENT,
    "server": SpanKind.SERVER,
    "producer": SpanKind.PRODUCER,
    "consumer": SpanKind.CONSUMER,
}

_ISO = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|z|[+-]\d{2}:?\d{2})$",
)


class OtlpExportError(RuntimeError):
    """The collector did not accept the spans (unreachable, timeout, or an error status), or the
    egress guard refused its address; ``code`` says which."""

    def __init__(self, message: str, code: str = "STORAGE_UNAVAILABLE") -> None:
        super().__init__(message)
        self.code = code


def iso_to_unix_nanos(text: str) -> int:
    """Nanoseconds since the epoch for an ISO 8601 timestamp with offset (exact to the ns)."""
    match = _ISO.match(text)
    if match is None:
        parsed = datetime.fromisoformat(text)
        if parsed.tzinfo is None:
            raise ValueError(f"timestamp without offset: {text!r}")
        return int(parsed.timestamp()) * 1_000_000_000 + parsed.microsecond * 1000
    year, month, day, hour, minute, second, fraction, offset = match.groups()
    seconds = calendar.timegm((int(year), int(month), int(day), int(hour), int(minute), int(second)))
    nanos = int((fraction or "0")[:9].ljust(9, "0"))
    if offset not in ("Z", "z"):
        sign = -1 if offset[0] == "-" else 1
        digits = offset[1:].replace(":", "")
        seconds -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    return seconds * 1_000_000_000 + nanos


def otel_trace_id(trace_id: str) -> int:
    """128-bit OTel trace id for the mapping's string trace id (never 0)."""
    return int.from_bytes(hashlib.sha256(trace_id.encode()).digest()[:16], "big") or 1


def otel_span_id(trace_id: str, span_id: str) -> int:
    """64-bit OTel span id for a mapping span id within its trace (never 0)."""
    digest = hashlib.sha256(trace_id.encode() + b"\x00" + span_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") or 1


def _context(trace_id: int, span_id: int) -> SpanContext:
    return SpanContext(trace_id, span_id, is_remote=False, trace_flags=TraceFlags(TraceFlags.SAMPLED))


def _status(span: Mapping[str, Any]) -> Status:
    if span["status"] == "ok":
        return Status(StatusCode.OK)
    if span["status"] == "error":
        message = span["attributes"].get("exception.message")
        return Status(StatusCode.ERROR, str(message) if message is not None else None)
    return Status(StatusCode.UNSET)


_HEX32 = re.compile(r"^[0-9a-f]{32}$")
_HEX16 = re.compile(r"^[0-9a-f]{16}$")
# model-<event id> / tool-<event id> of an event recorded from an ingested span: its span_key, or
# the hex trace and span ids of events stored before issue 53
_FROM_SPAN = re.compile(
    r"^(?:model|tool)-(?:otel_[0-9a-f]{32}_([0-9a-f]{16})|o([A-Za-z0-9_-]{32}))_(?:model|tool)$"
)


def ingested_origin(run: Mapping[str, Any]) -> tuple[str, str | None] | None:
    """``(trace id, service name)`` of a run created from an OTLP trace, else None."""
    metadata = run.get("metadata")
    otel = metadata.get("otel") if isinstance(metadata, Mapping) else None
    if not isinstance(otel, Mapping) or not _HEX32.match(str(otel.get("traceId") or "")):
        return None
    service = otel.get("serviceName")
    return otel["traceId"], service if isinstance(service, str) and service else None


def fold_ingested_calls(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Model and tool spans derived from events of an ingested span, folded into that span."""
    by_id = {record["spanId"]: record for record in records}
    out = []
    for record in records:
        found = _FROM_SPAN.match(record["spanId"])
        span = (found.group(1) or span_of_key(found.group(2))) if found else None
        origin = by_id.get(span) if span else None
        if origin is None:
            out.append(record)
            continue
        for key, value in record["attributes"].items():
            origin["attributes"].setdefault(key, value)
    return out


def to_readable_spans(
    run: Mapping[str, Any],
    events: Iterable[Mapping[str, Any]],
    *,
    service_name: str = "workbench",
    semconv: str = "reference",
) -> list[ReadableSpan]:
    """SDK spans for a run's trace events (deterministic ids, parent links, attributes).

    ``semconv="current"`` rewrites model spans to the GenAI conventions 1.42
    (:mod:`runs.protocol.otel_semconv`); the default is the reference's mapping.
    """
    if semconv not in SEMCONV_CHOICES:
        raise ValueError(f"semconv must be one of {', '.join(SEMCONV_CHOICES)}")
    events = list(events)
    records = trace_events_to_otel_spans(run, events)
    if semconv == "current":
        records = to_current_conventions(records, events)
    origin = ingested_origin(run)
    if origin is not None:
        records = fold_ingested_calls(records)
        service_name = origin[1] or service_name
    resource = Resource.create({"service.name": service_name})

    def span_id_of(trace_text: str, span_id: str) -> int:
        if origin is not None and _HEX16.match(span_id):
            return int(span_id, 16)  # the application's own span id
        return otel_span_id(trace_text, span_id)

    spans = []
    for record in records:
        trace_text = record["traceId"]
        trace_id = int(origin[0], 16) if origin is not None else otel_trace_id(trace_text)
        parent = record.get("parentSpanId")
        end = iso_to_unix_nanos(record["endTimeIso"])
        start = iso_to_unix_nanos(record["startTimeIso"])
        duration = record.get("durationMs")
        if start == end and isinstance(duration, int | float) and 0 < duration < 1e15:
            start = end - int(duration * 1_000_000)
        attributes = dict(record["attributes"])
        attributes["lwb.run.id"] = run["id"]
        attributes["lwb.trace.id"] = trace_text
        attributes["lwb.span.id"] = record["spanId"]
        if parent is not None:
            attributes["lwb.parent_span.id"] = parent
        spans.append(
            ReadableSpan(
                name=record["name"],
                context=_context(trace_id, span_id_of(trace_text, record["spanId"])),
                parent=_context(trace_id, span_id_of(trace_text, parent)) if parent is not None else None,
                resource=resource,
                attributes=attributes,
                events=[
                    Event(
                        event["name"],
                        dict(event.get("attributes") or {}),
                        iso_to_unix_nanos(event["timeIso"]),
                    )
                    for event in record["events"]
                ],
                kind=_KINDS.get(record["kind"], SpanKind.INTERNAL),
                status=_status(record),
                start_time=start,
                end_time=end,
                instrumentation_scope=SCOPE,
            )
        )
    return spans


def traces_endpoint(endpoint: str) -> str:
    """The OTLP/HTTP traces URL: a bare collector URL gets the ``/v1/traces`` path."""
    parts = urlsplit(endpoint)
    if parts.path in ("", "/"):
        return urlunsplit(parts._replace(path="/v1/traces"))
    return endpoint


def exporter_for(
    url: str, *, headers: Mapping[str, str] | None, timeout: float, egress_allow: Sequence[str]
) -> OTLPSpanExporter:
    """The official exporter, sending through a session under the egress guard."""
    return OTLPSpanExporter(
        endpoint=url, headers=dict(headers or {}), timeout=timeout, session=guarded_session(egress_allow)
    )


def export_run_to_otlp(
    run: Mapping[str, Any],
    events: Iterable[Mapping[str, Any]],
    *,
    endpoint: str,
    headers: Mapping[str, str] | None = None,
    timeout: float = 10,
    service_name: str = "workbench",
    semconv: str = "reference",
    egress_allow: Sequence[str] = (),
) -> int:
    """Send a run's trace as OTel spans to an OTLP/HTTP endpoint; returns the span count.

    Raises :class:`OtlpExportError` when the collector does not accept them, or when the egress
    guard refuses its address (``egress_allow``: what the operator allows beyond public addresses).
    """
    url = traces_endpoint(endpoint)
    try:
        egress.check_destination(url, egress_allow)
    except egress.EgressRefused as exc:
        raise OtlpExportError(exc.message, exc.code) from None
    spans = to_readable_spans(run, events, service_name=service_name, semconv=semconv)
    if not spans:
        return 0
    exporter = exporter_for(url, headers=headers, timeout=timeout, egress_allow=egress_allow)
    try:
        result = exporter.export(spans)
    finally:
        exporter.shutdown()
    if result is not SpanExportResult.SUCCESS:
        raise OtlpExportError(f"OTLP export of {len(spans)} span(s) to {endpoint} failed")
    return len(spans)
