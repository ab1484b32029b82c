"""A workspace past its monthly cap through calls it does not make (OTLP spans, the SDK's events
over REST): the calls are recorded as always (Workbench cannot stop them) and one
``budget.exceeded`` alert per month goes through the outbox: a Standard Webhooks delivery (verified
with the reference implementation), the Slack app (the loopback Slack Web API fake) and an e-mail
to each owner; the alert is in the budget trail. Nobody past a cap: nothing is sent."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import pytest
from django.core import mail
from standardwebhooks import Webhook as Verifier

from accounts.tokens import create_token
from runs import actions
from runs.actions import budgets
from runs.actions.slack import do_create_slack_app
from runs.models import Delivery, Event, OtelTrace
from runs.models_budgets import BudgetRecord
from runs.notifications.delivery import deliver_due
from tests.fakes.slack_api import CHANNEL, FakeSlack
from tests.fakes.webhook_receiver import Receiver
from tests.notifications.conftest import make_hook

pytestmark = pytest.mark.django_db

EVENT = "budget.exceeded"


@pytest.fixture
def slack(settings):
    with FakeSlack() as fake:
        settings.WORKBENCH_SLACK_API_URL = fake.api_url
        yield fake


@pytest.fixture
def token(workspace):
    return create_token(workspace=workspace, name="host", scopes=["read", "write"]).secret


def _otlp_call(client, token: str, amount_tokens: int) -> str:
    """One OTLP span of a gpt-4o chat call (priced by genai-prices): the trace's run id."""
    trace_id = uuid.uuid4().hex
    now = int(datetime.now(tz=UTC).timestamp() * 1e9)
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.usage.input_tokens": amount_tokens,
        "gen_ai.usage.output_tokens": 10,
    }
    span = {
        "traceId": trace_id,
        "spanId": uuid.uuid4().hex[:16],
        "name": "chat gpt-4o",
        "kind": 3,
        "startTimeUnixNano": str(now),
        "endTimeUnixNano": str(now + 300_000_000),
        "attributes": [
            {"key": k, "value": {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}}
            for k, v in attrs.items()
        ],
    }
    body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]})
    answer = client.post(
        "/v1/traces", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    assert answer.status_code == 200, answer.content
    return OtelTrace.objects.get(trace_id=trace_id).run.run_id


def _sdk_call(client, token: str, run_id: str, amount: float) -> None:
    """The SDK's events of one call it made itself (its own price), over REST."""
    event = {
        "id": f"evt_{uuid.uuid4().hex}",
        "runId": run_id,
        "ts": datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
        "type": "model_io",
        "direction": "response",
        "provider": "openai",
        "model": "gpt-4o",
        "usage": {"inputTokens": 1000, "outputTokens": 100, "totalTokens": 1100},
        "cost": {"amount": amount, "currency": "USD"},
    }
    answer = client.post(
        f"/api/runs/{run_id}/events",
        json.dumps({"events": [event]}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert answer.status_code == 200, answer.content


def test_self_reported_calls_past_the_cap_are_recorded_and_alert_once_through_the_outbox(
    client, workspace, workflow, alice, slack, token
):
    alice.email = "alice@example.com"
    alice.save()
    budgets.do_set_budgets(workspace=workspace, monthly_cap="0.01", run_default=None, actor="user:alice")
    with Receiver() as hook_rx:
        signed = make_hook(workspace, hook_rx.url, events=[EVENT])
        do_create_slack_app(
            workspace=workspace,
            bot_token="xoxb-test",
            signing_secret="s" * 32,
            channel=CHANNEL,
            events=[EVENT],
            actor="user:alice",
        )
        # under the cap: recorded, nothing said ($0.0026: 1000 input tokens at $2.50/M + 10 output)
        first = _otlp_call(client, token, 1000)
        assert not Delivery.objects.filter(event_type=EVENT).exists()
        # past it: 4000 input tokens ($0.0101) more, recorded as always, and the month's alert
        second = _otlp_call(client, token, 4000)
        for run_id in (first, second):
            assert Event.objects.filter(run__run_id=run_id, type="model_io").count() == 2
        assert budgets.past_cap(workspace) is not None
        assert Delivery.objects.filter(event_type=EVENT).count() == 3  # hook, Slack app, alice
        # still past it, through the SDK's own events over REST: recorded, no second alert
        actions.do_start_run(workspace=workspace, workflow=workflow, run_id="run_sdk", actor="user:alice")
        _sdk_call(client, token, "run_sdk", 0.5)
        _otlp_call(client, token, 1000)
        assert Event.objects.filter(run__run_id="run_sdk", type="model_io").count() == 1
        assert Delivery.objects.filter(event_type=EVENT).count() == 3
        assert deliver_due() == 3
        (hit,) = hook_rx.hits

    message = Verifier(signed.secret).verify(hit.body, hit.headers)
    assert message["type"] == EVENT
    data = message["data"]
    assert data["workspace"] == "acme" and data["source"] == "OTLP"
    assert data["budget"]["cap"] == "USD 0.01" and data["budget"]["url"].endswith("/settings/budgets/")
    assert data["run"]["id"] == second
    assert "cannot stop them" in data["reason"]

    (posted,) = slack.of("chat.postMessage")
    assert posted["channel"] == CHANNEL
    assert "The workspace passed its monthly budget" in posted["text"]
    said = json.dumps(posted["blocks"])
    assert "cap USD 0.01" in said and "cannot stop them" in said and "Open the budgets" in said

    (email,) = mail.outbox
    assert email.to == ["alice@example.com"]
    assert "monthly budget" in email.subject and "cannot stop them" in email.body

    (alert,) = BudgetRecord.objects.filter(workspace=workspace, kind="alert")
    assert alert.run_id == second and "(OTLP reported calls)" in alert.message
    page = client.get("/settings/budgets/")
    assert page.status_code == 302  # members only; signed in, the trail shows the alert
    client.force_login(alice)
    html = client.get("/settings/budgets/").content.decode()
    assert "cannot stop them" in html and "OTLP reported calls" in html and EVENT in html


def test_under_the_cap_or_without_one_nothing_is_sent(client, workspace, workflow, alice, token):
    alice.email = "alice@example.com"
    alice.save()
    with Receiver() as hook_rx:
        make_hook(workspace, hook_rx.url, events=[EVENT])
        _otlp_call(client, token, 100_000)  # no cap: nothing to pass
        budgets.do_set_budgets(workspace=workspace, monthly_cap="100", run_default=None)
        _otlp_call(client, token, 100_000)  # under the cap
        assert deliver_due() == 0 and hook_rx.hits == []
    assert not BudgetRecord.objects.filter(kind="alert").exists() and mail.outbox == []


def test_the_sdks_own_events_over_rest_past_the_cap_alert_once(client, workspace, workflow, alice, token):
    alice.email = "alice@example.com"
    alice.save()
    budgets.do_set_budgets(workspace=workspace, monthly_cap="1", run_default=None)
    actions.do_start_run(workspace=workspace, workflow=workflow, run_id="run_host", actor="user:alice")
    _sdk_call(client, token, "run_host", 0.6)  # under the cap
    assert not BudgetRecord.objects.filter(kind="alert").exists()
    _sdk_call(client, token, "run_host", 0.6)  # $1.20: past it, recorded as always
    _sdk_call(client, token, "run_host", 0.6)
    assert Event.objects.filter(run__run_id="run_host", type="model_io").count() == 3
    (alert,) = BudgetRecord.objects.filter(workspace=workspace, kind="alert")
    assert alert.run_id == "run_host" and "(the SDK reported calls)" in alert.message
    (told,) = Delivery.objects.filter(event_type=EVENT)  # alice, by e-mail
    assert told.recipient == alice
    assert deliver_due() == 1 and "cannot stop them" in mail.outbox[0].body
