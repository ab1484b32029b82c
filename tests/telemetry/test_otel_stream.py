"""Continuous OTLP export of finished runs: after commit, batched, off the write path."""

from __future__ import annotations

import socket

import pytest

from runs import actions
from runs.engine import commands as cmd
from runs.protocol.otel import trace_events_to_otel_spans
from runs.protocol.otel_semconv import to_current_conventions
from runs.selectors.runs import get_run, iter_event_bodies
from runs.telemetry.otel_export import otel_span_id
from runs.telemetry.otel_stream import ContinuousExporter
from tests.telemetry.test_otel_export import _attributes, collector  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db(transaction=True)

USAGE = {
    "inputTokens": 120,
    "outputTokens": 40,
    "totalTokens": 160,
    "cachedInputTokens": 100,
    "reasoningTokens": 25,
}

LOOPBACK = ("127.0.0.0/8",)  # the collector fakes listen on loopback: the operator allows it


def _record_run(workspace, workflow, run_id: str, *, finish: bool = True) -> None:
    actions.do_start_run(workspace=workspace, workflow=workflow, actor="test", run_id=run_id)
    for command in (
        cmd.BeginStep(step_id="parse"),
        cmd.LogModelIO(direction="request", provider="anthropic", model="claude-haiku-4-5"),
        cmd.LogModelIO(
            direction="response",
            provider="anthropic",
            model="claude-haiku-4-5",
            usage=USAGE,
            cost={"amount": 0.002, "currency": "USD"},
            duration_ms=250,
        ),
        cmd.LogToolCall(name="search", args={"q": "x"}, result={"hits": 1}),
        cmd.CompleteStep(step_id="parse"),
    ):
        actions.do_command(workspace=workspace, run_id=run_id, command=command, actor="test")
    if finish:
        actions.do_command(
            workspace=workspace, run_id=run_id, command=cmd.CancelRun(reason="done"), actor="test"
        )


@pytest.fixture
def stream(collector):  # noqa: F811
    from runs.actions.notify import register_listener, unregister_listener

    exporter = ContinuousExporter(
        endpoint=collector.url, schedule_delay_millis=50, timeout=5, egress_allow=LOOPBACK
    )
    register_listener(exporter.on_change)
    yield exporter
    unregister_listener(exporter.on_change)
    exporter.shutdown()


def test_a_finished_run_arrives_with_the_mappings_spans(stream, collector, workspace, workflow):  # noqa: F811
    _record_run(workspace, workflow, "run_otel_live")
    _record_run(workspace, workflow, "run_otel_open", finish=False)  # still running: not exported
    assert stream.flush()

    run = get_run(workspace, "run_otel_live")
    records = trace_events_to_otel_spans(run.run_doc, list(iter_event_bodies(run)))
    received = {_attributes(span)["lwb.span.id"]: span for span in collector.spans()}
    assert {_attributes(s)["lwb.run.id"] for s in collector.spans()} == {"run_otel_live"}
    assert set(received) == {r["spanId"] for r in records}
    for record in records:
        span = received[record["spanId"]]
        assert span.name == record["name"]
        assert span.span_id == otel_span_id(record["traceId"], record["spanId"]).to_bytes(8, "big")
        attributes = _attributes(span)
        for key, value in record["attributes"].items():
            assert attributes[key] == value
    assert stream.counters.exported_runs == 1 and stream.counters.dropped == 0


def test_a_collector_that_is_down_never_blocks_writes(workspace, workflow):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    from runs.actions.notify import register_listener, unregister_listener

    exporter = ContinuousExporter(endpoint=dead, schedule_delay_millis=50, timeout=1, egress_allow=LOOPBACK)
    register_listener(exporter.on_change)
    try:
        for i in range(3):
            _record_run(workspace, workflow, f"run_otel_down_{i}")
        # Every write committed although no span could be delivered.
        assert [get_run(workspace, f"run_otel_down_{i}").status for i in range(3)] == ["cancelled"] * 3
        exporter.flush(timeout=5)
        assert exporter.counters.exported_runs == 3  # mapped and handed over; delivery failed quietly
    finally:
        unregister_listener(exporter.on_change)
        exporter.shutdown()


def test_the_run_queue_is_bounded_and_drops(collector):  # noqa: F811
    from runs.actions.notify import RunChange

    exporter = ContinuousExporter(endpoint=collector.url, max_runs_queued=1, egress_allow=LOOPBACK)
    exporter._runs.put(None)  # stop the worker so nothing drains the queue
    exporter._thread.join(timeout=5)
    try:
        exporter.on_change(RunChange(1, "a", 1, 5, "completed"))
        exporter.on_change(RunChange(1, "b", 1, 5, "completed"))
        exporter.on_change(RunChange(1, "c", 1, 5, "running"))  # not final: ignored
        assert (exporter.counters.queued, exporter.counters.dropped) == (1, 1)
    finally:
        exporter._closed = True
        exporter.processor.shutdown()


def test_current_conventions_never_double_count():
    run = {"id": "r1"}
    events = [
        {
            "id": "e1",
            "runId": "r1",
            "ts": "2026-01-01T00:00:00.000Z",
            "type": "model_io",
            "direction": "response",
            "provider": "openai",
            "model": "gpt-x",
            "usage": USAGE,
        },
        {"id": "e2", "runId": "r1", "ts": "2026-01-01T00:00:01.000Z", "type": "tool_call", "name": "search"},
    ]
    reference = trace_events_to_otel_spans(run, events)
    current = to_current_conventions(reference, events)
    model = next(r for r in current if r["spanId"] == "model-e1")
    attrs = model["attributes"]
    assert model["name"] == "chat gpt-x"
    assert "gen_ai.system" not in attrs and attrs["gen_ai.provider.name"] == "openai"
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.usage.input_tokens"] == 120  # the whole prompt, cache reads included
    assert attrs["gen_ai.usage.cache_read.input_tokens"] == 100
    assert attrs["gen_ai.usage.output_tokens"] == 40  # reasoning included, not added
    assert attrs["gen_ai.usage.reasoning.output_tokens"] == 25
    assert attrs["gen_ai.usage.total_tokens"] == 160
    # the reference form is untouched and the tool span passes through
    assert next(r for r in reference if r["spanId"] == "model-e1")["attributes"]["gen_ai.system"] == "openai"
    assert [r for r in current if r["spanId"] == "tool-e2"] == [
        r for r in reference if r["spanId"] == "tool-e2"
    ]


def test_current_conventions_carry_the_messages():
    run = {"id": "r1"}
    events = [
        {
            "id": "q",
            "runId": "r1",
            "ts": "2026-01-01T00:00:00.000Z",
            "type": "model_io",
            "direction": "request",
            "correlationId": "c1",
            "provider": "anthropic",
            "model": "claude-haiku-4-5",
            "payload": {
                "system": "Be brief.",
                "messages": [{"role": "user", "content": "Weather in Paris?"}],
            },
        },
        {
            "id": "a",
            "runId": "r1",
            "ts": "2026-01-01T00:00:01.000Z",
            "type": "model_io",
            "direction": "response",
            "correlationId": "c1",
            "provider": "anthropic",
            "model": "claude-haiku-4-5",
            "payload": {
                "role": "assistant",
                "stop_reason": "tool_use",
                "content": [
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Paris"}},
                ],
            },
        },
    ]
    [model] = [
        r
        for r in to_current_conventions(trace_events_to_otel_spans(run, events), events)
        if r["spanId"] == "model-a"
    ]
    import json

    assert json.loads(model["attributes"]["gen_ai.input.messages"]) == [
        {"role": "system", "parts": [{"type": "text", "content": "Be brief."}]},
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]},
    ]
    assert json.loads(model["attributes"]["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "finish_reason": "tool_use",
            "parts": [
                {"type": "text", "content": "Checking."},
                {"type": "tool_call", "id": "t1", "name": "get_weather", "arguments": {"city": "Paris"}},
            ],
        }
    ]
    # the reference mapping carries none of them
    reference = [r for r in trace_events_to_otel_spans(run, events) if r["spanId"] == "model-a"][0]
    assert "gen_ai.input.messages" not in reference["attributes"]
