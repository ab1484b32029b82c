"""Deciding a gate under its policy, setting policies, escalating gates that wait too long.

:func:`do_decide_gate` is what every reviewer's decision goes through (page, inbox, REST): it
applies the gate's policy (runs.engine.gatepolicy) and then the one write path. Without a quorum
a decision is the ``ResolveGate`` command as before. With one, a vote that does not settle the
gate is an ``annotation`` event (tag ``workbench.gate-vote``), never a ``human_gate_resolved``
(that would resolve the gate); the vote that reaches the quorum (or the rejections needed) is the
``ResolveGate`` decision, followed by an annotation naming every voter (tag
``workbench.gate-quorum``). Each vote is also a :class:`runs.models.GateVote` row beside the
trace; the deciding one's ``metadata`` lists the voters (``workbench.voters``) and every one
names its channel (``workbench.channel``).

:func:`do_escalate_gates` is the periodic sweep (runs.background.escalation): a waiting gate past
a tier's ``afterSeconds`` gets one ``gate.escalated`` e-mail per person of that tier through the
outbox, and a :class:`runs.models.GateEscalation` row that makes the next sweep skip it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.apps import apps
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from runs.actions import budgets
from runs.actions.core import ActionError, AppendResult, load_state, lock_run
from runs.actions.notify import schedule_deliveries
from runs.actions.outbox import envelope, new_message_id, run_links
from runs.actions.permissions import Action, role_allows
from runs.actions.runs import do_append_events, do_commands
from runs.engine import commands as cmd
from runs.engine import gatepolicy
from runs.engine.check import DECISIONS
from runs.engine.errors import EngineError
from runs.engine.gatepolicy import GatePolicy
from runs.engine.state import RunState
from runs.models import (
    Delivery,
    DeliveryChannel,
    GateEscalation,
    GatePolicySetting,
    GateVote,
    Membership,
    Run,
    RunStatus,
    Workspace,
)
from runs.protocol.errors import ErrorCode
from runs.selectors.gatepolicy import (
    gate_filter,
    policy_for,
    run_layer,
    votes_of,
    waiting_since,
    workspace_layers,
)

VOTE_TAG = "workbench.gate-vote"
QUORUM_TAG = "workbench.gate-quorum"
CHANNEL_KEY = "workbench.channel"
VOTERS_KEY = "workbench.voters"
GATE_ESCALATED = "gate.escalated"
SEPARATION_OF_DUTIES = "SEPARATION_OF_DUTIES"
VOTES_REQUIRED = "VOTES_REQUIRED"  # a host's appended decision on a gate that counts votes
FORBIDDEN = "FORBIDDEN"
ALREADY_VOTED = "ALREADY_VOTED"
CHANNELS = ("page", "api", "slack", "email", "mcp", "judge")
_SOD_WORDS = (
    "you started this run (or own the token that started it), so someone else has to approve its "
    "gates; you may reject"
)


@dataclass
class GateDecision:
    """What a decision did: ``resolved`` when the gate was decided (the events of ``result``
    hold its ``human_gate_resolved``), else the vote was recorded and the gate still waits."""

    result: AppendResult
    resolved: bool
    policy: GatePolicy = field(default_factory=GatePolicy)
    approvals: tuple[str, ...] = ()
    rejections: tuple[str, ...] = ()


def _pending(state: RunState, step_id: str, gate: str, checkpoint: str | None) -> dict[str, Any] | None:
    return next(
        (
            g
            for g in state.pending_gates()
            if g["stepId"] == step_id and g["gate"] == gate and (g.get("checkpoint") or None) == checkpoint
        ),
        None,
    )


def _owner_of(actor: str) -> int | None:
    """The user behind an actor: ``user:<name>`` itself, ``token:<key id>`` the token's creator.
    (Tokens are looked up by model name: accounts sits above the actions layer.)"""
    kind, _, name = actor.partition(":")
    if kind == "user" and name:
        return get_user_model().objects.filter(username=name).values_list("pk", flat=True).first()
    if kind == "token" and name:
        token_model = apps.get_model("accounts", "ApiToken")
        return token_model.objects.filter(key_id=name).values_list("created_by_id", flat=True).first()
    return None


def started_by(run: Run, actor: str) -> bool:
    """Whether ``actor`` started the run, or owns the token that started it (or started it with
    a token that acts for them)."""
    if not actor or not run.created_by:
        return False
    if actor == run.created_by:
        return True
    owner = _owner_of(actor)
    return owner is not None and owner == _owner_of(run.created_by)


def _channel(channel: str) -> str:
    if channel not in CHANNELS:
        raise ActionError(ErrorCode.INVALID_INPUT, f"channel must be one of {', '.join(CHANNELS)}", "channel")
    return channel


def do_decide_gate(
    *,
    workspace: Workspace,
    run_id: str,
    step_id: str,
    gate: str,
    decision: str,
    note: str | None = None,
    checkpoint: str | None = None,
    edit: cmd.WriteArtifact | cmd.PatchArtifact | None = None,
    actor: str = "",
    channel: str = "page",
) -> GateDecision:
    """A reviewer's decision on a waiting gate under its policy (see the module's docstring).
    Refusals: SEPARATION_OF_DUTIES (the starter approves), ALREADY_VOTED, INVALID_INPUT (an
    edit on a gate that counts votes), BUDGET_LIMIT_REQUIRED (an approval of the run's ``budget``
    gate, which goes on only with a raised budget; rejecting it stops the run at its budget), and
    whatever the engine refuses; nothing is written then."""
    channel = _channel(channel)
    resolve = cmd.ResolveGate(
        step_id=step_id, gate=gate, decision=decision, note=note, checkpoint=checkpoint, edit=edit
    )
    with transaction.atomic():
        run = lock_run(workspace, run_id)
        state = load_state(run)
        waiting = _pending(state, step_id, gate, checkpoint) if isinstance(step_id, str) else None
        if waiting is None:  # not waiting: the engine says why (or takes a gate it may request)
            result = do_commands(
                workspace=workspace, run_id=run_id, commands=[resolve], actor=actor, channel=channel
            )
            return GateDecision(result=result, resolved=bool(result.events))
        policy = policy_for(run, state.run, step_id)
        if decision not in DECISIONS:
            raise ActionError(
                ErrorCode.INVALID_INPUT, f"decision must be one of {', '.join(DECISIONS)}", "decision"
            )
        budget_gate = budgets.is_budget_gate(gate, checkpoint)
        if budget_gate and decision != "rejected" and budgets.over_budget(run):
            # going on needs a new limit first (do_raise_run_budget); a rejection stops the run at
            # its budget, as "Stop the run here" does
            raise budgets.limit_required(run.run_id)
        if policy.separation_of_duties and decision != "rejected" and started_by(run, actor):
            raise ActionError(SEPARATION_OF_DUTIES, _SOD_WORDS, "decision")
        if budget_gate and decision == "rejected":
            return _stop_at_budget(run, waiting, policy, resolve, actor=actor, channel=channel)
        if not policy.needs_votes:
            result = do_commands(
                workspace=workspace, run_id=run_id, commands=[resolve], actor=actor, channel=channel
            )
            if result.events:
                _record_vote(run, waiting, actor, decision, note, channel, result.last_seq, voters=[actor])
            return GateDecision(result=result, resolved=bool(result.events), policy=policy)
        return _vote(run, waiting, policy, resolve, actor=actor, channel=channel)


def _stop_at_budget(
    run: Run,
    waiting: dict[str, Any],
    policy: GatePolicy,
    resolve: cmd.ResolveGate,
    *,
    actor: str,
    channel: str,
) -> GateDecision:
    """A rejection of the run's ``budget`` gate: the run stops at its budget, at once, or once the
    rejections its policy counts are in (each one before is a vote)."""
    if not policy.needs_votes:
        result = budgets.stop_at_budget(
            workspace=run.workspace, run_id=run.run_id, actor=actor, note=resolve.note, channel=channel
        )
        return GateDecision(result=result, resolved=True, policy=policy)
    stop = cmd.ResolveGate(
        step_id=resolve.step_id,
        gate=resolve.gate,
        decision="rejected",
        note=budgets.stop_words(actor, resolve.note),
        checkpoint=resolve.checkpoint,
    )
    outcome = _vote(run, waiting, policy, stop, actor=actor, channel=channel)
    if outcome.resolved:  # a rejection settles a gate only as rejected
        budgets.record_stop(run.workspace, run.run_id, actor)
    return outcome


def _waiting_budget_gate(workspace: Workspace, run_id: str) -> tuple[Run, dict[str, Any] | None, GatePolicy]:
    """The run (locked), its waiting ``budget`` gate, if any, and that gate's policy."""
    run = lock_run(workspace, run_id)
    state = load_state(run)
    waiting = next(
        (g for g in state.pending_gates() if budgets.is_budget_gate(g["gate"], g.get("checkpoint"))), None
    )
    if waiting is None:
        return run, None, GatePolicy()
    return run, waiting, policy_for(run, state.run, waiting["stepId"])


def do_raise_run_budget(
    *, workspace: Workspace, run_id: str, limit: Any, actor: str = "", channel: str = "page"
) -> dict[str, Any]:
    """Set or raise a run's budget (runs.actions.budgets.do_set_run_budget); a ``budget`` gate
    waiting on the run is approved under its policy: the raise is the approval of whoever raised
    (refused with SEPARATION_OF_DUTIES, nothing changed, for the run's starter when the policy
    says so) and, when the policy counts approvals, one vote: the run goes on once the quorum's
    other approvals are in (``resumed`` False until then; ``approvals`` / ``quorum`` say how
    many). Nothing is written on a refusal (ALREADY_VOTED included)."""
    with transaction.atomic():
        run, waiting, policy = _waiting_budget_gate(workspace, run_id)
        if waiting is not None and policy.separation_of_duties and started_by(run, actor):
            raise ActionError(SEPARATION_OF_DUTIES, _SOD_WORDS, "limit")
        if waiting is None or not policy.needs_votes:
            return budgets.do_set_run_budget(
                workspace=workspace, run_id=run_id, limit=limit, actor=actor, channel=channel
            )
        raised = budgets.do_set_run_budget(
            workspace=workspace, run_id=run_id, limit=limit, actor=actor, decide=False, channel=channel
        )
        approve = cmd.ResolveGate(
            step_id=waiting["stepId"],
            gate=budgets.CHECKPOINT,
            decision="approved",
            note=raised["note"],
            checkpoint=budgets.BUDGET_CHECKPOINT,
        )
        outcome = _vote(run, waiting, policy, approve, actor=actor, channel=channel)
    return {
        **raised,
        "resumed": outcome.resolved,
        "approvals": len(outcome.approvals),
        "quorum": policy.quorum,
    }


def do_stop_at_budget(
    *, workspace: Workspace, run_id: str, actor: str = "", channel: str = "page"
) -> dict[str, Any]:
    """Reject the run's waiting ``budget`` gate under its policy (:func:`do_decide_gate`): the
    paused caller stops with BUDGET_EXCEEDED, at once or once the rejections the policy counts are
    in (``stopped`` says which). INVALID_STATE_TRANSITION when no budget gate waits."""
    with transaction.atomic():
        run, waiting, _policy = _waiting_budget_gate(workspace, run_id)
        if waiting is None:
            raise ActionError(
                ErrorCode.INVALID_STATE_TRANSITION, "no budget gate waits on this run", "budget"
            )
        outcome = do_decide_gate(
            workspace=workspace,
            run_id=run.run_id,
            step_id=waiting["stepId"],
            gate=budgets.CHECKPOINT,
            checkpoint=budgets.BUDGET_CHECKPOINT,
            decision="rejected",
            actor=actor,
            channel=channel,
        )
    answer: dict[str, Any] = {
        "runId": run.run_id,
        "note": budgets.stop_words(actor),
        "stopped": outcome.resolved,
    }
    if not outcome.resolved:
        answer.update(rejections=len(outcome.rejections), needed=outcome.policy.rejections)
    return answer


def do_append_host_events(
    *, workspace: Workspace, run_id: str, events: list[Any], actor: str = "", may_decide: bool
) -> AppendResult:
    """A host's events appended as they came (``POST /api/runs/{id}/events``, the run store's
    PUT). A ``human_gate_resolved`` among them that decides a gate already waiting on the run is
    a decision like a reviewer's, not a record: refused with FORBIDDEN when the caller may not
    decide gates (``may_decide``: the review scope), with VOTES_REQUIRED where the gate's policy
    counts votes (each voter decides through ``POST /api/runs/{id}/gates/resolve``), with
    SEPARATION_OF_DUTIES for the run's starter's approval where the policy says so. Nothing is
    written then. A gate's request and its decision appended together are the host's record of a
    gate it decided itself, as before."""
    with transaction.atomic():
        run = lock_run(workspace, run_id)
        _refuse_host_decisions(run, events, actor=actor, may_decide=may_decide)
        return do_append_events(workspace=workspace, run_id=run_id, events=events, actor=actor)


def _refuse_host_decisions(run: Run, events: list[Any], *, actor: str, may_decide: bool) -> None:
    decisions = [e for e in events if isinstance(e, dict) and e.get("type") == "human_gate_resolved"]
    if not decisions:
        return
    state = load_state(run)
    waiting = {(g["stepId"], g["gate"]) for g in state.pending_gates()}
    for event in decisions:
        step_id, gate = event.get("stepId"), event.get("gate")
        if (step_id, gate) not in waiting or not isinstance(step_id, str):
            continue
        if not may_decide:
            raise ActionError(
                FORBIDDEN,
                f"the {gate} gate on {step_id} waits for a reviewer: deciding it needs the review scope "
                "(a token of a member who may decide gates)",
                "events",
            )
        policy = policy_for(run, state.run, step_id)
        if policy.needs_votes:
            raise ActionError(
                VOTES_REQUIRED,
                f"the {gate} gate on {step_id} needs {policy.quorum} approvers: each decides through "
                f"POST /api/runs/{run.run_id}/gates/resolve",
                "events",
            )
        if policy.separation_of_duties and event.get("decision") != "rejected" and started_by(run, actor):
            raise ActionError(SEPARATION_OF_DUTIES, _SOD_WORDS, "events")


def _vote(
    run: Run,
    waiting: dict[str, Any],
    policy: GatePolicy,
    resolve: cmd.ResolveGate,
    *,
    actor: str,
    channel: str,
) -> GateDecision:
    if resolve.edit is not None:
        raise ActionError(
            ErrorCode.INVALID_INPUT,
            f"this gate needs {policy.quorum} approvers: approve or reject it (edit the artifact on its own)",
            "edit",
        )
    if not actor:
        raise ActionError(ErrorCode.INVALID_INPUT, "a vote needs a voter", "actor")
    prior = votes_of(run, waiting)
    if any(v.voter == actor for v in prior):
        raise ActionError(
            ALREADY_VOTED, "you already voted on this gate; another member has to decide", "decision"
        )
    counted = gatepolicy.tally(policy, [(v.voter, v.decision) for v in prior] + [(actor, resolve.decision)])
    where = {"step_id": resolve.step_id}
    label = f"{resolve.gate}{f' {resolve.checkpoint}' if resolve.checkpoint else ''} on {resolve.step_id}"
    tags = [f"gate:{resolve.gate}", f"decision:{resolve.decision}"]
    if resolve.checkpoint:
        tags.append(f"checkpoint:{resolve.checkpoint}")
    if counted.outcome is None:
        text = (
            f"Vote on {label}: {resolve.decision} by {actor} "
            f"({len(counted.approvals)} of {policy.quorum} approvals"
            + (
                f", {len(counted.rejections)} of {policy.rejections} rejections"
                if policy.rejections > 1
                else ""
            )
            + ")"
            + (f": {resolve.note}" if resolve.note else "")
        )
        command = cmd.Annotate(text=text, tags=[VOTE_TAG, *tags], **where)
        result = do_commands(
            workspace=run.workspace, run_id=run.run_id, commands=[command], actor=actor, channel=channel
        )
        _record_vote(run, waiting, actor, resolve.decision, resolve.note, channel, result.last_seq)
        return GateDecision(result, False, policy, counted.approvals, counted.rejections)
    voters = list(counted.approvals if counted.outcome == "approved" else counted.rejections)
    needed = policy.quorum if counted.outcome == "approved" else policy.rejections
    final = cmd.ResolveGate(
        step_id=resolve.step_id,
        gate=resolve.gate,
        decision=counted.outcome,
        note=resolve.note,
        checkpoint=resolve.checkpoint,
    )
    summary = cmd.Annotate(
        text=f"Quorum on {label}: {counted.outcome} by {', '.join(voters)} ({len(voters)} of {needed})",
        tags=[QUORUM_TAG, *tags[:1], f"decision:{counted.outcome}", *tags[2:]],
        **where,
    )
    result = do_commands(
        workspace=run.workspace, run_id=run.run_id, commands=[final, summary], actor=actor, channel=channel
    )
    _record_vote(
        run, waiting, actor, resolve.decision, resolve.note, channel, result.first_seq, voters=voters
    )
    return GateDecision(result, True, policy, counted.approvals, counted.rejections)


def _record_vote(
    run: Run,
    waiting: dict[str, Any],
    actor: str,
    decision: str,
    note: str | None,
    channel: str,
    seq: int,
    *,
    voters: list[str] | None = None,
) -> None:
    metadata: dict[str, Any] = {CHANNEL_KEY: channel}
    if voters is not None:
        metadata[VOTERS_KEY] = voters
    try:
        with transaction.atomic():
            GateVote.objects.create(
                workspace_id=run.workspace_id,
                voter=actor,
                decision=decision,
                note=note or "",
                channel=channel,
                metadata=metadata,
                seq=seq,
                **gate_filter(run, waiting),
            )
    except IntegrityError:  # one decision per voter and request: the run's lock makes this rare
        raise ActionError(ALREADY_VOTED, "you already voted on this gate", "decision") from None


# --------------------------------------------------------------------------------------------
# Settings


def do_set_gate_policy(
    *, workspace: Workspace, policy: Any, workflow_id: str = "", actor: str = ""
) -> GatePolicySetting | None:
    """Set (or with an empty object, clear) the workspace's default policy or a workflow's."""
    if not isinstance(workflow_id, str) or len(workflow_id) > 200:
        raise ActionError(
            ErrorCode.INVALID_INPUT, "workflowId must be text of at most 200 characters", "workflowId"
        )
    try:
        checked = gatepolicy.check(policy)
    except EngineError as exc:
        raise ActionError.wrap(exc) from None
    with transaction.atomic():
        if not checked:
            GatePolicySetting.objects.filter(workspace=workspace, workflow_id=workflow_id).delete()
            return None
        row, _ = GatePolicySetting.objects.update_or_create(
            workspace=workspace,
            workflow_id=workflow_id,
            defaults={"policy": checked, "updated_by": actor},
        )
    return row


# --------------------------------------------------------------------------------------------
# Escalation


def _recipients(workspace_id: int, names: tuple[str, ...]) -> list[Any]:
    """Active members who may decide gates, named directly or by their role, with an e-mail."""
    members = Membership.objects.filter(workspace_id=workspace_id).select_related("user")
    out = []
    for m in members:
        user = m.user
        if not user.is_active or not user.email or not role_allows(m.role, Action.RESOLVE_GATE):
            continue
        if gatepolicy.names_user(names, user.get_username(), m.role):
            out.append(user)
    return out


def _escalation_message(run: Run, gate: dict[str, Any], tier: int, policy: GatePolicy, waited: float) -> str:
    links = run_links(run.run_id)
    data = {
        "workspace": run.workspace.slug,
        "run": {"id": run.run_id, "title": (run.title or "")[:300] or None, "status": run.status, **links},
        "gate": {
            "stepId": gate["stepId"],
            "gate": gate["gate"],
            "checkpoint": gate.get("checkpoint"),
            "reason": (gate.get("reason") or "")[:1000] or None,
            "requestedAt": gate.get("requestedAt"),
            "url": links["url"] + "#gate-panel",
        },
        "escalation": {
            "tier": tier + 1,
            "afterSeconds": policy.escalation[tier].after_seconds,
            "waitedSeconds": int(waited),
            "notify": list(policy.escalation[tier].notify),
        },
    }
    return envelope(GATE_ESCALATED, data)


def escalate_gate(
    run: Run, gate: dict[str, Any], policy: GatePolicy, tier: int, waited: float, now: datetime
) -> int:
    """Tell one tier about one waiting gate, once: the row's unique key makes a second sweep (or a
    second worker) write nothing. Returns the deliveries written."""
    recipients = _recipients(run.workspace_id, policy.escalation[tier].notify)
    with transaction.atomic():
        try:
            with transaction.atomic():
                GateEscalation.objects.create(
                    workspace_id=run.workspace_id,
                    tier=tier,
                    recipients=len(recipients),
                    notified_at=now,
                    **gate_filter(run, gate),
                )
        except IntegrityError:
            return 0
        body = _escalation_message(run, gate, tier, policy, waited)
        rows = [
            Delivery(
                public_id=new_message_id(),
                workspace_id=run.workspace_id,
                recipient=user,
                channel=DeliveryChannel.EMAIL,
                event_type=GATE_ESCALATED,
                payload=body,
                next_attempt_at=timezone.now(),  # due at once (``now`` may be a test's moved clock)
            )
            for user in recipients
        ]
        if rows:
            Delivery.objects.bulk_create(rows)
            schedule_deliveries()
    return len(rows)


def do_escalate_gates(*, now: datetime | None = None) -> int:
    """The sweep: every waiting gate of a running run whose policy has an escalation tier that is
    due and not yet told. Returns the deliveries written. ``now`` moves the clock in tests."""
    now = now or timezone.now()
    written = 0
    layers_cache: dict[tuple[int, str], list[dict[str, Any]]] = {}
    runs = (
        Run.objects.filter(status=RunStatus.RUNNING, pending_gates__gt=0)
        .select_related("workspace")
        .only(
            "pk", "run_id", "workspace", "workflow_id", "state", "title", "status", "started_at", "created_by"
        )
    )
    for run in runs.iterator(chunk_size=200):
        key = (run.workspace_id, run.workflow_id)
        if key not in layers_cache:
            layers_cache[key] = workspace_layers(run.workspace, run.workflow_id)
        state = load_state(run)
        if not any(layers_cache[key]) and not run_layer(state.run):
            continue  # no policy anywhere: nothing to escalate
        for gate in state.pending_gates():
            policy = policy_for(run, state.run, gate["stepId"], layers_cache[key])
            if not policy.escalation:
                continue
            since = waiting_since(run, state.run, gate)
            if since is None:
                continue
            waited = (now - since).total_seconds()
            notified = set(
                GateEscalation.objects.filter(**gate_filter(run, gate)).values_list("tier", flat=True)
            )
            for tier in gatepolicy.due_tiers(policy, waited, notified):
                written += escalate_gate(run, gate, policy, tier, waited, now)
    return written
