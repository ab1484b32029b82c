"""OTLP/HTTP export through the OpenTelemetry SDK, received by a loopback collector."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from runs.protocol.otel import trace_events_to_otel_spans
from runs.telemetry.otel_export import (
    OtlpExportError,
    export_run_to_otlp,
    iso_to_unix_nanos,
    otel_span_id,
    otel_trace_id,
    traces_endpoint,
)
from tests.telemetry.corpus import load_bundle, needs_corpus

LOOPBACK = ("127.0.0.0/8",)  # the collector fakes listen on loopback: the operator allows it


class Collector:
    """A tiny OTLP/HTTP traces receiver on 127.0.0.1 that keeps the decoded requests."""

    def __init__(self, status: int = 200) -> None:
        self.status = status
        self.requests: list[tuple[str, dict[str, str], ExportTraceServiceRequest]] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server API)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                collector.requests.append(
                    (self.path, {k.lower(): v for k, v in self.headers.items()}, request)
                )
                payload = ExportTraceServiceResponse().SerializeToString()
                self.send_response(collector.status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def spans(self) -> list[Span]:
        return [
            span
            for _, _, request in self.requests
            for resource_spans in request.resource_spans
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
        ]


@pytest.fixture
def collector() -> Iterator[Collector]:
    receiver = Collector()
    receiver.thread.start()
    try:
        yield receiver
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()


def _attributes(span: Span) -> dict:
    out = {}
    for kv in span.attributes:
        field = kv.value.WhichOneof("value")
        out[kv.key] = getattr(kv.value, field)
    return out


@needs_corpus
def test_spans_arrive_with_ids_parents_times_attributes_and_status(collector):
    bundle = load_bundle("spans_nested_with_model_and_tools")
    run, trace = bundle["run"], bundle["trace"]
    records = trace_events_to_otel_spans(run, trace)

    sent = export_run_to_otlp(
        run, trace, endpoint=collector.url, headers={"x-api-key": "k1"}, timeout=5, egress_allow=LOOPBACK
    )

    assert sent == len(records) == 10
    [(path, headers, request)] = collector.requests
    assert path == "/v1/traces"
    assert headers.get("x-api-key") == "k1"
    assert headers.get("content-type") == "application/x-protobuf"
    resource = {kv.key: kv.value.string_value for kv in request.resource_spans[0].resource.attributes}
    assert resource["service.name"] == "workbench"
    assert request.resource_spans[0].scope_spans[0].scope.name == "workbench.runs"

    trace_id = otel_trace_id(f"lwb-{run['id']}").to_bytes(16, "big")
    received = {_attributes(span)["lwb.span.id"]: span for span in collector.spans()}
    assert set(received) == {r["spanId"] for r in records}
    for record in records:
        span = received[record["spanId"]]
        attributes = _attributes(span)
        assert span.trace_id == trace_id
        assert span.span_id == otel_span_id(record["traceId"], record["spanId"]).to_bytes(8, "big")
        assert span.name == record["name"]
        expected_parent = record.get("parentSpanId")
        if expected_parent is None:
            assert span.parent_span_id == b""
        else:
            assert span.parent_span_id == otel_span_id(record["traceId"], expected_parent).to_bytes(8, "big")
        assert span.end_time_unix_nano == iso_to_unix_nanos(record["endTimeIso"])
        assert attributes["lwb.run.id"] == run["id"]
        for key, value in record["attributes"].items():
            assert attributes[key] == value

    model = received["model-evt_17474b78-5ae0-4d18-a692-2808f88b8f81"]
    assert model.kind == Span.SPAN_KIND_CLIENT
    assert _attributes(model)["gen_ai.usage.input_tokens"] == 10
    assert _attributes(model)["gen_ai.usage.cost.amount"] == pytest.approx(0.0001)
    # An instant in the mapping; the exported span covers its durationMs (120.75 ms).
    assert model.end_time_unix_nano - model.start_time_unix_nano == 120_750_000

    root = received["span_e1e1cc21-5bb5-454a-a35c-b9656ceeaebe"]
    assert root.kind == Span.SPAN_KIND_SERVER
    assert root.status.code == Status.STATUS_CODE_ERROR
    assert root.status.message == "one step failed"
    assert [(e.name, e.time_unix_nano) for e in root.events] == [
        ("exception", iso_to_unix_nanos("2026-03-02T06:00:00.140Z"))
    ]
    assert received["step-parse"].status.code == Status.STATUS_CODE_OK


@needs_corpus
def test_export_is_deterministic_across_calls(collector):
    bundle = load_bundle("linear_completed")
    export_run_to_otlp(
        bundle["run"], bundle["trace"], endpoint=collector.url + "/v1/traces", egress_allow=LOOPBACK
    )
    export_run_to_otlp(bundle["run"], bundle["trace"], endpoint=collector.url, egress_allow=LOOPBACK)
    first, second = (r.SerializeToString() for _, _, r in collector.requests)
    assert first == second


def test_a_rejecting_collector_raises():
    receiver = Collector(status=400)
    receiver.thread.start()
    try:
        run = {"id": "run_r"}
        events = [
            {"id": "e1", "runId": "run_r", "ts": "2026-01-01T00:00:00Z", "type": "tool_call", "name": "t"}
        ]
        with pytest.raises(OtlpExportError):
            export_run_to_otlp(run, events, endpoint=receiver.url, timeout=5, egress_allow=LOOPBACK)
        assert len(receiver.requests) == 1
    finally:
        receiver.server.shutdown()
        receiver.server.server_close()


def test_nothing_is_sent_for_a_trace_without_spans(collector):
    assert export_run_to_otlp({"id": "run_e"}, [], endpoint=collector.url, egress_allow=LOOPBACK) == 0
    assert collector.requests == []


def test_timestamps_and_endpoints():
    assert iso_to_unix_nanos("1970-01-01T00:00:01.5Z") == 1_500_000_000
    assert iso_to_unix_nanos("1970-01-01T02:00:00.000000001+02:00") == 1
    assert iso_to_unix_nanos("2026-03-02T06:00:00.042Z") == 1772431200042000000
    assert traces_endpoint("http://127.0.0.1:4318") == "http://127.0.0.1:4318/v1/traces"
    assert traces_endpoint("http://127.0.0.1:4318/custom/path") == "http://127.0.0.1:4318/custom/path"
