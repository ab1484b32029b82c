"""A machine decision is never hidden: the gate panel and the timeline say so, the outbox's
gate.resolved names the channel, and the signed bundle (still a valid protocol 1.0.0 bundle)
lists it in its approvals as the judge's."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from judges import actions as judge_actions
from judges.models import Proposal
from runs.actions.signing import do_export_bundle
from runs.actions.webhooks import do_create_webhook
from runs.models import Delivery, Event
from runs.protocol.bundle import check_bundle
from runs.selectors.signing import approval_actors, bundle_signature
from tests.judges.test_delegation import Gates, _agreeing

pytestmark = pytest.mark.django_db


def test_a_delegated_decision_shows_as_the_judges_everywhere(alice, workspace, workflow, judge, fake):
    gates = Gates(workspace, workflow, judge, fake)
    _agreeing(gates, 50)
    judge_actions.do_set_policy(judge, delegation="both", audit_percent=1)
    do_create_webhook(
        workspace=workspace, url="https://hooks.example/judge", events=["gate.resolved"], actor="user:alice"
    )
    run = next(
        r for r in (gates.judged("approved") for _ in range(5)) if Proposal.objects.get(run=r).delegated
    )
    event = Event.objects.get(run=run, type="human_gate_resolved")
    assert event.actor == "judge:reviewer@1"

    # the outbox: gate.resolved decided by the judge, through the "judge" channel
    message = json.loads(Delivery.objects.filter(event_type="gate.resolved").latest("pk").payload)
    assert message["data"]["gate"]["decidedBy"] == "judge:reviewer@1"
    assert message["data"]["gate"]["channel"] == "judge"

    # the gate panel's decisions and the timeline
    client = Client()
    client.force_login(alice)
    html = client.get(f"/runs/{run.run_id}/").content.decode()
    assert "machine decision" in html and "by judge:reviewer@1" in html

    # the signed bundle: valid protocol 1.0.0, its approvals name the judge
    signed = do_export_bundle(run, exported_by="user:alice")
    checked = check_bundle(signed.data)
    assert checked.ok, checked.message
    assert signed.bundle["protocolVersion"] == "1.0.0"
    _actors, gate_indices = approval_actors(run)
    verdict = bundle_signature(signed.bundle, gate_indices, require_signature=True)
    assert verdict.ok and verdict.signed, verdict.message
    assert [(a["by"], a["decision"]) for a in verdict.approvals] == [("judge:reviewer@1", "approved")]
    # the policy that allowed it travels in the decision's note (a protocol field)
    note = next(e for e in signed.bundle["trace"] if e["type"] == "human_gate_resolved")["note"]
    assert "Decided by judge reviewer@1 under its delegation policy" in note
