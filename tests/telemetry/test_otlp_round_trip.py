"""An ingested run goes back out as the application's own trace: the same trace id, span ids,
parents and service.name, so another backend joins the export to the app's trace."""

from __future__ import annotations

import json

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from accounts.tokens import create_token
from runs.models import OtelTrace
from runs.protocol.otlp_semconv_in import span_key
from runs.selectors.runs import iter_event_bodies
from runs.telemetry.otel_export import export_run_to_otlp, fold_ingested_calls
from tests.telemetry.test_otel_export import Collector, _attributes


@pytest.fixture
def receiver():
    collector = Collector()
    collector.thread.start()
    yield collector
    collector.server.shutdown()
    collector.server.server_close()


def app_spans():
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "checkout-api"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("POST /checkout", kind=SpanKind.SERVER):
        with tracer.start_as_current_span("invoke_agent pricing"):
            with tracer.start_as_current_span("chat gpt-4o-mini", kind=SpanKind.CLIENT) as chat:
                chat.set_attributes(
                    {
                        "gen_ai.operation.name": "chat",
                        "gen_ai.provider.name": "openai",
                        "gen_ai.request.model": "gpt-4o-mini",
                        "gen_ai.usage.input_tokens": 100,
                        "gen_ai.usage.output_tokens": 20,
                        "gen_ai.output.messages": json.dumps(
                            [{"role": "assistant", "parts": [{"type": "text", "content": "ok"}]}]
                        ),
                    }
                )
            with tracer.start_as_current_span("execute_tool discount") as tool:
                tool.set_attributes({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "discount"})
    provider.shutdown()
    return memory.get_finished_spans()


def test_export_of_an_ingested_run_keeps_trace_span_ids_parents_and_service(live_server, workspace, receiver):
    spans = app_spans()
    secret = create_token(workspace=workspace, name="otel", scopes=["read", "write"]).secret
    exporter = OTLPSpanExporter(
        endpoint=f"{live_server.url}/v1/traces", headers={"Authorization": f"Bearer {secret}"}
    )
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    exporter.shutdown()
    trace_id = spans[0].context.trace_id
    run = OtelTrace.objects.get(workspace=workspace, trace_id=format(trace_id, "032x")).run

    count = export_run_to_otlp(
        run.run_doc, list(iter_event_bodies(run)), endpoint=receiver.url, egress_allow=("127.0.0.0/8",)
    )
    exported = receiver.spans()
    assert count == len(exported) == 4  # the model and tool calls folded into their own spans
    [request] = receiver.requests
    resource = {kv.key: kv.value.string_value for kv in request[2].resource_spans[0].resource.attributes}
    assert resource["service.name"] == "checkout-api"
    original = {s.context.span_id: s for s in spans}
    for span in exported:
        assert int.from_bytes(span.trace_id, "big") == trace_id
        source = original[int.from_bytes(span.span_id, "big")]
        assert span.name == source.name
        parent = int.from_bytes(span.parent_span_id, "big") if span.parent_span_id else None
        assert parent == (source.parent.span_id if source.parent else None)
    chat = next(s for s in exported if s.name == "chat gpt-4o-mini")
    attributes = _attributes(chat)
    assert attributes["gen_ai.usage.input_tokens"] == 100
    assert attributes["gen_ai.usage.cost.currency"] == "USD"  # priced on ingest, exported with it


def test_model_and_tool_spans_fold_into_their_span_in_both_id_spellings():
    """Events stored before issue 53 name their span with hex ids, later ones with its span_key."""
    trace, span, other = "ab" * 16, "cd" * 8, "ef" * 8
    records = [
        {"spanId": span, "attributes": {"a": 1}},
        {"spanId": other, "attributes": {}},
        {"spanId": f"model-otel_{trace}_{span}_model", "attributes": {"gen_ai.system": "openai"}},
        {"spanId": f"tool-o{span_key(trace, other)}_tool", "attributes": {"gen_ai.tool.name": "t"}},
        {"spanId": f"model-o{span_key(trace, 'aa' * 8)}_model", "attributes": {"x": 2}},  # no origin
    ]
    folded = fold_ingested_calls(records)
    assert [r["spanId"] for r in folded] == [span, other, f"model-o{span_key(trace, 'aa' * 8)}_model"]
    assert folded[0]["attributes"] == {"a": 1, "gen_ai.system": "openai"}
    assert folded[1]["attributes"] == {"gen_ai.tool.name": "t"}
