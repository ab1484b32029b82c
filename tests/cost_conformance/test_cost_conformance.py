"""Costs anyone can check: every golden case of cases.json through every way a call comes in.

The ways: the price arithmetic itself, the SDK's traced clients (the official ``anthropic`` and
``openai`` SDKs against loopback fakes that report the case's usage), OTLP ingest under the OTel
GenAI conventions (``gen_ai.*``) and under OpenInference (``llm.*``), and the playground's
recording. The expected costs follow the OTel GenAI conventions: cached tokens and cache writes are
parts of the input, reasoning tokens a part of the output, never added on top.
"""

from __future__ import annotations

import copy
import json
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import anthropic
import openai
import pytest
from openai.types.responses import ResponseUsage
from workbench_sdk import Tracer, traced_anthropic, traced_openai

from accounts.tokens import create_token
from runs.models import Event, OtelTrace
from runs.protocol.values import loads
from runs.providers.base import Usage
from runs.providers.pricing import (
    PRICING_KEY,
    Price,
    genai_table_row,
    price_call,
    price_event,
    unpriced_reason,
)
from tests.cost_conformance.conftest import CASES, assert_cost, assert_usage, cases_through, workspace_row

# the prices in force when the expectations were written (genai-prices 0.2.3's history is dated)
AT = datetime(2026, 6, 1, tzinfo=UTC)


def test_the_suite_covers_what_the_issue_names():
    apis = {case["api"] for case in CASES}
    assert len(CASES) >= 40
    for way in ("sdk", "otlp-genai", "otlp-openinference", "playground"):  # 40+ through every way
        assert len(cases_through(way)) >= 40, (way, len(cases_through(way)))
    for case in CASES:  # an unknown cost names its reason
        assert case["expected"]["cost"] is not None or case["expected"].get("why"), case["id"]
    assert apis >= {
        "openai.chat",
        "openai.responses",
        "anthropic.messages",
        "gemini.generateContent",
        "bedrock.converse",
    }
    native = [case["usage"] or {} for case in CASES]
    assert any((u.get("cache_creation") or {}).get("ephemeral_1h_input_tokens") for u in native)
    assert any((u.get("cache_creation") or {}).get("ephemeral_5m_input_tokens") for u in native)
    assert any(u.get("cachedContentTokenCount") for u in native)
    assert any(case["expected"]["currency"] not in (None, "USD") for case in CASES)
    assert any("cache-read price" in case["expected"].get("why", "") for case in CASES)
    assert len({case["id"] for case in CASES}) == len(CASES)


@pytest.mark.parametrize(
    "case", [pytest.param(c, id=c["id"]) for c in CASES if c["price"]["source"] == "genai-prices"]
)
def test_the_rates_assumed_are_genai_prices_rates(case):
    """An upgrade of genai-prices that changes a rate fails here, naming it, not as a wrong sum."""
    row = genai_table_row(
        case["provider"] if case["provider"] != "bedrock" else "aws.bedrock", case["model"], AT
    )
    assert row is not None, case["model"]
    for name, rate in case["price"]["rates"].items():
        assert Decimal(row[name]) == Decimal(rate), (case["model"], name, row[name], rate)


def _usage(case: dict[str, Any]) -> Usage:
    expected = case["expected"]["usage"] or {}
    native = case["usage"] or {}
    write = native.get("cache_creation_input_tokens") or native.get("cacheWriteInputTokens") or 0
    return Usage(
        input_tokens=expected.get("inputTokens", 0),
        output_tokens=expected.get("outputTokens", 0),
        cache_read_tokens=expected.get("cachedInputTokens", 0),
        cache_write_tokens=write,
        cache_write_1h_tokens=(native.get("cache_creation") or {}).get("ephemeral_1h_input_tokens") or 0,
    )


def _price(row: dict[str, Any]) -> Price:
    def rate(name: str) -> Decimal | None:
        return Decimal(row[name]) if name in row else None

    return Price(
        rate("input"),
        rate("output"),
        rate("cache_read"),
        rate("cache_write"),
        row.get("currency", "USD"),
        cache_write_1h=rate("cache_write_1h"),
    )


@pytest.mark.parametrize("case", [pytest.param(c, id=c["id"]) for c in CASES if c["expected"]["usage"]])
def test_the_price_arithmetic(case):
    row = workspace_row(case)
    table = {case["model"]: _price(row)} if row else None
    priced = price_call(
        provider=case["provider"], model=case["model"], usage=_usage(case), table=table, at=AT
    )
    why = None
    if priced is None:
        event = {
            "model": case["model"],
            "usage": case["expected"]["usage"],
            "payload": {
                "cacheCreationInputTokens": _usage(case).cache_write_tokens,
                "cacheCreation1hInputTokens": _usage(case).cache_write_1h_tokens,
            },
        }
        why = unpriced_reason(event, table, None)
    assert_cost(case, priced.protocol_cost() if priced else None, why)


# --------------------------------------------------------------------------------------------
# The SDK's traced clients


class ListSink:
    def __init__(self) -> None:
        self.run_id = "run_cost_conformance"
        self.events: list[dict[str, Any]] = []

    def record(self, events: list[dict[str, Any]]) -> None:
        self.events.extend(events)


def _sdk_prices(case: dict[str, Any]) -> dict[str, Any]:
    """What the server's ``GET /api/prices`` hands the SDK for the model: the workspace's row, else
    genai-prices' flat rates."""
    row = workspace_row(case)
    if row is not None:
        return {case["model"]: {**row, "source": "workspace"}}
    found = genai_table_row(case["provider"], case["model"], AT)
    return {case["model"]: found} if found else {}


def _response(sink: ListSink) -> dict[str, Any]:
    return [e for e in sink.events if e["type"] == "model_io" and e["direction"] == "response"][-1]


@pytest.mark.parametrize("case", cases_through("sdk"))
def test_through_the_sdk_traced_clients(case, anthropic_fake, openai_fake):
    sink = ListSink()
    tracer = Tracer(sink, step_id="call", prices=_sdk_prices(case))
    if case["api"] == "anthropic.messages":
        anthropic_fake.script({"usage": case["usage"]})
        client = traced_anthropic(
            anthropic.Anthropic(api_key="test-anthropic-key", base_url=anthropic_fake.url, max_retries=0),
            tracer,
        )
        client.messages.create(
            model=case["model"], max_tokens=100, messages=[{"role": "user", "content": "hi"}]
        )
    elif case["api"] == "openai.chat":
        openai_fake.script({"usage": case["usage"]})
        client = traced_openai(
            openai.OpenAI(api_key="test-openai-key", base_url=openai_fake.url + "/v1", max_retries=0), tracer
        )
        client.chat.completions.create(model=case["model"], messages=[{"role": "user", "content": "hi"}])
    else:  # the Responses API's usage object, through one traced call
        call = tracer.begin("openai", case["model"], {"model": case["model"], "input": "hi"})
        call.finish({"model": case["model"]}, usage=ResponseUsage.model_validate(case["usage"]))
    response = _response(sink)
    assert_usage(case, response.get("usage"), reasoning=case["provider"] == "openai")
    assert_cost(case, response.get("cost"), _server_why(case, response))


def _server_why(case: dict[str, Any], response: dict[str, Any]) -> str | None:
    """What the server records when it stores an SDK response the SDK left unpriced: it prices it
    with the same table (it cannot) and says why in the pricing note (on a copy: the cost checked
    is the SDK's own)."""
    if "cost" in response:
        return None
    row = workspace_row(case)
    stored = copy.deepcopy(response)
    price_event(stored, {case["model"]: _price(row)} if row else None, at=AT)
    return _why(stored)


# --------------------------------------------------------------------------------------------
# OTLP ingest, each convention


def _own_prices(workspace, case: dict[str, Any]) -> None:
    from playground.models import ModelEntry, ProviderConfig

    row = workspace_row(case)
    if row is None:
        return
    kind = "anthropic" if case["provider"] == "anthropic" else "openai"
    provider = ProviderConfig.objects.create(workspace=workspace, name="mine", kind=kind)
    ModelEntry.objects.create(
        workspace=workspace,
        provider=provider,
        model_id=case["model"],
        display_name=case["model"],
        input_price=row.get("input"),
        output_price=row.get("output"),
        cache_read_price=row.get("cache_read"),
        cache_write_price=row.get("cache_write"),
        cache_write_1h_price=row.get("cache_write_1h"),
        currency=row.get("currency", "USD"),
    )


def _attr(value: Any) -> dict[str, Any]:
    return {"intValue": str(value)} if isinstance(value, int) else {"stringValue": str(value)}


def _span_body(trace_id: str, attrs: dict[str, Any]) -> str:
    span = {
        "traceId": trace_id,
        "spanId": "b7ad6b7169203331",
        "name": "chat",
        "kind": 3,
        "startTimeUnixNano": str(int(AT.timestamp() * 1e9)),
        "endTimeUnixNano": str(int(AT.timestamp() * 1e9) + 400_000_000),
        "attributes": [{"key": k, "value": _attr(v)} for k, v in attrs.items()],
    }
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})


def _ingest(client, workspace, attrs: dict[str, Any]) -> dict[str, Any]:
    trace_id = uuid.uuid4().hex
    secret = create_token(workspace=workspace, name="t", scopes=["read", "write"]).secret
    answer = client.post(
        "/v1/traces",
        _span_body(trace_id, attrs),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {secret}",
    )
    assert answer.status_code == 200, answer.content
    run = OtelTrace.objects.get(workspace=workspace, trace_id=trace_id).run
    bodies = [loads(b) for b in Event.objects.filter(run=run, type="model_io").values_list("body", flat=True)]
    return [b for b in bodies if b["direction"] == "response"][0]


def _why(event: dict[str, Any]) -> str | None:
    note = (event.get("payload") or {}).get(PRICING_KEY) or {}
    return note.get("why")


@pytest.mark.django_db
@pytest.mark.parametrize("case", cases_through("otlp-genai"))
def test_through_otlp_gen_ai_conventions(case, client, workspace):
    _own_prices(workspace, case)
    attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": case["model"], **case["otel"]}
    response = _ingest(client, workspace, attrs)
    assert_usage(case, response.get("usage"))
    assert_cost(case, response.get("cost"), _why(response))


@pytest.mark.django_db
@pytest.mark.parametrize("case", cases_through("otlp-openinference"))
def test_through_otlp_openinference(case, client, workspace):
    _own_prices(workspace, case)
    attrs = {"openinference.span.kind": "LLM", "llm.model_name": case["model"], **case["openinference"]}
    response = _ingest(client, workspace, attrs)
    assert_usage(case, response.get("usage"))
    assert_cost(case, response.get("cost"), _why(response))
