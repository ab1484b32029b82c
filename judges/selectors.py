"""Reads: a workspace's judges, the judges of one gate, and a judge's agreement with people."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any

from django.db.models import Q, QuerySet
from django.utils import timezone

from judges import stats
from judges.models import GateJudge, OnlineScore, Proposal, ProposalStatus
from runs.models import Workspace

CHART_DAYS = 30
# The labels: gates a person decided, and judges' decisions a person overruled (Proposal.label)
PEOPLE_DECIDED = (~Q(outcome="") & ~Q(outcome_by__startswith="judge:")) | ~Q(overruled="")


class JudgeNotFound(Exception):
    pass


def judges_of(workspace: Workspace) -> QuerySet[GateJudge]:
    return GateJudge.objects.filter(workspace=workspace)


def get_judge(workspace: Workspace, judge_id: str) -> GateJudge:
    """A judge of this workspace; JudgeNotFound for a missing one or another workspace's."""
    judge = GateJudge.objects.filter(workspace=workspace, judge_id=judge_id).first()
    if judge is None:
        raise JudgeNotFound(judge_id)
    return judge


def judges_for_workflow(workspace_id: int, workflow_id: str) -> list[GateJudge]:
    return list(GateJudge.objects.filter(workspace_id=workspace_id, workflow_id=workflow_id, enabled=True))


def watches(judge: GateJudge, gate: dict[str, Any]) -> bool:
    """Whether ``gate`` (a pending gate of RunState.pending_gates) is the judge's gate."""
    if gate["stepId"] != judge.step_id:
        return False
    if judge.checkpoint:
        return gate["gate"] == "CHECKPOINT" and gate.get("checkpoint") == judge.checkpoint
    return gate["gate"] == judge.gate and not gate.get("checkpoint")


def labelled(
    judge: GateJudge, *, now: datetime | None = None, audit_only: bool = False
) -> QuerySet[Proposal]:
    """The judge's proposals a person decided (the labels) in its rolling window."""
    since = (now or timezone.now()) - timedelta(days=judge.window_days)
    rows = Proposal.objects.filter(judge=judge, status=ProposalStatus.PROPOSED, decided_at__gte=since).filter(
        PEOPLE_DECIDED
    )
    if audit_only:
        rows = rows.filter(audit=True)
        if judge.delegated_at is not None:
            rows = rows.filter(decided_at__gte=judge.delegated_at)
    return rows


def _pair(decision: str, outcome: str, overruled: str = "") -> tuple[str, str]:
    # a person's overrule of the judge's decision is their label; "edited" is an approval with
    # changes: the gate let the work through
    label = overruled or outcome
    return decision, "approved" if label == "edited" else label


def pairs(rows: QuerySet[Proposal]) -> list[tuple[str, str]]:
    return [_pair(d, o, x) for d, o, x in rows.values_list("decision", "outcome", "overruled")]


def agreement_of(
    judge: GateJudge, *, now: datetime | None = None, audit_only: bool = False
) -> dict[str, Any]:
    return stats.agreement(pairs(labelled(judge, now=now, audit_only=audit_only)))


def kappa_series(
    judge: GateJudge, *, now: datetime | None = None, days: int = CHART_DAYS
) -> dict[date, float | None]:
    """Kappa of the rolling window as it stood at the end of each of the last ``days`` days."""
    end = now or timezone.now()
    first = end - timedelta(days=days + judge.window_days)
    rows = list(
        Proposal.objects.filter(judge=judge, status=ProposalStatus.PROPOSED, decided_at__gte=first)
        .filter(PEOPLE_DECIDED)
        .values_list("decided_at", "decision", "outcome", "overruled")
    )
    out: dict[date, float | None] = {}
    today = end.date()
    for back in range(days - 1, -1, -1):
        day = today - timedelta(days=back)
        stop = datetime.combine(day + timedelta(days=1), datetime.min.time(), tzinfo=end.tzinfo)
        start = stop - timedelta(days=judge.window_days)
        window = [_pair(d, o, x) for at, d, o, x in rows if at is not None and start <= at < stop]
        if window:
            out[day] = stats.agreement(window)["kappa"]
    return out


def sees_pending(judge: GateJudge, *, may_manage: bool) -> bool:
    """Whether a reader sees the judge's proposals on gates still waiting for a decision: those who
    may manage judges (owners) always, others only when the owner turned ``show_to_reviewers`` on
    (allowed once the judge is calibrated), so people's labels stay independent."""
    return may_manage or judge.show_to_reviewers


def recent_proposals(judge: GateJudge, *, limit: int = 50, pending: bool = True) -> list[Proposal]:
    """The judge's latest proposals; ``pending=False`` leaves out those whose gate no decision has
    closed yet (see :func:`sees_pending`)."""
    rows = Proposal.objects.filter(judge=judge)
    if not pending:
        rows = rows.exclude(outcome="")
    return list(rows.select_related("run").order_by("-pk")[:limit])


def withheld_count(judge: GateJudge) -> int:
    """Proposals on gates still waiting for a decision (what a reader who does not see them misses)."""
    return Proposal.objects.filter(judge=judge, outcome="").count()


def proposal_counts(judge: GateJudge) -> dict[str, int]:
    rows = Proposal.objects.filter(judge=judge)
    return {
        "proposals": rows.count(),
        "delegated": rows.filter(delegated=True).count(),
        "audit": rows.filter(audit=True).count(),
        "overBudget": rows.filter(status=ProposalStatus.OVER_BUDGET).count(),
        "online": OnlineScore.objects.filter(judge=judge, status=ProposalStatus.PROPOSED).count(),
    }
