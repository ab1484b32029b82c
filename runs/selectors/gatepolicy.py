"""Reads for gate policies: the policy of one gate, its votes so far, who it is assigned to, how
long it has waited against its limit (runs.engine.gatepolicy holds the rules)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils import timezone

from runs.engine import gatepolicy
from runs.engine.gatepolicy import GatePolicy
from runs.models import Event, GateEscalation, GatePolicySetting, GateVote, Run, Workspace
from runs.protocol.timestamps import to_datetime

IMPLIED_ROUND = "implied"


def gate_round(gate: dict[str, Any]) -> str:
    """Which request of a gate a vote belongs to: the request event's id (a gate requested again
    after a rejection is a new round), or "implied" for a gate its policy implies."""
    return gate.get("eventId") or IMPLIED_ROUND


def workspace_layers(workspace: Workspace, workflow_id: str) -> list[dict[str, Any]]:
    """The workspace default, then the entry for ``workflow_id`` (each may be missing)."""
    rows = dict(
        GatePolicySetting.objects.filter(workspace=workspace, workflow_id__in=["", workflow_id]).values_list(
            "workflow_id", "policy"
        )
    )
    return [rows.get("", {}), rows.get(workflow_id, {}) if workflow_id else {}]


def run_layer(run_doc: dict[str, Any]) -> dict[str, Any]:
    metadata = run_doc.get("metadata")
    layer = metadata.get(gatepolicy.METADATA_KEY) if isinstance(metadata, dict) else None
    return layer if isinstance(layer, dict) else {}


def policy_for(
    run: Run, run_doc: dict[str, Any], step_id: str, layers: list[dict[str, Any]] | None = None
) -> GatePolicy:
    """The policy of the gates of ``step_id`` in ``run`` (``layers``: the workspace's, when the
    caller read them already for many gates)."""
    if layers is None:
        layers = workspace_layers(run.workspace, run.workflow_id)
    return gatepolicy.merge(*layers, step_id=step_id, host=run_layer(run_doc))


def gate_filter(run: Run, gate: dict[str, Any]) -> dict[str, Any]:
    return {
        "run": run,
        "step_id": gate["stepId"],
        "gate": gate["gate"],
        "checkpoint": gate.get("checkpoint") or "",
        "round": gate_round(gate),
    }


def votes_of(run: Run, gate: dict[str, Any]) -> list[GateVote]:
    return list(GateVote.objects.filter(**gate_filter(run, gate)).order_by("id"))


def notified_tiers(run: Run, gate: dict[str, Any]) -> set[int]:
    return set(GateEscalation.objects.filter(**gate_filter(run, gate)).values_list("tier", flat=True))


def waiting_since(run: Run, run_doc: dict[str, Any], gate: dict[str, Any]) -> datetime | None:
    """When the gate started waiting: its request, or for a gate its policy implies the last
    completion of its step (PAUSE_AFTER) or of a step before it, else the run's start."""
    if gate.get("requestedAt"):
        return to_datetime(gate["requestedAt"])
    last = (
        Event.objects.filter(run=run, type="step_completed")
        .order_by("-seq")
        .values_list("ts", flat=True)
        .first()
    )
    return to_datetime(last or run_doc.get("startedAt"))


@dataclass(frozen=True)
class GateStatus:
    """What the inbox and the gate panel say about one waiting gate's policy."""

    policy: GatePolicy
    approvals: tuple[str, ...]
    rejections: tuple[str, ...]
    since: datetime | None
    limit_seconds: int | None
    assigned: bool  # to the person asking
    waited: float | None  # seconds, at the time it was read
    mine: str = ""  # the asking person's own vote on it ("approved" / "rejected"), "" when none

    @property
    def shown(self) -> bool:
        """Whether the policy has anything to say beyond the defaults."""
        p = self.policy
        return p.needs_votes or p.separation_of_duties or bool(p.assignees) or bool(p.escalation)

    @property
    def mine_words(self) -> str:
        """What the asking person is told of their own vote while the gate waits for more (the
        inbox row says it again after a live refresh, not only in the answer to the vote)."""
        if not self.mine or not self.policy.needs_votes:
            return ""
        return vote_words(self.mine, len(self.approvals), self.policy.quorum)

    @property
    def overdue(self) -> bool:
        return (
            self.waited is not None and self.limit_seconds is not None and self.waited >= self.limit_seconds
        )

    @property
    def waited_text(self) -> str:
        return duration_text(self.waited) if self.waited is not None else ""

    @property
    def limit_text(self) -> str:
        return duration_text(self.limit_seconds) if self.limit_seconds is not None else ""


def vote_words(decision: str, approvals: int, quorum: int) -> str:
    return f"Your {decision} vote is recorded: {approvals} of {quorum} approvals."


def duration_text(seconds: float) -> str:
    """ "40 s", "12 min", "3 h 5 min", "2 d 4 h": how long, in words a row has room for."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        return f"{s // 3600} h" + (f" {s % 3600 // 60} min" if s % 3600 >= 60 else "")
    return f"{s // 86400} d" + (f" {s % 86400 // 3600} h" if s % 86400 >= 3600 else "")


def gate_status(
    run: Run,
    run_doc: dict[str, Any],
    gate: dict[str, Any],
    *,
    username: str = "",
    role: str | None = None,
    layers: list[dict[str, Any]] | None = None,
    now: datetime | None = None,
) -> GateStatus:
    policy = policy_for(run, run_doc, gate["stepId"], layers)
    votes = votes_of(run, gate) if policy.needs_votes else []
    counted = gatepolicy.tally(policy, [(v.voter, v.decision) for v in votes])
    notified = notified_tiers(run, gate) if policy.escalation else set()
    since = waiting_since(run, run_doc, gate) if policy.escalation else None
    return GateStatus(
        policy=policy,
        approvals=counted.approvals,
        rejections=counted.rejections,
        since=since,
        limit_seconds=gatepolicy.limit_seconds(policy, notified),
        assigned=bool(username) and gatepolicy.names_user(policy.assignees, username, role),
        waited=((now or timezone.now()) - since).total_seconds() if since is not None else None,
        mine=next((v.decision for v in reversed(votes) if username and v.voter == f"user:{username}"), ""),
    )
