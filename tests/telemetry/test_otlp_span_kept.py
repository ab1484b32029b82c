"""An OTLP chat span keeps every piece of information while it is stored once (issue 53).

A span sent in both conventions (OTel GenAI and OpenInference, as an application instrumented
twice sends it) is stored as its ``span_started``, the ``model_io`` request and response and its
``span_ended``: the content once (in the ``model_io`` events), the attributes the mapped form
reproduces named in ``workbench.derived`` instead of kept again. This golden test sends such
spans through ``/v1/traces`` and reads them back: every attribute sent (rebuilt by
``span_attributes``), the usage, the content, the span tree; and the content is in one stored
event, not in the ``span_started`` and not in a transcript file nobody read. Attributes the
mapping cannot rebuild exactly (a message with a tool call, a plain-text ``input.value``) stay as
sent. On SQLite and PostgreSQL (tests/telemetry is ``db_differs``).
"""

from __future__ import annotations

import json

import orjson
import pytest
from django.test import Client
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from accounts.tokens import create_token
from runs.models import Event, OtelTrace
from runs.protocol.integrity import verify_integrity
from runs.protocol.otlp_derived import DERIVED, span_attributes
from runs.protocol.otlp_semconv_in import span_of_key
from runs.protocol.values import loads
from runs.selectors.bundles import export_bundle_doc
from runs.telemetry.transcript_log import sync_run, transcript_path

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.db_differs]

TRACE, ROOT, CHAT, ODD = 0x5A5A0000111122223333444455556666, 0x1111, 0x2222, 0x3333
T0 = 1_767_225_600_000_000_000
SYSTEM = "You answer questions about invoices in one short sentence."
USER = "Which invoices of customer 4411 are still open after the March renewal, and for how much?"
ANSWER = "Two invoices are open: INV-88 (120 EUR) and INV-93 (75.50 EUR)."


def chat_attributes() -> dict:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.request.temperature": 0.2,
        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.response.id": "chatcmpl-42",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 61,
        "gen_ai.usage.output_tokens": 23,
        "gen_ai.input.messages": json.dumps(
            [
                {"role": "system", "parts": [{"type": "text", "content": SYSTEM}]},
                {"role": "user", "parts": [{"type": "text", "content": USER}]},
            ]
        ),
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}], "finish_reason": "stop"}]
        ),
        "openinference.span.kind": "LLM",
        "llm.system": "openai",
        "llm.provider": "openai",
        "llm.model_name": "gpt-4o-mini",
        "llm.invocation_parameters": json.dumps({"temperature": 0.2}),
        "llm.token_count.prompt": 61,
        "llm.token_count.completion": 23,
        "llm.token_count.total": 84,
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": SYSTEM,
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.content": USER,
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": ANSWER,
        "input.value": json.dumps(
            {"messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}]}
        ),
        "input.mime_type": "application/json",
        "output.value": ANSWER,
        "output.mime_type": "text/plain",
    }


def odd_attributes() -> dict:
    """A chat span the mapped form cannot rebuild in full: an answer with a tool call (OpenInference
    flattens it in keys of its own), a plain-text input.value, a token count sent as a float."""
    return {
        "openinference.span.kind": "LLM",
        "llm.model_name": "claude-haiku-4-5",
        "llm.provider": "anthropic",
        "llm.token_count.prompt": 12.0,
        "llm.token_count.completion": 5,
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "weather in Oslo?",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "weather",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"city": "Oslo"}',
        "input.value": "weather in Oslo?",
        "output.value": "calling weather",
    }


def _span(span_id: int, parent: int | None, name: str, attrs: dict, i: int) -> ReadableSpan:
    def ctx(span: int) -> SpanContext:
        return SpanContext(TRACE, span, is_remote=False, trace_flags=TraceFlags(1))

    return ReadableSpan(
        name=name,
        context=ctx(span_id),
        parent=ctx(parent) if parent else None,
        resource=Resource.create({"service.name": "invoices"}),
        attributes=attrs,
        kind=SpanKind.CLIENT if parent else SpanKind.INTERNAL,
        status=Status(StatusCode.OK),
        start_time=T0 + i * 1_000_000,
        end_time=T0 + i * 1_000_000 + 400_000_000,
    )


def _json_equal(sent: dict) -> dict:
    """The attributes as values: JSON text parsed (the rebuilt text is compact), tuples as lists."""
    out = {}
    for key, value in sent.items():
        if isinstance(value, str) and value[:1] in "[{":
            value = orjson.loads(value)
        out[key] = list(value) if isinstance(value, tuple) else value
    return out


def _ingest(workspace) -> tuple[object, dict[str, list[dict]]]:
    spans = [
        _span(CHAT, ROOT, "chat gpt-4o-mini", chat_attributes(), 1),
        _span(ODD, ROOT, "chat claude-haiku-4-5", odd_attributes(), 2),
        _span(ROOT, None, "invoke_agent invoices", {"gen_ai.operation.name": "invoke_agent"}, 0),
    ]
    secret = create_token(workspace=workspace, name="kept", scopes=["read", "write"]).secret
    answer = Client().post(
        "/v1/traces",
        encode_spans(spans).SerializeToString(),
        content_type="application/x-protobuf",
        secure=True,
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )
    assert answer.status_code == 200 and answer.content == b"", answer.content
    run = OtelTrace.objects.get(workspace=workspace, trace_id=f"{TRACE:032x}").run
    by_span: dict[str, list[dict]] = {}
    for body in Event.objects.filter(run=run).order_by("seq").values_list("body", flat=True):
        event = loads(body)
        by_span.setdefault(span_of_key(event["correlationId"].removeprefix("o:")), []).append(event)
    return run, by_span


def test_a_chat_span_in_both_conventions_keeps_everything_once(workspace):
    run, by_span = _ingest(workspace)
    started, request, response, ended = by_span[f"{CHAT:016x}"]
    assert [e["type"] for e in (started, request, response, ended)] == [
        "span_started", "model_io", "model_io", "span_ended"
    ]  # fmt: skip
    # every attribute sent comes back, with its type
    assert _json_equal(span_attributes(started, request, response)) == _json_equal(chat_attributes())
    # what the mapped form holds is not kept again: the start names it and keeps the rest
    assert started["attributes"] == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.temperature": 0.2,
        "openinference.span.kind": "LLM",
        "llm.invocation_parameters": '{"temperature": 0.2}',
        DERIVED: started["attributes"][DERIVED],
    }
    # the usage, the models, the content, the span tree
    assert response["usage"] == {"inputTokens": 61, "outputTokens": 23, "totalTokens": 84}
    assert (request["provider"], request["model"], response["model"]) == (
        "openai", "gpt-4o-mini", "gpt-4o-mini-2024-07-18"
    )  # fmt: skip
    assert request["payload"] == {
        "inputMessages": [
            {"role": "system", "parts": [{"type": "text", "content": SYSTEM}]},
            {"role": "user", "parts": [{"type": "text", "content": USER}]},
        ]
    }
    priced = {
        k: v for k, v in response["payload"].items() if k != "workbench.pricing"
    }  # the ingest prices it
    assert priced == {
        "outputMessages": [
            {"role": "assistant", "parts": [{"type": "text", "content": ANSWER}], "finish_reason": "stop"}
        ],
        "finishReasons": ["stop"],
        "responseId": "chatcmpl-42",
    }
    assert started["parentSpanId"] == f"{ROOT:016x}" and started["name"] == "chat gpt-4o-mini"
    assert ended["status"] == "ok" and ended["durationMs"] == 400.0
    # each text is stored once in the database, and in no transcript file until one is read
    stored = "".join(Event.objects.filter(run=run).values_list("body", flat=True))
    assert (stored.count(USER), stored.count(ANSWER), stored.count(SYSTEM)) == (1, 1, 1)
    path = transcript_path(run)
    assert not path.exists()
    sync_run(run)  # the first read writes it, from the events
    lines = [orjson.loads(line) for line in path.read_text().splitlines()]
    assert [line["payload"]["usage"] for line in lines if line["type"] == "message.assistant"][0] == response[
        "usage"
    ]
    # the run exports as a bundle that verifies
    assert verify_integrity(export_bundle_doc(run)) == "valid"


def test_what_the_mapping_cannot_rebuild_is_kept_as_sent(workspace):
    _run, by_span = _ingest(workspace)
    started, request, response, _ended = by_span[f"{ODD:016x}"]
    # the call it asked for: a part of its output (a tool_call event is a tool that ran, issue 54)
    [call] = [
        p for m in response["payload"]["outputMessages"] for p in m["parts"] if p["type"] == "tool_call"
    ]
    assert call["name"] == "weather" and call["arguments"] == {"city": "Oslo"}
    assert _json_equal(span_attributes(started, request, response)) == _json_equal(odd_attributes())
    kept = started["attributes"]
    # the tool call's flattened keys, the plain-text input, the float count: all as sent
    assert kept["llm.output_messages.0.message.tool_calls.0.tool_call.function.name"] == "weather"
    assert kept["input.value"] == "weather in Oslo?" and kept["llm.token_count.prompt"] == 12.0
    assert kept["output.value"] == "calling weather"
    # what it can rebuild is still named once, not kept
    assert "llm.model_name" not in kept and "llm.input_messages.0.message.content" not in kept
    assert response["usage"]["inputTokens"] == 12
