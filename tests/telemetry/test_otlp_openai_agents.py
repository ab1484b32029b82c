"""The OpenAI Agents SDK through OpenInference's instrumentation: one tool run, one tool call.

The real packages (pinned in the ``otel-tests`` extra: openai-agents 0.24.0,
openinference-instrumentation-openai-agents 2.6.0) run an agent with one function tool
against the loopback Chat Completions fake (tests/fakes/openai_api); the OTel SDK exports the
spans over OTLP/HTTP to the test server. The model asks for the tool once, the SDK runs it
once: the run has two priced model calls and exactly one ``tool_call`` (the tool span, with
its arguments and result). The call the model asked for stays in the model call's
``outputMessages`` (issue 54: it was recorded a second time as its own ``tool_call``).
"""

from __future__ import annotations

import openai
import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from accounts.tokens import create_token
from runs.models import Event, OtelTrace
from runs.protocol.values import loads

agents = pytest.importorskip("agents")
openinference_agents = pytest.importorskip("openinference.instrumentation.openai_agents")

from tests.fakes.openai_api import FakeOpenAI  # noqa: E402


@pytest.fixture
def tracer_provider(live_server, workspace):
    secret = create_token(workspace=workspace, name="otel", scopes=["read", "write"]).secret
    provider = TracerProvider(resource=Resource.create({"service.name": "weather-app"}))
    provider.add_span_processor(
        SimpleSpanProcessor(
            OTLPSpanExporter(
                endpoint=f"{live_server.url}/v1/traces", headers={"Authorization": f"Bearer {secret}"}
            )
        )
    )
    yield provider
    provider.shutdown()


def test_an_agent_tool_run_is_one_tool_call(tracer_provider, workspace):
    ran: list[str] = []

    @agents.function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        ran.append(city)
        return '{"sky": "clear"}'

    instrumentor = openinference_agents.OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=tracer_provider)
    try:
        with FakeOpenAI() as fake:
            fake.script({"tool": "get_weather", "input": {"city": "Paris"}})  # then it answers in text
            client = openai.AsyncOpenAI(api_key="test-openai-key", base_url=fake.url + "/v1", max_retries=0)
            agent = agents.Agent(
                name="weather agent",
                instructions="You are a weather bot.",
                model=agents.OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client),
                tools=[get_weather],
            )
            result = agents.Runner.run_sync(agent, "What is the weather in Paris?")
    finally:
        instrumentor.uninstrument()
    assert ran == ["Paris"] and result.final_output

    [trace] = OtelTrace.objects.filter(workspace=workspace).select_related("run")
    bodies = Event.objects.filter(run=trace.run).order_by("seq").values_list("body", flat=True)
    events = [loads(b) for b in bodies]
    responses = [e for e in events if e["type"] == "model_io" and e["direction"] == "response"]
    assert len(responses) == 2 and all(r["cost"]["amount"] > 0 for r in responses)
    calls = [e for e in events if e["type"] == "tool_call"]
    assert [(c["name"], c.get("args"), c.get("result")) for c in calls] == [
        ("get_weather", {"city": "Paris"}, {"sky": "clear"})
    ]
    # what the model asked for is kept, inside its model call's response
    asked = [
        part
        for message in responses[0]["payload"]["outputMessages"]
        for part in message["parts"]
        if part["type"] == "tool_call"
    ]
    assert [(p["name"], p["arguments"]) for p in asked] == [("get_weather", {"city": "Paris"})]
