"""E-mailed decision links (issue 49): signed, single-use, expiring, bound to the recipient and
the gate; GET never decides, the POST decides as the recipient with channel "email"."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone

from runs.actions.decisions import decision_channels
from runs.actions.gatelinks import do_set_email_link_sign_in, token_hash
from runs.actions.webhooks import do_set_notification_preferences
from runs.models import Event, GateLink, Run
from runs.notifications.delivery import deliver_due
from runs.selectors.runs import run_state
from tests.notifications.conftest import bring_review_gate

pytestmark = pytest.mark.django_db

LINK = re.compile(r"(Approve|Reject): https://wb\.example(/gate-links/[^/\s]+/\?decision=\w+)")


def _mail_links(message) -> dict[str, str]:
    return dict(LINK.findall(message.body))


def _mail_links_after(workspace, run_id):
    bring_review_gate(workspace, run_id=run_id)
    deliver_due()
    return _mail_links(mail.outbox[-1])


def _decided(run_id="run_n1") -> list[dict]:
    return [e.data for e in Event.objects.filter(run__run_id=run_id, type="human_gate_resolved")]


def _waiting(run_id="run_n1") -> bool:
    return bool(run_state(Run.objects.get(run_id=run_id)).pending_gates())


@pytest.fixture
def reviewer(bob, workspace):
    bob.email = "bob@example.com"
    bob.save()
    do_set_notification_preferences(user=bob, workspace=workspace, gates_to_decide=True, runs_i_started=False)
    return bob


def test_the_gate_email_carries_approve_and_reject_links(workspace, started_run, reviewer):
    links = _mail_links_after(workspace, "run_n1")
    assert set(links) == {"Approve", "Reject"}
    body = mail.outbox[0].body
    assert "works once, for you only, for 24 hours" in body
    token = links["Approve"].split("/")[2]
    row = GateLink.objects.get()
    assert row.token_hash == token_hash(token) and token not in row.token_hash  # only the hash is kept
    assert (row.recipient, row.step_id, row.gate) == (reviewer, "review", "PAUSE_BEFORE")
    hours = (row.expires_at - row.created_at).total_seconds() / 3600
    assert 23.9 < hours <= 24


def test_get_never_decides_and_post_decides_as_the_recipient(workspace, started_run, reviewer):
    links = _mail_links_after(workspace, "run_n1")
    anonymous = Client(enforce_csrf_checks=True)
    for _ in range(3):  # a link scanner opens it, any number of times
        page = anonymous.get(links["Approve"])
        assert page.status_code == 200 and b"Confirm your decision" in page.content
        assert page["Referrer-Policy"] == "same-origin"
    assert _decided() == [] and _waiting()
    assert b"Parse, review, publish" in page.content and b"review" in page.content
    csrf = page.cookies["csrftoken"].value
    refused = anonymous.post(links["Approve"], {"decision": "approved"})  # no CSRF token
    assert refused.status_code == 403 and _decided() == []
    done = anonymous.post(
        links["Approve"], {"decision": "approved", "note": "fine", "csrfmiddlewaretoken": csrf}
    )
    assert done.status_code == 200 and b'data-outcome="decided"' in done.content
    (event,) = _decided()
    assert (event["decision"], event["stepId"], event.get("note")) == ("approved", "review", "fine")
    actor = Event.objects.get(event_id=event["id"]).actor
    assert actor == "user:bob"
    assert decision_channels(Run.objects.get(run_id="run_n1")) == {event["id"]: "email"}


def test_a_reused_link_decides_nothing_and_says_so(workspace, started_run, reviewer):
    links = _mail_links_after(workspace, "run_n1")
    client = Client()
    assert client.post(links["Reject"], {"decision": "rejected"}).status_code == 200
    again = client.post(links["Reject"], {"decision": "rejected"})
    assert again.status_code == 410 and b"already used" in again.content
    assert client.get(links["Approve"]).status_code == 410  # the pair is one link
    assert len(_decided()) == 1


def test_an_expired_link_decides_nothing(workspace, started_run, reviewer):
    links = _mail_links_after(workspace, "run_n1")
    GateLink.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    client = Client()
    page = client.get(links["Approve"])
    assert page.status_code == 410 and b"expired" in page.content
    assert client.post(links["Approve"], {"decision": "approved"}).status_code == 410
    assert _decided() == [] and _waiting()


def test_another_recipients_link_decides_nothing(workspace, started_run, reviewer, alice):
    links = _mail_links_after(workspace, "run_n1")
    client = Client()
    client.force_login(alice)  # an owner, who may decide gates, but the link is bob's
    page = client.get(links["Approve"])
    assert page.status_code == 403 and b"sent to another person" in page.content
    assert client.post(links["Approve"], {"decision": "approved"}).status_code == 403
    assert _decided() == []
    assert GateLink.objects.get().used_at is None  # bob's link still works for bob


def test_a_gate_decided_elsewhere_and_unknown_tokens(workspace, started_run, reviewer):
    from runs import actions
    from runs.engine import commands as c

    links = _mail_links_after(workspace, "run_n1")
    actions.do_command(
        workspace=workspace,
        run_id="run_n1",
        command=c.ResolveGate(step_id="review", gate="PAUSE_BEFORE", decision="approved"),
        actor="user:alice",
    )
    client = Client()
    page = client.post(links["Reject"], {"decision": "rejected"})
    assert page.status_code == 409 and b"no longer waiting" in page.content
    assert [e["decision"] for e in _decided()] == ["approved"]
    assert client.get("/gate-links/" + "x" * 43 + "/").status_code == 404
    assert client.get("/gate-links/short/").status_code == 404
    bad = client.post(links["Reject"].replace("?decision=rejected", ""), {"decision": "maybe"})
    assert bad.status_code in (400, 409)


def test_workspace_setting_requires_a_signed_in_recipient(workspace, started_run, reviewer):
    do_set_email_link_sign_in(workspace=workspace, required=True)
    links = _mail_links_after(workspace, "run_n1")
    anonymous = Client()
    page = anonymous.get(links["Approve"])
    assert page.status_code == 302 and page["Location"].startswith("/accounts/login/")
    assert anonymous.post(links["Approve"], {"decision": "approved"}).status_code == 302
    assert _decided() == []
    signed = Client()
    signed.force_login(reviewer)
    assert signed.get(links["Approve"]).status_code == 200
    assert signed.post(links["Approve"], {"decision": "approved"}).status_code == 200
    assert len(_decided()) == 1


def test_a_high_risk_gate_requires_sign_in(workspace, workflow, reviewer):
    from runs import actions

    actions.do_start_run(
        workspace=workspace,
        workflow=workflow,
        run_id="run_risky",
        actor="user:alice",
        metadata={"workbench.highRisk": ["review"]},
    )
    links = _mail_links_after(workspace, "run_risky")
    assert Client().get(links["Approve"]).status_code == 302
    assert Client().post(links["Approve"], {"decision": "approved"}).status_code == 302
    assert _decided("run_risky") == []
    signed = Client()
    signed.force_login(reviewer)
    page = signed.get(links["Approve"])
    assert b"high risk" in page.content
    assert signed.post(links["Approve"], {"decision": "approved"}).status_code == 200


def test_a_demoted_recipients_link_decides_nothing(workspace, started_run, reviewer, alice):
    from runs.actions.workspaces import do_change_member_role

    links = _mail_links_after(workspace, "run_n1")
    do_change_member_role(workspace=workspace, acting_user=alice, username="bob", role="viewer")
    assert Client().post(links["Approve"], {"decision": "approved"}).status_code == 403
    assert _decided() == []


def test_page_decisions_record_the_page_channel(workspace, started_run, alice):
    client = Client()
    client.force_login(alice)
    bring_review_gate(workspace)
    client.post(
        "/runs/run_n1/gates/resolve/",
        {"decision": "approved", "step_id": "review", "gate": "PAUSE_BEFORE"},
    )
    (event,) = _decided()
    assert decision_channels(Run.objects.get(run_id="run_n1")) == {event["id"]: "page"}


def test_owners_set_the_sign_in_requirement_on_the_webhooks_page(workspace, alice, bob):
    from runs.actions.gatelinks import workspace_requires_sign_in

    owner = Client()
    owner.force_login(alice)
    assert b"Decision links in e-mail" in owner.get("/settings/webhooks/").content
    owner.post("/settings/webhooks/", {"op": "email_links", "require_sign_in": "on"})
    assert workspace_requires_sign_in(workspace.pk)
    reviewer = Client()
    reviewer.force_login(bob)
    assert reviewer.post("/settings/webhooks/", {"op": "email_links"}).status_code in (403, 404)
    assert workspace_requires_sign_in(workspace.pk)
    owner.post("/settings/webhooks/", {"op": "email_links"})
    assert not workspace_requires_sign_in(workspace.pk)


def test_rest_decisions_record_the_api_channel(workspace, started_run):
    from accounts.tokens import create_token

    secret = create_token(workspace=workspace, name="ci", scopes=["read", "review"]).secret
    bring_review_gate(workspace)
    response = Client().post(
        "/api/runs/run_n1/gates/resolve",
        {"stepId": "review", "gate": "PAUSE_BEFORE", "decision": "rejected"},
        content_type="application/json",
        headers={"Authorization": f"Bearer {secret}"},
    )
    assert response.status_code == 200, response.content
    (event,) = _decided()
    assert decision_channels(Run.objects.get(run_id="run_n1")) == {event["id"]: "api"}
