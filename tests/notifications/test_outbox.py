"""The outbox is written in the same transaction as the events that cause it, for exactly the
people and hooks that asked, of that workspace only."""

from __future__ import annotations

import json

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from runs import actions
from runs.actions import ActionError
from runs.actions.webhooks import do_set_notification_preferences
from runs.engine import commands as c
from runs.models import Delivery
from tests.notifications.conftest import bring_review_gate, make_hook

pytestmark = pytest.mark.django_db


def _types(**filters) -> list[str]:
    return list(Delivery.objects.filter(**filters).order_by("id").values_list("event_type", flat=True))


def test_no_hook_no_row_and_a_single_small_query(workspace, started_run):
    with CaptureQueriesContext(connection) as with_nobody:
        bring_review_gate(workspace)
    assert Delivery.objects.count() == 0
    asked = [q["sql"] for q in with_nobody.captured_queries if "runs_webhook" in q["sql"]]
    assert len(asked) == 1, asked  # one EXISTS query, nothing loaded


def test_a_gate_that_starts_waiting_is_gate_requested_once(workspace, started_run, receiver):
    hook = make_hook(workspace, receiver.url).webhook
    bring_review_gate(workspace)
    rows = list(Delivery.objects.filter(webhook=hook))
    assert [r.event_type for r in rows] == ["gate.requested"]
    body = json.loads(rows[0].payload)
    assert set(body) == {"type", "timestamp", "data"}
    gate = body["data"]["gate"]
    assert (gate["stepId"], gate["gate"]) == ("review", "PAUSE_BEFORE")
    assert gate["url"] == "https://wb.example/runs/run_n1/#gate-panel"
    assert body["data"]["run"]["apiUrl"] == "https://wb.example/api/runs/run_n1"
    assert gate["mayDecide"]["roles"] == ["owner", "reviewer"]
    assert body["data"]["workspace"] == "acme"
    # The host now asks for the gate the policy already implied: still the same waiting gate.
    actions.do_command(
        workspace=workspace, run_id="run_n1", command=c.RequestGate(step_id="review", gate="PAUSE_BEFORE")
    )
    assert Delivery.objects.filter(webhook=hook).count() == 1


def test_a_rolled_back_append_leaves_no_row(workspace, started_run, receiver):
    make_hook(workspace, receiver.url)
    with pytest.raises(ActionError):
        actions.do_commands(
            workspace=workspace,
            run_id="run_n1",
            commands=[
                c.BeginStep(step_id="parse"),
                c.CompleteStep(step_id="parse"),
                c.BeginStep(step_id="nope"),
            ],
        )
    assert Delivery.objects.count() == 0
    with transaction.atomic():
        bring_review_gate(workspace)
        assert Delivery.objects.count() == 1  # written with the events, in their transaction
        transaction.set_rollback(True)
    assert Delivery.objects.count() == 0


def test_resolved_completed_cancelled_and_filters(workspace, started_run, receiver):
    everything = make_hook(
        workspace,
        receiver.url,
        events=["gate.requested", "gate.resolved", "run.completed", "run.failed", "run.cancelled"],
    ).webhook
    only_gates = make_hook(workspace, receiver.url).webhook
    bring_review_gate(workspace)
    actions.do_command(
        workspace=workspace,
        run_id="run_n1",
        command=c.ResolveGate(step_id="review", gate="PAUSE_BEFORE", decision="approved"),
        actor="user:bob",
    )
    actions.do_command(workspace=workspace, run_id="run_n1", command=c.CancelRun(reason="enough"))
    assert _types(webhook=everything) == ["gate.requested", "gate.resolved", "run.cancelled"]
    assert _types(webhook=only_gates) == ["gate.requested"]
    resolved = json.loads(Delivery.objects.get(webhook=everything, event_type="gate.resolved").payload)
    assert resolved["data"]["gate"]["decision"] == "approved"
    assert resolved["data"]["gate"]["decidedBy"] == "user:bob"
    cancelled = json.loads(Delivery.objects.get(webhook=everything, event_type="run.cancelled").payload)
    assert cancelled["data"]["run"]["reason"] == "enough"


def test_run_completed(workspace, started_run, receiver):
    hook = make_hook(workspace, receiver.url, events=["run.completed"]).webhook
    actions.do_command(workspace=workspace, run_id="run_n1", command=c.CompleteRun())
    assert _types(webhook=hook) == ["run.completed"]


def test_another_workspaces_hook_hears_nothing(workspace, other_workspace, workflow, started_run, receiver):
    theirs = make_hook(other_workspace, receiver.url).webhook
    bring_review_gate(workspace)
    assert Delivery.objects.filter(webhook=theirs).count() == 0
    assert Delivery.objects.filter(workspace=other_workspace).count() == 0


def test_gate_mail_goes_to_deciders_never_to_viewers(workspace, started_run, alice, bob, vera):
    for user in (alice, bob, vera):
        user.email = f"{user.username}@example.com"
        user.save()
        do_set_notification_preferences(
            user=user, workspace=workspace, gates_to_decide=True, runs_i_started=False
        )
    bring_review_gate(workspace)
    mailed = set(Delivery.objects.filter(channel="email").values_list("recipient__username", flat=True))
    assert mailed == {"alice", "bob"}


def test_nobody_asked_nothing_is_written(workspace, started_run, alice, bob):
    """People with an address but no choice made, and a disabled hook: no row at all."""
    from runs.actions.webhooks import do_set_webhook_enabled

    for user in (alice, bob):
        user.email = f"{user.username}@example.com"
        user.save()
    hook = make_hook(workspace, "https://hooks.example/x").webhook
    do_set_webhook_enabled(workspace=workspace, webhook_id=hook.public_id, enabled=False)
    bring_review_gate(workspace)
    actions.do_command(workspace=workspace, run_id="run_n1", command=c.CancelRun())
    assert Delivery.objects.count() == 0


def test_runs_i_started(workspace, workflow, alice, bob):
    alice.email = "alice@example.com"
    alice.save()
    do_set_notification_preferences(
        user=alice, workspace=workspace, gates_to_decide=False, runs_i_started=True
    )
    actions.do_start_run(workspace=workspace, workflow=workflow, run_id="run_mine", actor="user:alice")
    actions.do_start_run(workspace=workspace, workflow=workflow, run_id="run_bobs", actor="user:bob")
    for run_id in ("run_mine", "run_bobs"):
        bring_review_gate(workspace, run_id)  # a gate: not asked for
        actions.do_command(workspace=workspace, run_id=run_id, command=c.FailRun(reason="boom"))
    rows = list(Delivery.objects.filter(channel="email"))
    assert [(r.recipient.username, r.event_type) for r in rows] == [("alice", "run.failed")]
    assert json.loads(rows[0].payload)["data"]["run"]["id"] == "run_mine"


def test_payload_stays_under_20_kb(workspace, started_run, receiver):
    hook = make_hook(workspace, receiver.url).webhook
    actions.do_commands(
        workspace=workspace,
        run_id="run_n1",
        commands=[c.RequestGate(step_id="publish", gate="PAUSE_BEFORE", reason="x" * 200_000)],
    )
    row = Delivery.objects.get(webhook=hook)
    assert len(row.payload.encode()) < 20_000
    assert json.loads(row.payload)["data"]["gate"]["reason"].endswith("…")


def test_a_replay_divergence_note_is_run_diverged(workspace, started_run, receiver):
    from runs.engine.divergence import DIVERGED_TAG

    hook = make_hook(workspace, receiver.url, events=["run.diverged"]).webhook
    actions.do_command(workspace=workspace, run_id="run_n1", command=c.Annotate(text="plain note"))
    assert Delivery.objects.count() == 0
    actions.do_command(
        workspace=workspace,
        run_id="run_n1",
        command=c.Annotate(text='{"type": "replay.diverged"}', tags=[DIVERGED_TAG]),
    )
    (row,) = Delivery.objects.filter(webhook=hook)
    assert row.event_type == "run.diverged" and json.loads(row.payload)["data"]["run"]["id"] == "run_n1"


def test_a_gate_waiting_from_the_start_of_a_run_is_requested(workspace, workflow, alice, receiver):
    """A run whose first step is PAUSE_BEFORE waits from its first moment: hooks, Slack and the
    deciders' e-mail hear gate.requested as for a gate that starts waiting later (issue 49)."""
    workflow["steps"][0]["gatePolicy"] = "PAUSE_BEFORE"
    hook = make_hook(workspace, receiver.url).webhook
    slack = make_hook(workspace, receiver.url, kind="slack").webhook
    alice.email = "alice@example.com"
    alice.save()
    do_set_notification_preferences(
        user=alice, workspace=workspace, gates_to_decide=True, runs_i_started=False
    )
    actions.do_start_run(workspace=workspace, workflow=workflow, run_id="run_first", actor="user:alice")
    assert _types(webhook=hook) == ["gate.requested"]
    assert _types(webhook=slack) == ["gate.requested"]
    assert _types(channel="email") == ["gate.requested"]
    gate = json.loads(Delivery.objects.get(webhook=hook).payload)["data"]["gate"]
    assert (gate["stepId"], gate["gate"]) == ("parse", "PAUSE_BEFORE")
    # asking for the gate the policy implied is the same gate: nothing more
    actions.do_command(
        workspace=workspace, run_id="run_first", command=c.RequestGate(step_id="parse", gate="PAUSE_BEFORE")
    )
    assert _types(webhook=hook) == ["gate.requested"]
    # a run that does not wait at its start says nothing at its start
    actions.do_start_run(
        workspace=workspace,
        workflow=dict(workflow, steps=[{"id": "parse", "gatePolicy": "AUTO"}], edges=[]),
        run_id="run_auto",
        actor="user:alice",
    )
    assert Delivery.objects.filter(payload__contains="run_auto").count() == 0
