"""Monitors (runs.actions.monitors): evaluated from the rollups, with hysteresis, each state change
through the outbox as ``monitor.state_changed`` to a Standard Webhooks receiver (verified with the
reference implementation), a Slack incoming-webhook fake and a Slack app (the loopback Slack Web API
fake, tests/fakes/slack_api.py); nothing when nobody asked."""

from __future__ import annotations

import json
import uuid
from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone
from standardwebhooks import Webhook as Verifier

from runs import actions
from runs.actions.monitors import do_create_monitor, evaluate_monitors, next_state
from runs.actions.slack import do_create_slack_app
from runs.models import Delivery, MonitorChange
from runs.notifications.delivery import deliver_due
from tests.fakes.slack_api import CHANNEL, FakeSlack
from tests.fakes.webhook_receiver import Receiver
from tests.notifications.conftest import make_hook

pytestmark = pytest.mark.django_db

EVENT = "monitor.state_changed"


def _spend(workspace, run_id: str, amounts: list[float], *, at=None) -> None:
    """Priced model responses appended to a run (the write path keeps the cost rollups)."""
    ts = (at or timezone.now()).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    events = [
        {
            "id": f"evt_{uuid.uuid4().hex}",
            "runId": run_id,
            "ts": ts,
            "type": "model_io",
            "direction": "response",
            "provider": "openai",
            "model": "gpt-test",
            "stepId": "parse",
            "usage": {"inputTokens": 100, "outputTokens": 10},
            "cost": {"amount": amount, "currency": "USD"},
        }
        for amount in amounts
    ]
    actions.do_append_events(workspace=workspace, run_id=run_id, events=events)


def _cost_monitor(workspace, **extra):
    data = {"name": "Spend per hour", "metric": "cost_hour", "alert": 1.0, "margin": 0.2, **extra}
    return do_create_monitor(workspace=workspace, data=data, actor="user:alice")


@pytest.fixture
def slack_api(settings):
    with FakeSlack() as fake:
        settings.WORKBENCH_SLACK_API_URL = fake.api_url
        yield fake


def test_cost_per_hour_fires_once_stays_quiet_and_resolves_once(workspace, workflow, alice, slack_api):
    with Receiver() as hook_rx, Receiver() as slack_rx:
        signed = make_hook(workspace, hook_rx.url, events=[EVENT])
        make_hook(workspace, slack_rx.url, events=[EVENT], kind="slack")
        do_create_slack_app(
            workspace=workspace,
            bot_token="xoxb-test",
            signing_secret="s" * 32,
            channel=CHANNEL,
            events=[EVENT],
            actor="user:alice",
        )
        monitor = _cost_monitor(workspace)
        actions.do_start_run(workspace=workspace, workflow=workflow, run_id="run_spend", actor="user:alice")
        t0 = timezone.now()

        assert [e.state for e in evaluate_monitors(now=t0)] == ["ok"]  # the baseline sample
        _spend(workspace, "run_spend", [0.4, 0.3])  # 0.70: under the alert line
        assert [e.changed for e in evaluate_monitors(now=t0 + timedelta(minutes=1))] == [False]
        _spend(workspace, "run_spend", [0.5])  # 1.20 within the hour: crosses it
        (fired,) = evaluate_monitors(now=t0 + timedelta(minutes=2))
        assert (fired.state, fired.changed, fired.value, fired.deliveries) == (
            "alert",
            True,
            pytest.approx(1.2),
            3,
        )
        assert deliver_due() == 3 and len(hook_rx.hits) == 1 and len(slack_rx.hits) == 1
        assert len(slack_api.of("chat.postMessage")) == 1
        _spend(workspace, "run_spend", [0.1])  # still above: no new message
        for minute in (3, 4, 5):
            (again,) = evaluate_monitors(now=t0 + timedelta(minutes=minute))
            assert again.state == "alert" and not again.changed
        # an hour later the spend of the last hour is 0: below the line minus the margin
        (resolved,) = evaluate_monitors(now=t0 + timedelta(minutes=66))
        assert (resolved.state, resolved.changed, resolved.value) == ("ok", True, 0.0)
        (quiet,) = evaluate_monitors(now=t0 + timedelta(minutes=67))
        assert not quiet.changed

        assert Delivery.objects.filter(event_type=EVENT).count() == 6  # 2 changes x 3 hooks
        assert deliver_due() == 3
        assert len(hook_rx.hits) == 2 and len(slack_rx.hits) == 2

    fired_msg, resolved_msg = (Verifier(signed.secret).verify(h.body, h.headers) for h in hook_rx.hits)
    assert fired_msg["type"] == EVENT and (fired_msg["data"]["from"], fired_msg["data"]["to"]) == (
        "ok",
        "alert",
    )
    assert fired_msg["data"]["monitor"]["id"] == monitor.public_id
    assert fired_msg["data"]["value"] == pytest.approx(1.2)
    today = t0.date().isoformat()
    assert fired_msg["data"]["dashboardUrl"].startswith("https://wb.example/dashboard/?from=")
    assert f"to={today}" in fired_msg["data"]["dashboardUrl"]
    assert (resolved_msg["data"]["from"], resolved_msg["data"]["to"]) == ("alert", "ok")

    alert_slack, ok_slack = (h.json for h in slack_rx.hits)
    assert "Monitor alert: Spend per hour" in alert_slack["text"]
    button = alert_slack["blocks"][1]["elements"][0]
    assert button["text"]["text"] == "Open the dashboard" and "/dashboard/?from=" in button["url"]
    assert "Monitor resolved" in ok_slack["text"]
    assert "webhook-signature" not in slack_rx.hits[0].headers
    # the Slack app posted each change in its channel through the Web API, with its bot token
    fired_post, resolved_post = slack_api.of("chat.postMessage")
    assert fired_post["channel"] == CHANNEL and "Monitor alert: Spend per hour" in fired_post["text"]
    assert "Open the dashboard" in str(fired_post["blocks"]) and "/dashboard/?from=" in str(
        fired_post["blocks"]
    )
    assert "Monitor resolved: Spend per hour" in resolved_post["text"]
    assert slack_api.tokens == ["Bearer xoxb-test"] * 2
    assert list(MonitorChange.objects.values_list("from_state", "to_state").order_by("at")) == [
        ("ok", "alert"),
        ("alert", "ok"),
    ]


def test_a_workspace_without_monitors_sends_nothing(workspace, workflow, alice, receiver):
    make_hook(workspace, receiver.url, events=[EVENT])
    actions.do_start_run(workspace=workspace, workflow=workflow, run_id="run_spend", actor="user:alice")
    now = timezone.now()
    assert evaluate_monitors(now=now) == []
    _spend(workspace, "run_spend", [5.0, 5.0])
    assert evaluate_monitors(now=now + timedelta(minutes=1)) == []
    assert Delivery.objects.count() == 0
    assert deliver_due() == 0 and receiver.hits == []


def test_another_workspaces_spend_does_not_move_a_monitor(workspace, other_workspace, workflow, receiver):
    make_hook(workspace, receiver.url, events=[EVENT])
    _cost_monitor(workspace)
    actions.do_start_run(workspace=other_workspace, workflow=workflow, run_id="run_x")
    now = timezone.now()
    evaluate_monitors(now=now)
    _spend(other_workspace, "run_x", [50.0])
    (done,) = evaluate_monitors(now=now + timedelta(minutes=1))
    assert done.state == "ok" and done.value == 0.0
    assert Delivery.objects.count() == 0


def test_cost_per_day_and_email_to_owners(workspace, workflow, alice):
    alice.email = "alice@example.com"
    alice.save()
    do_create_monitor(
        workspace=workspace,
        data={"name": "Daily", "metric": "cost_day", "warning": 1, "alert": 3, "emailOwners": True},
    )
    actions.do_start_run(workspace=workspace, workflow=workflow, run_id="run_d")
    _spend(workspace, "run_d", [1.5])
    (warned,) = evaluate_monitors()
    assert (warned.state, warned.deliveries) == ("warning", 1)
    deliver_due()
    (message,) = mail.outbox
    assert message.to == ["alice@example.com"] and "Monitor warning: Daily" in message.subject
    assert "Open the dashboard: https://wb.example/dashboard/?from=" in message.body


@pytest.mark.parametrize("metric", ["cost_day", "cost_hour"])
def test_a_cost_monitors_link_covers_the_range_it_measured(workspace, workflow, metric):
    """The link spans the days whose calls were measured, back to the day the earliest run that
    spent in them started (the dashboard counts runs by start day): not a blanket 31 days."""
    t0 = timezone.now()
    later = t0 + timedelta(days=3)
    do_create_monitor(workspace=workspace, data={"name": "Spend", "metric": metric, "alert": 1.0})
    actions.do_start_run(workspace=workspace, workflow=workflow, run_id="run_old", actor="user:alice")
    evaluate_monitors(now=later - timedelta(minutes=5))  # the cost-per-hour baseline
    _spend(workspace, "run_old", [2.0], at=later)  # a run started 3 days ago spends now
    (fired,) = evaluate_monitors(now=later)
    assert (fired.state, fired.changed) == ("alert", True)
    change = MonitorChange.objects.get(to_state="alert")
    assert (change.range_from, change.range_to) == (t0.date(), later.date())
    assert not Delivery.objects.exists()  # nobody asked for a message: the change records the range


def test_a_cost_monitors_link_is_the_day_measured_when_runs_started_that_day(workspace, workflow, receiver):
    make_hook(workspace, receiver.url, events=[EVENT])
    do_create_monitor(workspace=workspace, data={"name": "Daily", "metric": "cost_day", "alert": 1.0})
    actions.do_start_run(workspace=workspace, workflow=workflow, run_id="run_today", actor="user:alice")
    _spend(workspace, "run_today", [2.0])
    (fired,) = evaluate_monitors()
    assert fired.state == "alert" and fired.deliveries == 1
    today = timezone.now().date().isoformat()
    data = json.loads(Delivery.objects.get(event_type=EVENT).payload)["data"]
    assert data["range"] == {"from": today, "to": today}
    assert data["dashboardUrl"] == f"https://wb.example/dashboard/?from={today}&to={today}"


@pytest.mark.parametrize(
    ("current", "value", "expected"),
    [
        ("ok", 9.9, "warning"),  # warning 5, alert 10, margin 0.2
        ("ok", 10.0, "alert"),
        ("alert", 8.5, "alert"),  # above 10 x 0.8: stays
        ("alert", 7.9, "warning"),  # below 8, above the warning line
        ("warning", 4.5, "warning"),  # above 5 x 0.8
        ("warning", 3.9, "ok"),
        ("alert", 3.9, "ok"),
        ("ok", 4.9, "ok"),
        ("alert", None, "alert"),  # nothing to measure: no change
    ],
)
def test_hysteresis(current, value, expected):
    assert next_state(current, value, warning=5, alert=10, margin=0.2) == expected
