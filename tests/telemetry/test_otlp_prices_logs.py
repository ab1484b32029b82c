"""One price source (the workspace's own prices over genai-prices), GET /api/prices and the SDK's
WorkbenchClient.prices(); POST /v1/logs: content kept until its span arrives, late records refused."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from workbench_sdk import WorkbenchClient

from accounts.tokens import create_token
from playground.models import ModelEntry, ProviderConfig
from runs.models import Event, OtelPendingLog, OtelTrace
from runs.protocol.values import loads

TRACE = "0af7651916cd43dd8448eb211c80319c"
SPAN = "b7ad6b7169203331"


def bearer(workspace, scopes=("read", "write")) -> dict:
    secret = create_token(workspace=workspace, name="t", scopes=list(scopes)).secret
    return {"HTTP_AUTHORIZATION": f"Bearer {secret}"}


def chat_body(model: str = "gpt-4o-mini") -> str:
    attrs = {
        "gen_ai.operation.name": {"stringValue": "chat"},
        "gen_ai.provider.name": {"stringValue": "openai"},
        "gen_ai.request.model": {"stringValue": model},
        "gen_ai.usage.input_tokens": {"intValue": "1000"},
        "gen_ai.usage.output_tokens": {"intValue": "100"},
    }
    span = {
        "traceId": TRACE,
        "spanId": SPAN,
        "name": f"chat {model}",
        "kind": 3,
        "startTimeUnixNano": "1767225600000000000",
        "endTimeUnixNano": "1767225600400000000",
        "attributes": [{"key": k, "value": v} for k, v in attrs.items()],
    }
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})


def logs_body(records: list[dict]) -> str:
    return json.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": records}]}]})


def user_message(span_id: str = SPAN) -> dict:
    return {
        "timeUnixNano": "1767225600000000000",
        "traceId": TRACE,
        "spanId": span_id,
        "eventName": "gen_ai.user.message",
        "body": {
            "kvlistValue": {"values": [{"key": "content", "value": {"stringValue": "Weather in Paris?"}}]}
        },
    }


def response_of(workspace) -> dict:
    run = OtelTrace.objects.get(workspace=workspace, trace_id=TRACE).run
    bodies = Event.objects.filter(run=run, type="model_io").order_by("seq").values_list("body", flat=True)
    return [loads(b) for b in bodies]


def own_price(workspace, model="gpt-4o-mini") -> None:
    provider = ProviderConfig.objects.create(workspace=workspace, name="mine", kind="openai")
    ModelEntry.objects.create(
        workspace=workspace,
        provider=provider,
        model_id=model,
        display_name=model,
        input_price=Decimal("10"),
        output_price=Decimal("20"),
    )


@pytest.mark.django_db
def test_the_workspace_price_overrides_genai_prices(client, workspace, other_workspace):
    own_price(workspace)
    for ws in (workspace, other_workspace):
        response = client.post("/v1/traces", chat_body(), content_type="application/json", **bearer(ws))
        assert response.status_code == 200 and response.json() == {}
    [_request, ours] = response_of(workspace)
    assert ours["cost"] == {"amount": 0.012, "currency": "USD"}  # 1000 x $10 + 100 x $20 per million
    assert ours["payload"]["workbench.pricing"]["source"] == "workspace"
    # another workspace's price is not this one's: genai-prices ($0.15 / $0.60)
    [_request, theirs] = response_of(other_workspace)
    assert theirs["cost"] == {"amount": 0.00021, "currency": "USD"}
    assert theirs["payload"]["workbench.pricing"]["source"] == "genai-prices"


@pytest.mark.django_db
def test_a_model_nobody_prices_stays_without_cost(client, workspace):
    client.post(
        "/v1/traces", chat_body("house-model-7"), content_type="application/json", **bearer(workspace)
    )
    [_request, response] = response_of(workspace)
    assert "cost" not in response
    assert response["payload"]["workbench.pricing"]["source"] == "unpriced"
    assert "house-model-7" in response["payload"]["workbench.pricing"]["why"]


@pytest.mark.django_db
def test_api_prices_lists_the_effective_table(client, workspace):
    own_price(workspace)
    response = client.get(
        "/api/prices", {"model": ["anthropic:claude-haiku-4-5"]}, **bearer(workspace, ["read"])
    )
    assert response.status_code == 200
    prices = response.json()["prices"]
    assert prices["gpt-4o-mini"]["source"] == "workspace" and prices["gpt-4o-mini"]["input"] == "10.000000"
    assert prices["claude-haiku-4-5"] == {
        "currency": "USD",
        "source": "genai-prices",
        "provider": "anthropic",
        "input": "1",
        "output": "5",
        "cache_read": "0.1",
        "cache_write": "1.25",
        "cache_write_1h": "2",
    }
    assert client.get("/api/prices").status_code == 401


def test_the_sdk_reads_and_caches_the_price_table(live_server, workspace):
    own_price(workspace)
    secret = create_token(workspace=workspace, name="t", scopes=["read"]).secret
    with WorkbenchClient(live_server.url, secret) as wb:
        table = wb.prices()
        assert table["gpt-4o-mini"]["source"] == "workspace"
        assert wb.prices() is table  # cached
        asked = wb.prices(["openai:gpt-4o"])
        assert asked["gpt-4o"]["source"] == "genai-prices"


@pytest.mark.django_db
def test_content_logs_wait_for_their_span_and_late_ones_are_refused(client, workspace):
    auth = bearer(workspace)
    sent = client.post("/v1/logs", logs_body([user_message()]), content_type="application/json", **auth)
    assert sent.status_code == 200 and sent.json() == {}
    assert OtelPendingLog.objects.filter(workspace=workspace).count() == 1
    client.post("/v1/traces", chat_body(), content_type="application/json", **auth)
    request = response_of(workspace)[0]
    assert request["payload"]["inputMessages"] == [
        {"role": "user", "parts": [{"type": "text", "content": "Weather in Paris?"}]}
    ]
    assert OtelPendingLog.objects.count() == 0  # joined, then deleted
    # the span is in: a record for it now comes too late, and says so
    late = client.post("/v1/logs", logs_body([user_message()]), content_type="application/json", **auth)
    assert late.json()["partialSuccess"]["rejectedLogRecords"] == "1"
    assert "already ingested" in late.json()["partialSuccess"]["errorMessage"]
    # an application's own log line is accepted but not kept (a warning, nothing refused)
    app_log = {"timeUnixNano": "1", "body": {"stringValue": "hello"}}
    plain = client.post("/v1/logs", logs_body([app_log]), content_type="application/json", **auth)
    assert plain.json()["partialSuccess"]["rejectedLogRecords"] == "0"
    assert OtelPendingLog.objects.count() == 0


@pytest.mark.django_db
def test_logs_refusals(client, workspace):
    body = logs_body([user_message()])
    assert client.post("/v1/logs", body, content_type="application/json").status_code == 401
    read_only = bearer(workspace, ["read"])
    assert client.post("/v1/logs", body, content_type="application/json", **read_only).status_code == 403
    auth = bearer(workspace)
    assert client.post("/v1/logs", "{", content_type="application/json", **auth).status_code == 400
    assert (
        client.post("/v1/logs", b"\xff\x00", content_type="application/x-protobuf", **auth).status_code == 400
    )
    assert OtelPendingLog.objects.count() == 0
