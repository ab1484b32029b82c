"""POST /v1/traces: OTLP/HTTP (protobuf from the real SDK exporter, and JSON) into trace events."""

from __future__ import annotations

import json

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from accounts.tokens import create_token
from runs import actions
from runs.models import Event
from runs.protocol.values import loads
from runs.selectors.runs import get_run


@pytest.fixture
def run(transactional_db, workspace, workflow):
    return actions.do_start_run(workspace=workspace, workflow=workflow, actor="test", run_id="run_otlp")


def token(workspace, scopes=("read", "write")) -> str:
    return create_token(workspace=workspace, name="otel", scopes=list(scopes)).secret


def recorded(workspace, run_id="run_otlp") -> list[dict]:
    run = get_run(workspace, run_id)
    return [loads(b) for b in Event.objects.filter(run=run).order_by("seq").values_list("body", flat=True)]


def instrumented_spans():
    """Spans an instrumented app would produce: an agent span with a chat call and a tool call."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": "app", "workbench.run.id": "run_otlp"})
    )
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("app")
    with tracer.start_as_current_span("invoke_agent planner", kind=SpanKind.INTERNAL):
        with tracer.start_as_current_span("chat gpt-5-mini", kind=SpanKind.CLIENT) as chat:
            chat.set_attributes(
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": "openai",
                    "gen_ai.request.model": "gpt-5-mini",
                    "gen_ai.response.model": "gpt-5-mini-2026",
                    "gen_ai.usage.input_tokens": 1200,
                    "gen_ai.usage.output_tokens": 300,
                    "gen_ai.usage.cache_read.input_tokens": 1000,
                    "gen_ai.usage.reasoning.output_tokens": 200,
                    "gen_ai.input.messages": json.dumps(
                        [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]
                    ),
                    "gen_ai.output.messages": json.dumps(
                        [{"role": "assistant", "parts": [{"type": "text", "content": "yo"}]}]
                    ),
                }
            )
        with tracer.start_as_current_span("execute_tool search", kind=SpanKind.INTERNAL) as tool:
            tool.set_attributes(
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "search",
                    "gen_ai.tool.call.arguments": '{"q": "jobs"}',
                    "gen_ai.tool.call.result": '{"hits": 3}',
                }
            )
            tool.set_status(Status(StatusCode.OK))
    provider.shutdown()
    return memory.get_finished_spans()


def test_protobuf_from_the_sdk_exporter(live_server, run, workspace):
    spans = instrumented_spans()
    exporter = OTLPSpanExporter(
        endpoint=f"{live_server.url}/v1/traces",
        headers={"Authorization": f"Bearer {token(workspace)}"},
        timeout=10,
    )
    from opentelemetry.sdk.trace.export import SpanExportResult

    assert exporter.export(spans) is SpanExportResult.SUCCESS
    events = recorded(workspace)
    types = [e["type"] for e in events]
    assert types == [
        "span_started",  # the agent span
        "span_started",  # the chat span: the model call keeps its place in the span tree
        "model_io",
        "model_io",
        "span_ended",
        "span_started",  # the tool span
        "tool_call",
        "span_ended",
        "span_ended",
    ]
    agent, chat, request, model, _chat_end, _tool, tool, _tool_end, agent_end = events
    assert (
        request["direction"] == "request"
        and request["payload"]["inputMessages"][0]["parts"][0]["content"] == "hi"
    )
    assert chat["parentSpanId"] == agent["spanId"] and chat["name"] == "chat gpt-5-mini"
    assert (
        model["provider"] == "openai"
        and model["model"] == "gpt-5-mini-2026"
        and model["direction"] == "response"
    )
    # 1.42: cached tokens are part of input, reasoning part of output; nothing is added twice
    assert model["usage"] == {
        "inputTokens": 1200,
        "outputTokens": 300,
        "totalTokens": 1500,
        "cachedInputTokens": 1000,
        "reasoningTokens": 200,
    }
    assert model["payload"]["outputMessages"][0]["role"] == "assistant"
    assert tool["name"] == "search" and tool["args"] == {"q": "jobs"} and tool["result"] == {"hits": 3}
    assert agent["name"] == "invoke_agent planner" and agent_end["spanId"] == agent["spanId"]
    recorded_count = len(events)

    # The exporter retries: the same spans are not recorded twice.
    assert exporter.export(spans) is SpanExportResult.SUCCESS
    assert len(recorded(workspace)) == recorded_count
    exporter.shutdown()


def _json_body(run_attr: bool = False) -> dict:
    attrs = [
        {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
        {"key": "gen_ai.system", "value": {"stringValue": "anthropic"}},
        {"key": "gen_ai.request.model", "value": {"stringValue": "claude-haiku-4-5"}},
        {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "50"}},
        {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "7"}},
    ]
    if run_attr:
        attrs.append({"key": "workbench.run.id", "value": {"stringValue": "run_otlp"}})
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": []},
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "5B8EFFF798038103D269B633813FC60C",
                                "spanId": "EEE19B7EC3C1B174",
                                "name": "chat claude-haiku-4-5",
                                "kind": 3,
                                "startTimeUnixNano": "1767225600000000000",
                                "endTimeUnixNano": "1767225600250000000",
                                "attributes": attrs,
                            }
                        ]
                    }
                ],
            }
        ]
    }


def test_json_encoding_with_the_run_header(client, run, workspace):
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token(workspace)}"}
    response = client.post(
        "/v1/traces",
        json.dumps(_json_body()),
        content_type="application/json",
        HTTP_X_WORKBENCH_RUN="run_otlp",
        **auth,
    )
    assert response.status_code == 200 and response.json() == {}
    [model] = [e for e in recorded(workspace) if e["type"] == "model_io" and e["direction"] == "response"]
    assert model["provider"] == "anthropic" and model["usage"]["totalTokens"] == 57
    assert model["durationMs"] == 250 and model["ts"] == "2026-01-01T00:00:00.250Z"
    # priced on ingest from genai-prices (claude-haiku-4-5: $1 in, $5 out per million)
    assert model["cost"] == {"amount": 0.000085, "currency": "USD"}
    assert model["payload"]["workbench.pricing"]["source"] == "genai-prices"


def test_refusals_change_nothing(client, run, workspace, other_workspace):
    body = json.dumps(_json_body(run_attr=True))
    post = lambda **kw: client.post("/v1/traces", body, content_type="application/json", **kw)  # noqa: E731
    assert post().status_code == 401
    assert post(HTTP_AUTHORIZATION=f"Bearer {token(workspace, ['read'])}").status_code == 403
    # another workspace's run is unknown there: the span is refused (partial success), as for a
    # run that does not exist at all, and nothing is written anywhere
    outsider = post(HTTP_AUTHORIZATION=f"Bearer {token(other_workspace)}")
    assert outsider.status_code == 200
    assert outsider.json()["partialSuccess"] == {
        "rejectedSpans": "1",
        "errorMessage": "1 span(s): no run 'run_otlp' in this workspace",
    }
    good = {"HTTP_AUTHORIZATION": f"Bearer {token(workspace)}"}
    garbage = client.post("/v1/traces", b"\xff\x00garbage", content_type="application/x-protobuf", **good)
    assert garbage.status_code == 400
    assert client.post("/v1/traces", "x", content_type="text/plain", **good).status_code == 415
    assert client.post("/v1/traces", "[1", content_type="application/json", **good).status_code == 400
    assert client.get("/v1/traces", **good).status_code == 405
    assert recorded(workspace) == []
