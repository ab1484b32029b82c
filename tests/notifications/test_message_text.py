"""What people read in Slack and e-mail, whatever a run's title holds; links that name this
server (issue 49's defects)."""

from __future__ import annotations

import json

import pytest
from django.core import mail

from runs import actions
from runs.actions.webhooks import do_set_notification_preferences
from runs.models import Delivery
from runs.notifications.delivery import deliver_due
from runs.notifications.messages import email_message, slack_message
from tests.notifications.conftest import make_hook

pytestmark = pytest.mark.django_db


def _waiting_run(workspace, workflow, title: str, run_id: str = "run_t1"):
    workflow["steps"][0]["gatePolicy"] = "PAUSE_BEFORE"
    return actions.do_start_run(
        workspace=workspace, workflow=workflow, run_id=run_id, actor="user:alice", title=title
    )


def test_slack_text_never_pings_or_links(workspace, workflow, receiver):
    make_hook(workspace, receiver.url, kind="slack")
    _waiting_run(workspace, workflow, "<!channel> deploy <https://evil.example|click> & co")
    deliver_due()
    (hit,) = receiver.hits
    body = hit.json
    everything = json.dumps(body)
    assert "<!channel>" not in everything and "<https://evil" not in everything
    assert "&lt;!channel&gt;" in body["text"] and "&amp; co" in body["text"]
    assert "&lt;!channel&gt;" in body["blocks"][0]["text"]["text"]


@pytest.mark.parametrize("breaker", ["\u2028", "\u2029"])  # control characters are refused in titles
def test_a_title_with_a_line_separator_still_mails(workspace, workflow, alice, breaker):
    alice.email = "alice@example.com"
    alice.save()
    do_set_notification_preferences(
        user=alice, workspace=workspace, gates_to_decide=True, runs_i_started=False
    )
    _waiting_run(workspace, workflow, f"first{breaker}second")
    deliver_due()
    (message,) = mail.outbox
    assert "first second" in message.subject
    assert Delivery.objects.get(channel="email").status == "delivered"


def test_pure_renderers_keep_one_line_subjects():
    message = {"type": "gate.requested", "data": {"run": {"title": "a\u2028b\nc"}, "gate": {"stepId": "s"}}}
    subject, _ = email_message(message)
    assert "\u2028" not in subject and "\n" not in subject
    assert slack_message({"type": "run.failed", "data": {"run": {"title": "<@U123>"}}})["text"].endswith(
        "&lt;@U123&gt;"
    )


def test_links_name_the_server_that_was_reached(settings, client, workspace, workflow, receiver, alice):
    """No WORKBENCH_SITE_URL: the links use the origin requests reached this server at, not
    http://127.0.0.1:8000."""
    settings.WORKBENCH_SITE_URL = ""
    settings.ALLOWED_HOSTS = ["wb.internal"]
    hook = make_hook(workspace, receiver.url).webhook
    client.force_login(alice)
    client.get("/", HTTP_HOST="wb.internal:8123")
    _waiting_run(workspace, workflow, "linked")
    gate = json.loads(Delivery.objects.get(webhook=hook).payload)["data"]["gate"]
    assert gate["url"] == "http://wb.internal:8123/runs/run_t1/#gate-panel"
    settings.WORKBENCH_SITE_URL = "https://wb.example"
    _waiting_run(workspace, workflow, "configured", run_id="run_t2")
    gate = json.loads(Delivery.objects.filter(webhook=hook).order_by("-pk").first().payload)["data"]["gate"]
    assert gate["url"].startswith("https://wb.example/runs/run_t2/")
