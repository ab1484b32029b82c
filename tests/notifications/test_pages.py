"""Settings pages: the workspace's hooks with their deliveries (owners), each person's choices."""

from __future__ import annotations

import pytest
from django.test import Client

from runs.models import Delivery, NotificationPreference, Webhook
from runs.notifications.delivery import deliver_due
from tests.fakes.webhook_receiver import Answer, Receiver
from tests.notifications.conftest import bring_review_gate

pytestmark = pytest.mark.django_db


def _signed_in(user, **kw) -> Client:
    client = Client(**kw)
    client.force_login(user)
    return client


def test_owner_adds_a_hook_sees_the_secret_once_and_the_delivery_log(workspace, started_run, alice):
    page = _signed_in(alice)
    with Receiver(lambda hit: Answer(500, body=b"<b>down</b>")) as rx:
        added = page.post(
            "/settings/webhooks/", {"op": "create", "url": rx.url, "events": ["gate.requested"]}
        )
        assert added.status_code == 201
        hook = Webhook.objects.get()
        assert hook.secret in added.content.decode() and added["Cache-Control"] == "no-store"
        assert hook.secret not in page.get("/settings/webhooks/").content.decode()
        bring_review_gate(workspace)
        deliver_due()
    html = page.get("/settings/webhooks/").content.decode()
    delivery = Delivery.objects.get()
    assert f'id="delivery-{delivery.public_id}" data-status="pending"' in html
    assert "500" in html and "&lt;b&gt;down&lt;/b&gt;" in html  # the excerpt, escaped


def test_test_event_disable_enable_retry(workspace, alice):
    page = _signed_in(alice)
    with Receiver(lambda hit: Answer(410)) as rx:
        page.post("/settings/webhooks/", {"op": "create", "url": rx.url, "events": ["gate.requested"]})
        hook = Webhook.objects.get()
        assert page.post("/settings/webhooks/", {"op": "test", "webhook": hook.public_id}).status_code == 302
        deliver_due()
        hook.refresh_from_db()
        assert not hook.enabled  # 410
        html = page.get("/settings/webhooks/").content.decode()
        assert "Disabled: the receiver answered 410 Gone" in html and 'value="retry"' in html
        page.post("/settings/webhooks/", {"op": "enable", "webhook": hook.public_id})
        rx.answer = lambda hit: Answer(200)
        failed = Delivery.objects.get()
        page.post(
            "/settings/webhooks/", {"op": "retry", "webhook": hook.public_id, "delivery": failed.public_id}
        )
        deliver_due()
        assert len(rx.hits) == 2
    failed.refresh_from_db()
    assert failed.status == "delivered"


def test_reviewer_and_viewer_are_refused_and_csrf_is_required(workspace, alice, bob, vera):
    for user in (bob, vera):
        client = _signed_in(user)
        assert client.get("/settings/webhooks/").status_code == 403
        assert (
            client.post(
                "/settings/webhooks/",
                {"op": "create", "url": "https://h.example/", "events": ["gate.requested"]},
            ).status_code
            == 403
        )
    strict = _signed_in(alice, enforce_csrf_checks=True)
    assert (
        strict.post(
            "/settings/webhooks/", {"op": "create", "url": "https://h.example/", "events": ["gate.requested"]}
        ).status_code
        == 403
    )
    assert Webhook.objects.count() == 0


def test_bad_input_on_the_page_changes_nothing(workspace, alice):
    page = _signed_in(alice)
    response = page.post(
        "/settings/webhooks/", {"op": "create", "url": "https://h.example/", "events": ["bogus"]}
    )
    assert response.status_code == 400 and b"INVALID_INPUT" in response.content
    assert page.post("/settings/webhooks/", {"op": "delete", "webhook": "wh_nope"}).status_code == 400
    assert Webhook.objects.count() == 0


def test_people_choose_their_own_mail(workspace, alice, vera):
    page = _signed_in(vera)
    html = page.get("/settings/notifications/").content.decode()
    assert "your role cannot decide gates here" in html
    page.post(
        "/settings/notifications/",
        {"op": "save", "workspace": "acme", "gates_to_decide": "on", "runs_i_started": "on"},
    )
    pref = NotificationPreference.objects.get(user=vera)
    assert (pref.gates_to_decide, pref.runs_i_started) == (False, True)  # a viewer decides no gate
    assert page.post("/settings/notifications/", {"op": "save", "workspace": "globex"}).status_code == 404
    assert page.post("/settings/notifications/", {}).status_code == 302
    assert NotificationPreference.objects.count() == 1
