"""The field's own OTel instrumentations against a live server: no run id anywhere.

The real packages (pinned in the ``otel-tests`` extra: opentelemetry-instrumentation-openai-v2
2.3b0 with opentelemetry-util-genai<1.3 and wrapt<2, openinference-instrumentation-openai
0.1.66) instrument the official OpenAI SDK talking to the loopback fake (tests/fakes/openai_api);
the OTel SDK exports spans (and the contrib instrumentation's content log events) over OTLP/HTTP
protobuf to the test server. Each trace becomes its own run, with priced model calls, the tool
the application ran as its one tool call, content where captured, the model spans in the waterfall; the run ends
when its root span has ended and the trace went quiet.
"""

from __future__ import annotations

import json
import time

import openai
import pytest
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode

from accounts.tokens import create_token
from runs.actions.otlp import do_end_quiet_traces
from runs.background import periodic
from runs.models import Event, OtelTrace
from runs.protocol.values import loads
from runs.selectors.runs import get_run
from tests.fakes.openai_api import FakeOpenAI

openai_v2 = pytest.importorskip("opentelemetry.instrumentation.openai_v2")
openinference_openai = pytest.importorskip("openinference.instrumentation.openai")

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


@pytest.fixture
def openai_fake():
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def otlp(live_server, workspace):
    """A tracer provider and a logger provider exporting to the live server (protobuf)."""
    secret = create_token(workspace=workspace, name="otel", scopes=["read", "write"]).secret
    headers = {"Authorization": f"Bearer {secret}"}
    resource = Resource.create({"service.name": "weather-app"})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(
        SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{live_server.url}/v1/traces", headers=headers))
    )
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(
        SimpleLogRecordProcessor(OTLPLogExporter(endpoint=f"{live_server.url}/v1/logs", headers=headers))
    )
    yield tracer_provider, logger_provider
    tracer_provider.shutdown()
    logger_provider.shutdown()


def client_of(fake) -> openai.OpenAI:
    return openai.OpenAI(api_key="test-openai-key", base_url=fake.url + "/v1", max_retries=0)


def weather_agent(tracer, client, *, fail: bool = False) -> str:
    """A root span, a chat call where the model asks for get_weather, the tool, a second call."""
    with tracer.start_as_current_span("weather agent") as root:
        messages = [
            {"role": "system", "content": "You are a weather bot."},
            {"role": "user", "content": "Use get_weather for Paris"},
        ]
        first = client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=[WEATHER_TOOL])
        call = first.choices[0].message.tool_calls[0]
        with tracer.start_as_current_span("execute_tool get_weather") as tool:
            tool.set_attributes(
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "get_weather",
                    "gen_ai.tool.call.arguments": call.function.arguments,
                    "gen_ai.tool.call.result": '{"sky": "clear"}',
                }
            )
        messages += [
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": '{"sky": "clear"}'},
        ]
        client.chat.completions.create(model="gpt-4o-mini", messages=messages, tools=[WEATHER_TOOL])
        if fail:
            root.set_status(Status(StatusCode.ERROR, "the forecast was wrong"))
        return format(root.get_span_context().trace_id, "032x")


def events_of(workspace, run_id: str) -> list[dict]:
    run = get_run(workspace, run_id)
    return [loads(b) for b in Event.objects.filter(run=run).order_by("seq").values_list("body", flat=True)]


def trace_run(workspace, trace_id: str):
    [row] = OtelTrace.objects.filter(workspace=workspace, trace_id=trace_id).select_related("run")
    return row.run


def check_waterfall(client, alice, run, names: list[str]) -> None:
    client.force_login(alice)
    page = client.get(f"/runs/{run.run_id}/")
    assert page.status_code == 200
    html = page.content.decode()
    for name in names:
        assert name in html, name


def test_contrib_openai_v2_trace_becomes_a_priced_run(
    otlp, openai_fake, workspace, alice, client, monkeypatch
):
    tracer_provider, logger_provider = otlp
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    instrumentor = openai_v2.OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider, logger_provider=logger_provider)
    try:
        trace_id = weather_agent(tracer_provider.get_tracer("app"), client_of(openai_fake))
    finally:
        instrumentor.uninstrument()

    run = trace_run(workspace, trace_id)
    assert run.title == "weather agent (weather-app)"  # retitled when the root span arrived
    assert "service:weather-app" in run.tags
    assert run.run_doc["metadata"]["otel"]["traceId"] == trace_id
    events = events_of(workspace, run.run_id)
    responses = [e for e in events if e["type"] == "model_io" and e["direction"] == "response"]
    assert len(responses) == 2 and run.model_calls == 2
    for response in responses:
        assert response["usage"]["inputTokens"] > 0
        assert response["cost"]["currency"] == "USD" and response["cost"]["amount"] > 0
        assert response["payload"]["workbench.pricing"]["source"] == "genai-prices"
    # content came as log events (POST /v1/logs) and was joined onto its span
    requests = [e for e in events if e["type"] == "model_io" and e["direction"] == "request"]
    assert requests[0]["payload"]["inputMessages"][1]["parts"][0]["content"] == "Use get_weather for Paris"
    # the tool the model asked for stays in its output; the tool span is the one tool call
    asked = [
        part
        for response in responses  # the fake asks each time
        for message in response["payload"]["outputMessages"]
        for part in message["parts"]
        if part["type"] == "tool_call"
    ]
    assert asked and all(c["name"] == "get_weather" and "city" in c["arguments"] for c in asked)
    calls = [e for e in events if e["type"] == "tool_call"]
    assert [(c["name"], c["result"]) for c in calls] == [("get_weather", {"sky": "clear"})]
    # every model call is a span of the waterfall, under the root
    started = {e["spanId"]: e for e in events if e["type"] == "span_started"}
    chats = [e for e in started.values() if e["name"].startswith("chat ")]
    root = next(e for e in started.values() if "parentSpanId" not in e)
    assert len(chats) == 2 and all(c["parentSpanId"] == root["spanId"] for c in chats)
    check_waterfall(client, alice, run, ["weather agent", "chat gpt-4o-mini", "execute_tool get_weather"])

    # the root span has ended: after the quiet period the run completes
    assert run.status == "running"
    assert do_end_quiet_traces(quiet_seconds=3600).completed == []  # not quiet long enough yet
    report = do_end_quiet_traces(quiet_seconds=0)
    assert report.completed == [run.run_id]
    assert get_run(workspace, run.run_id).status == "completed"


def test_openinference_trace_with_a_session(otlp, openai_fake, workspace, alice, client):
    from openinference.instrumentation import using_session

    tracer_provider, _logs = otlp
    instrumentor = openinference_openai.OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider)
    try:
        tracer = tracer_provider.get_tracer("app")
        with using_session("conversation-7"):
            first = weather_agent(tracer, client_of(openai_fake))
            second = weather_agent(tracer, client_of(openai_fake), fail=True)
    finally:
        instrumentor.uninstrument()

    runs = [trace_run(workspace, first), trace_run(workspace, second)]
    assert runs[0].run_id != runs[1].run_id  # one run per trace
    for run in runs:
        assert "session:conversation-7" in run.tags and "service:weather-app" in run.tags
        events = events_of(workspace, run.run_id)
        responses = [e for e in events if e["type"] == "model_io" and e["direction"] == "response"]
        assert len(responses) == 2
        assert all(r["cost"]["amount"] > 0 for r in responses)
        # OpenInference carries content on the span itself
        requests = [e for e in events if e["type"] == "model_io" and e["direction"] == "request"]
        assert any(
            part.get("content") == "Use get_weather for Paris"
            for m in requests[0]["payload"]["inputMessages"]
            for part in m["parts"]
        )
        assert any(e["type"] == "tool_call" and e["name"] == "get_weather" for e in events)
    # the session groups the runs in the runs list
    client.force_login(alice)
    listing = client.get("/runs/", {"tag": "session:conversation-7"}).content.decode()
    assert runs[0].run_id in listing and runs[1].run_id in listing
    check_waterfall(client, alice, runs[0], ["weather agent", "ChatCompletion"])

    # the run whose root span ended in error fails; the other completes
    report = do_end_quiet_traces(quiet_seconds=0)
    assert sorted(report.completed) == [runs[0].run_id] and report.failed == [runs[1].run_id]
    assert get_run(workspace, runs[1].run_id).status == "failed"


def test_a_run_without_its_root_is_never_ended(otlp, openai_fake, workspace):
    """Nobody asked: a trace whose root span has not arrived stays running, however quiet."""
    tracer_provider, _logs = otlp
    instrumentor = openinference_openai.OpenAIInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider)
    try:
        tracer = tracer_provider.get_tracer("app")
        root = tracer.start_span("never ends")
        from opentelemetry import trace

        with trace.use_span(root):
            client_of(openai_fake).chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
            )
        trace_id = format(root.get_span_context().trace_id, "032x")
    finally:
        instrumentor.uninstrument()
    run = trace_run(workspace, trace_id)
    assert do_end_quiet_traces(quiet_seconds=0).completed == []
    assert get_run(workspace, run.run_id).status == "running"


def test_the_workers_periodic_sweep_ends_a_quiet_run(otlp, openai_fake, workspace, settings):
    settings.WORKBENCH_OTLP_QUIET_SECONDS = 0.3
    tracer_provider, _logs = otlp
    tracer = tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("nightly job") as root:
        with tracer.start_as_current_span("step"):
            pass
        trace_id = format(root.get_span_context().trace_id, "032x")
    run = trace_run(workspace, trace_id)
    sweep = periodic.JOBS["otlp-quiet"]  # what `manage.py worker` runs every third of the period
    assert sweep.interval() == 0.2
    time.sleep(0.4)
    assert sweep.run() == 1
    assert get_run(workspace, run.run_id).status == "completed"
    assert sweep.run() == 0  # idempotent: ended once


def test_a_batch_with_one_malformed_span_is_a_partial_success(live_server, workspace):
    import httpx

    secret = create_token(workspace=workspace, name="otel", scopes=["read", "write"]).secret

    def span(span_id: str, **extra) -> dict:
        return {
            "traceId": "5b8efff798038103d269b633813fc60c",
            "spanId": span_id,
            "name": "work",
            "startTimeUnixNano": "1767225600000000000",
            "endTimeUnixNano": "1767225600250000000",
            **extra,
        }

    body = {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "batch"}}]},
                "scopeSpans": [
                    {
                        "spans": [
                            span("eee19b7ec3c1b174"),
                            span("xyz", name="bad id"),
                            span("eee19b7ec3c1b175", parentSpanId="eee19b7ec3c1b174"),
                        ]
                    }
                ],
            }
        ]
    }
    response = httpx.post(
        f"{live_server.url}/v1/traces",
        content=json.dumps(body),
        headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/json"},
    )
    assert response.status_code == 200
    partial = response.json()["partialSuccess"]
    assert (
        partial["rejectedSpans"] == "1"
        and "spanId must be 16 lowercase hex digits" in partial["errorMessage"]
    )
    run = trace_run(workspace, "5b8efff798038103d269b633813fc60c")
    assert [e["type"] for e in events_of(workspace, run.run_id)] == [
        "span_started",
        "span_started",
        "span_ended",
        "span_ended",
    ]
