"""The sender: Standard Webhooks signatures (checked with the spec's reference implementation),
retries with the same webhook-id, 410 / redirects / Retry-After, the egress guard, Slack, e-mail."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone
from standardwebhooks import Webhook as Verifier
from standardwebhooks import WebhookVerificationError

from runs.actions.webhooks import (
    do_retry_delivery,
    do_rotate_webhook_secret,
    do_send_test_event,
    do_set_notification_preferences,
)
from runs.models import Delivery, Webhook
from runs.notifications import policy
from runs.notifications.delivery import GIVEN_UP, deliver_due
from tests.fakes.webhook_receiver import Answer, Receiver
from tests.notifications.conftest import bring_review_gate, make_hook

pytestmark = pytest.mark.django_db


def _due_now():
    """Time passes: every pending delivery is due, every hook's breaker cooldown is over."""
    Delivery.objects.filter(status="pending").update(next_attempt_at=timezone.now())
    Webhook.objects.filter(backoff_until__isnull=False).update(backoff_until=timezone.now())


def test_signed_delivery_verifies_with_standardwebhooks(workspace, started_run, receiver):
    created = make_hook(workspace, receiver.url)
    bring_review_gate(workspace)
    assert deliver_due() == 1
    (hit,) = receiver.hits
    payload = Verifier(created.secret).verify(hit.body, hit.headers)  # raises when the signature is wrong
    assert payload["type"] == "gate.requested"
    assert hit.headers["webhook-id"].startswith("msg_")
    assert hit.headers["webhook-signature"].startswith("v1,")
    with pytest.raises(WebhookVerificationError):
        Verifier("whsec_" + "A" * 43 + "=").verify(hit.body, hit.headers)
    row = Delivery.objects.get()
    assert (row.status, row.response_status, row.response_excerpt, row.attempts) == (
        "delivered",
        200,
        "ok",
        1,
    )
    assert row.public_id == hit.headers["webhook-id"]


def test_rotation_signs_with_both_secrets(workspace, started_run, receiver):
    old = make_hook(workspace, receiver.url)
    new = do_rotate_webhook_secret(workspace=workspace, webhook_id=old.webhook.public_id)
    assert new.secret != old.secret
    bring_review_gate(workspace)
    deliver_due()
    (hit,) = receiver.hits
    assert len(hit.headers["webhook-signature"].split(" ")) == 2
    Verifier(old.secret).verify(hit.body, hit.headers)
    Verifier(new.secret).verify(hit.body, hit.headers)


def test_failure_is_retried_later_with_the_same_webhook_id(workspace, started_run):
    answers = iter([Answer(500, body=b"boom"), Answer(200)])
    with Receiver(lambda hit: next(answers)) as rx:
        make_hook(workspace, rx.url)
        bring_review_gate(workspace)
        before = timezone.now()
        deliver_due()
        row = Delivery.objects.get()
        assert (row.status, row.attempts, row.response_status, row.response_excerpt) == (
            "pending",
            1,
            500,
            "boom",
        )
        wait = (row.next_attempt_at - before).total_seconds()
        assert 4 <= wait <= 6.5  # 5 s, with jitter
        assert deliver_due() == 0  # not due yet
        _due_now()
        deliver_due()
        first, second = rx.hits
        assert first.headers["webhook-id"] == second.headers["webhook-id"]
        assert first.body == second.body
        assert Delivery.objects.get().status == "delivered"


def test_410_disables_the_hook_and_tells_the_owners(workspace, started_run, alice):
    alice.email = "alice@example.com"
    alice.save()
    with Receiver(lambda hit: Answer(410)) as rx:
        hook = make_hook(workspace, rx.url).webhook
        bring_review_gate(workspace)
        deliver_due()
    hook.refresh_from_db()
    assert not hook.enabled and "410" in hook.disabled_reason
    assert Delivery.objects.get(webhook=hook).status == "failed"
    notice = Delivery.objects.get(channel="email")
    assert notice.event_type == "webhook.disabled" and notice.recipient == alice
    deliver_due()  # the notice goes out by e-mail
    assert len(mail.outbox) == 1 and "disabled" in mail.outbox[0].subject
    assert hook.public_id in mail.outbox[0].body or hook.url in mail.outbox[0].body


def test_redirects_are_failures_and_not_followed(workspace, started_run):
    with Receiver() as target, Receiver(lambda hit: Answer(302, headers={"Location": target.url})) as rx:
        make_hook(workspace, rx.url)
        bring_review_gate(workspace)
        deliver_due()
        assert len(rx.hits) == 1 and target.hits == []
    row = Delivery.objects.get()
    assert row.status == "pending" and "redirect" in row.error


def test_429_with_retry_after_slows_down(workspace, started_run):
    with Receiver(lambda hit: Answer(429, headers={"Retry-After": "3600"})) as rx:
        make_hook(workspace, rx.url)
        bring_review_gate(workspace)
        before = timezone.now()
        deliver_due()
    wait = (Delivery.objects.get().next_attempt_at - before).total_seconds()
    assert 3600 * 0.9 <= wait <= 3600 * 1.1 + 1


def test_502_slows_down_one_step(workspace, started_run):
    with Receiver(lambda hit: Answer(502)) as rx:
        make_hook(workspace, rx.url)
        bring_review_gate(workspace)
        before = timezone.now()
        deliver_due()
    wait = (Delivery.objects.get().next_attempt_at - before).total_seconds()
    assert 270 <= wait <= 331  # 5 min instead of 5 s


def test_persistent_failure_disables_the_hook(workspace, started_run, alice):
    with Receiver(lambda hit: Answer(500)) as rx:
        hook = make_hook(workspace, rx.url).webhook
        bring_review_gate(workspace)
        for _ in range(policy.MAX_ATTEMPTS):
            _due_now()
            deliver_due()
        assert len(rx.hits) == policy.MAX_ATTEMPTS
        assert len({h.headers["webhook-id"] for h in rx.hits}) == 1
    hook.refresh_from_db()
    row = Delivery.objects.get(webhook=hook)
    assert (row.status, row.attempts) == ("failed", policy.MAX_ATTEMPTS)
    assert not hook.enabled and hook.disabled_reason == GIVEN_UP


def test_the_egress_guard_refuses_at_connect_time(settings, workspace, started_run, receiver):
    make_hook(workspace, receiver.url)  # allowed when the hook was made
    settings.WORKBENCH_EGRESS_ALLOW = []  # ... and no longer when it is called
    bring_review_gate(workspace)
    deliver_due()
    assert receiver.hits == []
    row = Delivery.objects.get()
    assert row.status == "pending" and row.error.startswith("ADDRESS_NOT_ALLOWED")
    assert "WORKBENCH_EGRESS_ALLOW" in row.error


def test_a_hook_to_a_private_address_is_refused(settings, workspace):
    from runs.actions import ActionError

    settings.WORKBENCH_EGRESS_ALLOW = []
    for url in (
        "http://127.0.0.1:9/x",
        "http://169.254.169.254/latest",
        "http://10.0.0.1/",
        "ftp://x.example/",
    ):
        with pytest.raises(ActionError) as refused:
            make_hook(workspace, url)
        assert refused.value.code in ("ADDRESS_NOT_ALLOWED", "URL_NOT_ALLOWED")
    assert Webhook.objects.count() == 0


def test_slack_gets_a_message_with_the_gate_link(workspace, started_run, receiver):
    make_hook(workspace, receiver.url, kind="slack")
    bring_review_gate(workspace)
    deliver_due()
    (hit,) = receiver.hits
    body = hit.json
    assert "gate is waiting" in body["text"]
    section = body["blocks"][0]["text"]["text"]
    assert "review" in section and "Parse, review, publish" in section
    button = body["blocks"][1]["elements"][0]
    assert button["text"]["text"] == "Open the gate"
    assert button["url"] == "https://wb.example/runs/run_n1/#gate-panel"
    assert "webhook-signature" not in hit.headers


def test_email_to_a_decider_and_not_after_a_demotion(workspace, started_run, bob):
    from runs.actions.workspaces import do_change_member_role

    bob.email = "bob@example.com"
    bob.save()
    do_set_notification_preferences(user=bob, workspace=workspace, gates_to_decide=True, runs_i_started=False)
    bring_review_gate(workspace)
    deliver_due()
    (message,) = mail.outbox
    assert message.to == ["bob@example.com"] and "gate is waiting" in message.subject
    assert "Open the gate: https://wb.example/runs/run_n1/#gate-panel" in message.body
    # another gate waits, but bob is a viewer by the time it is sent: nothing goes to him
    from runs import actions
    from runs.engine import commands as c

    actions.do_command(
        workspace=workspace, run_id="run_n1", command=c.RequestGate(step_id="publish", gate="PAUSE_BEFORE")
    )
    owner = type(bob).objects.create_user("olga")
    from runs.actions.workspaces import add_member

    add_member(workspace, owner, "owner")
    do_change_member_role(workspace=workspace, acting_user=owner, username="bob", role="viewer")
    deliver_due()
    assert len(mail.outbox) == 1
    assert Delivery.objects.filter(channel="email", status="cancelled").count() == 1


def test_retry_and_test_event(workspace, started_run):
    answers = iter([Answer(410), Answer(200), Answer(200)])
    with Receiver(lambda hit: next(answers)) as rx:
        created = make_hook(workspace, rx.url)
        hook = created.webhook
        bring_review_gate(workspace)
        deliver_due()
        failed = Delivery.objects.get(webhook=hook)
        assert failed.status == "failed"
        from runs.actions import ActionError
        from runs.actions.webhooks import do_set_webhook_enabled

        with pytest.raises(ActionError):  # a disabled hook is enabled first
            do_retry_delivery(workspace=workspace, webhook_id=hook.public_id, delivery_id=failed.public_id)
        do_set_webhook_enabled(workspace=workspace, webhook_id=hook.public_id, enabled=True)
        do_retry_delivery(workspace=workspace, webhook_id=hook.public_id, delivery_id=failed.public_id)
        deliver_due()
        assert [h.headers["webhook-id"] for h in rx.hits] == [failed.public_id] * 2
        failed.refresh_from_db()
        assert failed.status == "delivered"
        test = do_send_test_event(workspace=workspace, webhook_id=hook.public_id)
        deliver_due()
        assert (
            Verifier(created.secret).verify(rx.hits[-1].body, rx.hits[-1].headers)["type"] == "webhook.test"
        )
        test.refresh_from_db()
        assert test.status == "delivered"


def test_the_schedule_spans_about_three_days():
    assert policy.SCHEDULE[:3] == (0, 5, 300) and policy.SCHEDULE[-1] == 86400
    assert 3 * 86400 <= sum(policy.SCHEDULE) <= 3.2 * 86400
    assert policy.retry_delay(policy.MAX_ATTEMPTS) is None
    assert policy.parse_retry_after("120") == 120
    assert policy.parse_retry_after("soon") is None
    assert policy.judge(204).delivered and policy.judge(301).retry and policy.judge(410).disable


def test_nothing_is_sent_without_a_delivery(workspace, started_run, receiver):
    """Nobody asked: an append, a sweep, nothing sent anywhere."""
    bring_review_gate(workspace)
    assert deliver_due() == 0
    assert receiver.hits == [] and mail.outbox == []


def test_stale_lease_holder_does_not_overwrite(workspace, started_run, receiver):
    """A worker whose lease ran out (another took the row) records nothing."""
    from runs.actions.webhooks import Outcome, claim_due, record_attempt

    make_hook(workspace, receiver.url)
    bring_review_gate(workspace)
    (mine,) = claim_due()
    Delivery.objects.update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    (theirs,) = claim_due()
    record_attempt(theirs, Outcome(True, 200, "ok"))
    record_attempt(mine, Outcome(False, 500, "", "late", retry_at=timezone.now()))
    assert Delivery.objects.get().status == "delivered"
    assert json.loads(Delivery.objects.get().payload)["type"] == "gate.requested"
