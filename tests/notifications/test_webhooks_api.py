"""REST: /api/webhooks for owners and `manage` tokens; another workspace's hooks are 404."""

from __future__ import annotations

import pytest

from runs.models import Delivery, Webhook
from runs.notifications.delivery import deliver_due
from tests.api.conftest import BearerClient
from tests.fakes.webhook_receiver import Answer, Receiver
from tests.notifications.conftest import bring_review_gate

pytestmark = pytest.mark.django_db


def _client(workspace, scopes=("read", "manage")) -> BearerClient:
    from accounts.tokens import create_token

    return BearerClient(create_token(workspace=workspace, name="m", scopes=list(scopes)).secret)


def test_create_list_deliveries_retry_delete(workspace, started_run):
    api = _client(workspace)
    answers = iter([Answer(410), Answer(200)])
    with Receiver(lambda hit: next(answers)) as rx:
        created = api.post(
            "/api/webhooks", {"url": rx.url, "events": ["gate.requested"], "description": "ci"}
        )
        assert created.status_code == 201, created.content
        body = created.json()
        assert set(body) >= {"id", "url", "events", "secret"}
        assert body["secret"].startswith("whsec_") and body["events"] == ["gate.requested"]
        listed = api.get("/api/webhooks").json()
        assert [h["id"] for h in listed] == [body["id"]] and "secret" not in listed[0]
        bring_review_gate(workspace)
        deliver_due()
        deliveries = api.get(f"/api/webhooks/{body['id']}/deliveries").json()
        assert [(d["eventType"], d["status"], d["responseStatus"]) for d in deliveries] == [
            ("gate.requested", "failed", 410)
        ]
        Webhook.objects.update(enabled=True)  # (the 410 disabled it; an owner turns it back on)
        retried = api.post(f"/api/webhooks/{body['id']}/deliveries/{deliveries[0]['id']}/retry")
        assert retried.status_code == 202 and retried.json()["status"] == "pending"
        deliver_due()
        assert len(rx.hits) == 2 and rx.hits[0].headers["webhook-id"] == rx.hits[1].headers["webhook-id"]
    assert api.delete(f"/api/webhooks/{body['id']}").status_code == 204
    assert api.delete(f"/api/webhooks/{body['id']}").status_code == 404
    assert Delivery.objects.count() == 0


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"url": "https://h.example/x", "events": ["nope"]}, "INVALID_INPUT"),
        ({"url": "https://h.example/x", "events": []}, "INVALID_INPUT"),
        ({"url": "ftp://h.example/x", "events": ["gate.requested"]}, "URL_NOT_ALLOWED"),
        ({"url": "http://user:pw@h.example/x", "events": ["gate.requested"]}, "URL_NOT_ALLOWED"),
        ({"url": 5, "events": ["gate.requested"]}, "INVALID_INPUT"),
        ({"url": "https://h.example/x", "events": ["gate.requested"], "extra": 1}, "INVALID_INPUT"),
        ([], "INVALID_INPUT"),
    ],
)
def test_bad_input_is_refused_with_a_code(workspace, body, code):
    response = _client(workspace).post("/api/webhooks", body)
    assert response.status_code == 400 and response.json()["code"] == code, response.content
    assert Webhook.objects.count() == 0


def test_private_address_refused_without_allowance(settings, workspace):
    settings.WORKBENCH_EGRESS_ALLOW = []
    response = _client(workspace).post(
        "/api/webhooks", {"url": "http://127.0.0.1:8/x", "events": ["gate.requested"]}
    )
    assert response.status_code == 400 and response.json()["code"] == "ADDRESS_NOT_ALLOWED"


@pytest.mark.parametrize("host", ["0177.0.0.1", "0x7f.0.0.1", "2130706433", "127.1", "0x7f000001"])
def test_numeric_spellings_of_an_address_are_refused_when_saved(settings, workspace, host):
    """``http://0177.0.0.1/`` was saved, and every delivery then failed with an internal error:
    the resolver reads it as 127.0.0.1 (issue 54). Refused at once, in words, with the address."""
    settings.WORKBENCH_EGRESS_ALLOW = ["127.0.0.0/8"]  # even where loopback would be allowed
    response = _client(workspace).post(
        "/api/webhooks", {"url": f"http://{host}/x", "events": ["gate.requested"]}
    )
    assert response.status_code == 400 and response.json()["code"] == "URL_NOT_ALLOWED", response.content
    assert "127.0.0.1" in response.json()["error"]
    assert Webhook.objects.count() == 0


@pytest.mark.parametrize("scopes", [("read",), ("read", "write", "review")])
def test_tokens_without_manage_are_refused(workspace, scopes):
    api = _client(workspace, scopes)
    assert api.get("/api/webhooks").status_code == 403
    assert (
        api.post("/api/webhooks", {"url": "https://h.example/x", "events": ["gate.requested"]}).status_code
        == 403
    )
    assert Webhook.objects.count() == 0


def test_another_workspaces_hook_is_404(workspace, other_workspace, started_run):
    from runs.actions.webhooks import do_create_webhook

    theirs = do_create_webhook(
        workspace=other_workspace, url="https://h.example/x", events=["gate.requested"]
    ).webhook
    delivery = Delivery.objects.create(
        public_id="msg_" + "0" * 26,
        workspace=other_workspace,
        webhook=theirs,
        channel="webhook",
        event_type="gate.requested",
        payload="{}",
        status="failed",
        next_attempt_at=theirs.created_at,
    )
    api = _client(workspace)
    missing = "wh_" + "f" * 24
    for path in (
        "/api/webhooks/{}/deliveries",
        f"/api/webhooks/{{}}/deliveries/{delivery.public_id}/retry",
        "/api/webhooks/{}",
    ):
        method = "post" if path.endswith("retry") else ("delete" if path.endswith("}") else "get")
        here = getattr(api, method)(path.format(theirs.public_id))
        gone = getattr(api, method)(path.format(missing))
        assert here.status_code == gone.status_code == 404
        assert here.json() == gone.json()
    assert api.get("/api/webhooks").json() == []
    assert Webhook.objects.filter(pk=theirs.pk).exists()
    delivery.refresh_from_db()
    assert delivery.status == "failed"


def test_owner_session_may_reviewer_may_not(workspace, alice, bob):
    owner = BearerClient(None)
    owner.client.force_login(alice)
    assert owner.get("/api/webhooks").status_code == 200
    reviewer = BearerClient(None)
    reviewer.client.force_login(bob)
    assert reviewer.get("/api/webhooks").status_code == 403
