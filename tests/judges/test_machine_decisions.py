"""A machine decision is never hidden: the gate panel and the timeline say so, the outbox's
gate.resolved names the channel, and the signed bundle (still a valid protocol 1.0.0 bundle)
lists it in its approvals as the judge's."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess

import pytest
from django.test import Client

from judges import actions as judge_actions
from judges.models import Proposal
from runs.actions.signing import do_export_bundle, signer_for
from runs.actions.webhooks import do_create_webhook
from runs.models import Delivery, Event
from runs.protocol.bundle import check_bundle
from runs.protocol.canonical import canonical_bytes
from runs.protocol.signing import attach, sign_envelope
from runs.selectors.signing import approval_actors, bundle_signature
from tests.conftest import REPO
from tests.judges.test_delegation import Gates, _agreeing

NODE = shutil.which("node")

pytestmark = pytest.mark.django_db


def _delegated_run(workspace, workflow, judge, fake):
    """A run whose review gate the judge decided under delegation (earned on 50 agreeing labels)."""
    gates = Gates(workspace, workflow, judge, fake)
    _agreeing(gates, 50)
    judge_actions.do_set_policy(judge, delegation="both", audit_percent=1)
    return next(
        r for r in (gates.judged("approved") for _ in range(5)) if Proposal.objects.get(run=r).delegated
    )


def test_a_delegated_decision_shows_as_the_judges_everywhere(alice, workspace, workflow, judge, fake):
    do_create_webhook(
        workspace=workspace, url="https://hooks.example/judge", events=["gate.resolved"], actor="user:alice"
    )
    run = _delegated_run(workspace, workflow, judge, fake)
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
    # ... with the policy that allowed it, signed
    policy = verdict.approvals[0]["policy"]
    assert policy == Proposal.objects.get(run=run).policy
    assert (policy["judge"], policy["delegation"], policy["items"]) == ("judge:reviewer@1", "both", 50)
    assert policy["kappa"] >= policy["kappaFloor"] == 0.8 and verdict.approvals[0]["channel"] == "judge"
    # the policy that allowed it travels in the decision's note (a protocol field)
    note = next(e for e in signed.bundle["trace"] if e["type"] == "human_gate_resolved")["note"]
    assert "Decided by judge reviewer@1 under its delegation policy" in note


@pytest.mark.slow  # starts node
def test_the_node_verifier_agrees_on_a_machine_decision(alice, workspace, workflow, judge, fake, tmp_path):
    """bench/verify_signature.mjs, written from the specifications alone, finds the signed bundle
    valid with the judge's approval and its policy; a policy that names another actor is refused
    by both verifiers."""
    if NODE is None:
        pytest.skip("node is not installed")
    run = _delegated_run(workspace, workflow, judge, fake)
    signed = do_export_bundle(run, exported_by="user:alice")
    anonymous = Client()
    keys = tmp_path / "jwks.json"
    keys.write_bytes(anonymous.get("/.well-known/jwks.json").content)
    validity = tmp_path / "validity.json"
    validity.write_bytes(anonymous.get("/.well-known/workbench-keys.json").content)
    path = tmp_path / "signed.json"
    path.write_bytes(signed.data)

    def node(bundle_path):
        proc = subprocess.run(
            [NODE, str(REPO / "bench" / "verify_signature.mjs"), str(bundle_path), "--keys", str(keys),
             "--validity", str(validity), "--require-signature"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        return json.loads(proc.stdout)

    report = node(path)
    assert report["ok"] and report["status"] == "signed", report
    (approval,) = report["approvals"]
    assert approval["by"] == "judge:reviewer@1" and approval["policy"]["judge"] == "judge:reviewer@1"
    assert approval["policy"] == Proposal.objects.get(run=run).policy

    # a statement whose policy names someone else, signed by the same key: both refuse it
    statement = json.loads(base64.b64decode(signed.envelope["payload"]))
    statement["predicate"]["approvals"][0]["policy"]["judge"] = "user:mallory"
    key, _row = signer_for(workspace)
    forged = attach(signed.bundle, sign_envelope(canonical_bytes(statement), key))
    bad = tmp_path / "forged.json"
    bad.write_bytes(canonical_bytes(forged))
    assert node(bad)["code"] == "APPROVAL_MISMATCH"
    assert bundle_signature(forged, require_signature=True).code == "APPROVAL_MISMATCH"
