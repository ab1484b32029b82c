"""Gate policies (runs.actions.gatepolicy): quorum votes, separation of duties, assignment in the
inbox, escalation after a wait, the settings page and the REST endpoints; bundles stay protocol
1.0.0 (a vote is an annotation, the deciding one the ``human_gate_resolved`` event)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from runs import actions
from runs.actions import ActionError
from runs.actions.gatepolicy import (
    GATE_ESCALATED,
    QUORUM_TAG,
    VOTE_TAG,
    do_decide_gate,
    do_escalate_gates,
    do_set_gate_policy,
)
from runs.models import Delivery, GateEscalation, GateVote, Run
from runs.protocol.timestamps import to_datetime
from runs.protocol.values import loads
from tests.pages.conftest import login

pytestmark = pytest.mark.django_db

HX = {"HX-Request": "true"}
TWO_OF_THREE = {"quorum": 2, "separationOfDuties": True}


@pytest.fixture
def dave(django_user_model, workspace):
    from runs.actions.workspaces import add_member

    user = django_user_model.objects.create_user(username="dave", password="dave-password-123")
    add_member(workspace, user, "reviewer")
    return user


def _decide(workspace, actor, decision="approved", run_id="run_q", **kw):
    return do_decide_gate(
        workspace=workspace,
        run_id=run_id,
        step_id="review",
        gate="PAUSE_BEFORE",
        decision=decision,
        actor=actor,
        **kw,
    )


def _events(run, etype):
    return [(loads(e.body), e.actor) for e in run.events.filter(type=etype).order_by("seq")]


def test_two_of_three_with_separation_of_duties(workspace, alice, bob, dave, make_run):
    do_set_gate_policy(workspace=workspace, policy=TWO_OF_THREE)
    run = make_run("run_q")  # started by alice
    with pytest.raises(ActionError) as refused:
        _decide(workspace, "user:alice")
    assert refused.value.code == "SEPARATION_OF_DUTIES"
    first = _decide(workspace, "user:bob", note="looks right")
    assert not first.resolved and first.approvals == ("user:bob",)
    run.refresh_from_db()
    assert run.pending_gates == 1 and not _events(run, "human_gate_resolved")
    [(vote, actor)] = _events(run, "annotation")
    assert actor == "user:bob" and VOTE_TAG in vote["tags"] and "decision:approved" in vote["tags"]
    assert "1 of 2 approvals" in vote["text"] and vote["stepId"] == "review"
    with pytest.raises(ActionError) as again:
        _decide(workspace, "user:bob")
    assert again.value.code == "ALREADY_VOTED"
    second = _decide(workspace, "user:dave", channel="api")
    assert second.resolved
    run.refresh_from_db()
    assert run.pending_gates == 0
    [(resolved, by)] = _events(run, "human_gate_resolved")
    assert resolved["decision"] == "approved" and by == "user:dave"
    summary = _events(run, "annotation")[-1][0]
    assert QUORUM_TAG in summary["tags"] and "user:bob, user:dave (2 of 2)" in summary["text"]
    votes = list(GateVote.objects.filter(run=run).values_list("voter", "channel", "seq", "metadata"))
    assert [v[:2] for v in votes] == [("user:bob", "page"), ("user:dave", "api")]
    resolved_seq = run.events.get(type="human_gate_resolved").seq
    assert votes[1][2] == resolved_seq
    assert votes[1][3] == {"workbench.channel": "api", "workbench.voters": ["user:bob", "user:dave"]}


def test_the_bundle_stays_protocol_1_0_0_and_imports_with_the_same_state(workspace, bob, dave, make_run):
    from runs.protocol.validate import validate_bundle
    from runs.selectors.bundles import export_bundle_bytes
    from runs.selectors.runs import run_state

    do_set_gate_policy(workspace=workspace, policy={"quorum": 2})
    run = make_run("run_q")
    _decide(workspace, "user:bob")
    _decide(workspace, "user:dave")
    data = export_bundle_bytes(Run.objects.get(pk=run.pk))
    validate_bundle(loads(data))
    imported = actions.do_import_bundle(workspace=workspace, data=data, as_new_id=True)
    assert run_state(imported).gate_state == run_state(Run.objects.get(pk=run.pk)).gate_state
    assert imported.pending_gates == 0


def test_a_rejection_rejects_unless_the_policy_says_otherwise(workspace, bob, dave, make_run):
    do_set_gate_policy(workspace=workspace, policy={"quorum": 2})
    run = make_run("run_q")
    assert _decide(workspace, "user:bob", "rejected").resolved
    assert _events(run, "human_gate_resolved")[0][0]["decision"] == "rejected"

    do_set_gate_policy(workspace=workspace, policy={"quorum": 2, "rejections": 2})
    run2 = make_run("run_r")
    assert not _decide(workspace, "user:bob", "rejected", run_id="run_r").resolved
    assert _decide(workspace, "user:dave", "approved", run_id="run_r").resolved is False
    assert _decide(workspace, "user:alice", "approved", run_id="run_r").resolved
    assert _events(run2, "human_gate_resolved")[0][0]["decision"] == "approved"


def test_the_starter_may_still_reject_and_edits_need_a_single_approver(workspace, alice, bob, make_run):
    do_set_gate_policy(workspace=workspace, policy={"quorum": 2, "separationOfDuties": True})
    run = make_run("run_q")
    from runs.engine import commands as cmd

    with pytest.raises(ActionError) as refused:
        _decide(workspace, "user:bob", "edited", edit=cmd.WriteArtifact(key="notes", type_id="json", data={}))
    assert refused.value.code == "INVALID_INPUT" and refused.value.path == "edit"
    assert not run.events.filter(type="annotation").exists()
    assert _decide(workspace, "user:alice", "rejected").resolved  # one rejection rejects


def test_the_owner_of_the_starting_token_cannot_approve(workspace, bob, make_run):
    from accounts.tokens import create_token

    token = create_token(workspace=workspace, name="pipeline", scopes=["read", "write"], created_by=bob)
    run = make_run("run_q")
    Run.objects.filter(pk=run.pk).update(created_by=token.token.actor)
    do_set_gate_policy(workspace=workspace, policy={"separationOfDuties": True})
    with pytest.raises(ActionError) as refused:
        _decide(workspace, "user:bob")
    assert refused.value.code == "SEPARATION_OF_DUTIES"
    assert _decide(workspace, "user:alice").resolved  # not alice's token


def test_a_run_policy_in_metadata_asks_for_more_never_for_less(workspace, bob, make_run):
    # the host that starts a run is the party its gates hold: its metadata cannot lower the
    # owner's quorum nor switch off their separation of duties, only ask for more
    do_set_gate_policy(workspace=workspace, policy={"quorum": 3, "separationOfDuties": True})
    lower = {"quorum": 1, "separationOfDuties": False}
    make_run("run_q", metadata={"workbench.gatePolicy": {"steps": {"review": lower}}})
    Run.objects.filter(run_id="run_q").update(created_by="user:bob")
    with pytest.raises(ActionError) as refused:
        _decide(workspace, "user:bob")  # the starter, still under separation of duties
    assert refused.value.code == "SEPARATION_OF_DUTIES"
    assert not _decide(workspace, "user:alice").resolved  # 1 of the owner's 3, not the host's 1
    do_set_gate_policy(workspace=workspace, policy={"quorum": 2}, workflow_id="wf-demo")
    make_run("run_w")
    assert not _decide(workspace, "user:bob", run_id="run_w").resolved  # the workflow's 2, not 3
    do_set_gate_policy(workspace=workspace, policy={})
    do_set_gate_policy(workspace=workspace, policy={}, workflow_id="wf-demo")
    make_run("run_more", metadata={"workbench.gatePolicy": {"quorum": 2}})  # more: taken
    assert not _decide(workspace, "user:bob", run_id="run_more").resolved
    assert _decide(workspace, "user:alice", run_id="run_more").resolved


def test_without_a_policy_a_decision_is_as_before(workspace, bob, make_run):
    run = make_run("run_q")
    result = _decide(workspace, "user:bob")
    assert result.resolved and not run.events.filter(type="annotation").exists()
    assert GateVote.objects.get(run=run).metadata == {
        "workbench.channel": "page",
        "workbench.voters": ["user:bob"],
    }


def test_bad_policies_are_refused_and_change_nothing(workspace):
    with pytest.raises(ActionError) as refused:
        do_set_gate_policy(workspace=workspace, policy={"quorum": 0})
    assert refused.value.code == "INVALID_INPUT"
    assert do_set_gate_policy(workspace=workspace, policy={}) is None


# --------------------------------------------------------------------------------------------
# Escalation


def test_escalation_after_t_notifies_the_next_tier_exactly_once(workspace, alice, bob, dave, make_run):
    for user in (bob, dave):
        user.email = f"{user.username}@example.com"
        user.save()
    do_set_gate_policy(
        workspace=workspace,
        policy={
            "assignees": ["bob"],
            "escalation": [
                {"afterSeconds": 600, "notify": ["dave"]},
                {"afterSeconds": 3600, "notify": ["role:owner"]},
            ],
        },
    )
    run = make_run("run_q")
    requested = run.events.filter(type="human_gate_requested").first()
    since = to_datetime(loads(requested.body)["ts"]) if requested else None
    if since is None:  # the gate is implied by the step's policy: it waits since parse completed
        since = to_datetime(run.events.filter(type="step_completed").order_by("-seq").first().ts)
    assert do_escalate_gates(now=since + timedelta(seconds=599)) == 0
    assert do_escalate_gates(now=since + timedelta(seconds=601)) == 1
    assert do_escalate_gates(now=since + timedelta(seconds=900)) == 0  # once
    [delivery] = Delivery.objects.filter(event_type=GATE_ESCALATED)
    assert delivery.recipient == dave and delivery.channel == "email"
    payload = loads(delivery.payload)["data"]
    assert payload["escalation"]["tier"] == 1 and payload["gate"]["stepId"] == "review"
    assert GateEscalation.objects.filter(run=run, tier=0).count() == 1
    # alice (owner) has no e-mail: the second tier is recorded, nobody to write to
    assert do_escalate_gates(now=since + timedelta(seconds=3601)) == 0
    assert GateEscalation.objects.filter(run=run, tier=1).get().recipients == 0
    assert do_escalate_gates(now=since + timedelta(seconds=99999)) == 0


def test_escalation_email_is_sent_by_the_outbox(workspace, dave, make_run, mailoutbox, settings):
    from runs.notifications.delivery import deliver_due

    dave.email = "dave@example.com"
    dave.save()
    do_set_gate_policy(workspace=workspace, policy={"escalation": [{"afterSeconds": 60, "notify": ["dave"]}]})
    make_run("run_q")
    from django.utils import timezone

    assert do_escalate_gates(now=timezone.now() + timedelta(hours=1)) == 1
    deliver_due()
    [mail] = mailoutbox
    assert mail.to == ["dave@example.com"] and "waited past its limit" in mail.subject
    assert "limit 60 s" in mail.body


# --------------------------------------------------------------------------------------------
# Pages


def test_inbox_assigned_to_me_and_waited_against_limit(client, workspace, bob, dave, make_run):
    make_run(
        "run_mine",
        metadata={
            "workbench.gatePolicy": {
                "assignees": ["bob"],
                "escalation": [{"afterSeconds": 3600, "notify": ["dave"]}],
            }
        },
    )
    make_run("run_other", metadata={"workbench.gatePolicy": {"assignees": ["role:owner"]}})
    login(client, bob)
    everything = client.get("/runs/inbox/").content.decode()
    assert 'data-run="run_mine"' in everything and 'data-run="run_other"' in everything
    mine = client.get("/runs/inbox/?assigned=me").content.decode()
    assert 'data-run="run_mine"' in mine and 'data-run="run_other"' not in mine
    assert "assigned to bob (you)" in mine and re.search(r"waited \d+ s of 1 h", mine)
    login(client, dave)
    assert (
        "No gate waiting here is assigned to you." in client.get("/runs/inbox/?assigned=me").content.decode()
    )


def test_inbox_vote_keeps_the_row_and_says_the_count(client, workspace, alice, bob, make_run):
    do_set_gate_policy(workspace=workspace, policy={"quorum": 2})
    make_run("run_q")
    login(client, bob)
    data = {
        "return": "inbox",
        "step_id": "review",
        "gate": "PAUSE_BEFORE",
        "decision": "approved",
        "row_key": "1-0",
    }
    html = client.post("/runs/run_q/gates/resolve/", data, headers=HX).content.decode()
    assert "Your approved vote is recorded: 1 of 2 approvals." in html
    assert "badge-approved" not in html and 'name="decision" value="approved"' in html
    assert "1 of 2 approvals (user:bob)" in html
    # a live refresh of the inbox (a GET) says it again: the vote is read, not only answered
    again = client.get("/runs/inbox/", headers=HX).content.decode()
    assert "Your approved vote is recorded: 1 of 2 approvals." in again
    login(client, alice)
    assert "vote is recorded" not in client.get("/runs/inbox/", headers=HX).content.decode()


def test_gate_panel_refuses_the_starter_in_words(client, workspace, alice, make_run):
    do_set_gate_policy(workspace=workspace, policy={"separationOfDuties": True})
    make_run("run_q")
    login(client, alice)
    data = {"step_id": "review", "gate": "PAUSE_BEFORE", "decision": "approved"}
    html = client.post("/runs/run_q/gates/resolve/", data, headers=HX).content.decode()
    assert "(SEPARATION_OF_DUTIES)" in html and "whoever started the run cannot approve" in html
    assert Run.objects.get(run_id="run_q").pending_gates == 1


def test_settings_page_sets_and_clears_a_policy(client, workspace, alice, bob):
    from runs.models import GatePolicySetting

    login(client, bob)
    assert client.get("/settings/gate-policies/").status_code == 403
    assert client.post("/settings/gate-policies/", {"quorum": "2"}).status_code == 403
    login(client, alice)
    assert client.get("/settings/gate-policies/").status_code == 200
    form = {
        "workflow_id": "",
        "quorum": "2",
        "separation": "on",
        "assignees": "bob, role:owner",
        "escalation": "30: bob\n120: role:owner",
    }
    assert client.post("/settings/gate-policies/", form).status_code == 302
    row = GatePolicySetting.objects.get(workspace=workspace, workflow_id="")
    assert row.policy == {
        "quorum": 2,
        "separationOfDuties": True,
        "assignees": ["bob", "role:owner"],
        "escalation": [
            {"afterSeconds": 1800, "notify": ["bob"]},
            {"afterSeconds": 7200, "notify": ["role:owner"]},
        ],
    }
    html = client.get("/settings/gate-policies/").content.decode()
    assert 'value="bob, role:owner"' in html and "30: bob\n120: role:owner" in html
    bad = client.post("/settings/gate-policies/", {"quorum": "many", "escalation": "<b>x</b>"})
    assert bad.status_code == 400 and "quorum must be a whole number" in bad.content.decode()
    assert "&lt;b&gt;x&lt;/b&gt;" in bad.content.decode()
    assert client.post("/settings/gate-policies/", {"workflow_id": ""}).status_code == 302
    assert not GatePolicySetting.objects.filter(workspace=workspace).exists()


def test_rest_gate_policies_and_decisions(client, workspace, alice, bob, make_run):
    login(client, bob)
    assert client.get("/api/gate-policies").status_code == 403
    login(client, alice)
    put = client.put(
        "/api/gate-policies",
        {"workflowId": "wf-demo", "policy": {"quorum": 2}},
        content_type="application/json",
    )
    assert put.status_code == 200 and put.json()["policy"] == {"quorum": 2}
    bad = client.put("/api/gate-policies", {"policy": {"quorum": "x"}}, content_type="application/json")
    assert bad.status_code == 400 and bad.json()["code"] == "INVALID_INPUT"
    unknown = client.put("/api/gate-policies", {"policy": {}, "x": 1}, content_type="application/json")
    assert unknown.status_code == 400
    assert [p["workflowId"] for p in client.get("/api/gate-policies").json()["policies"]] == ["wf-demo"]
    make_run("run_q")
    body = {"stepId": "review", "gate": "PAUSE_BEFORE", "decision": "approved"}
    first = client.post("/api/runs/run_q/gates/resolve", body, content_type="application/json")
    assert first.status_code == 200 and Run.objects.get(run_id="run_q").pending_gates == 1
    again = client.post("/api/runs/run_q/gates/resolve", body, content_type="application/json")
    assert again.status_code == 409 and again.json()["code"] == "ALREADY_VOTED"
    assert GateVote.objects.get().channel == "api"
    cleared = client.put(
        "/api/gate-policies", {"workflowId": "wf-demo", "policy": {}}, content_type="application/json"
    )
    assert cleared.status_code == 204
