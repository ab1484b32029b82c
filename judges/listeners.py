"""After a run change commits: when the workspace has judges and the change may open or close a
gate (a gate request or decision, a step's completion, a new run), the judges' task is queued.
Changes a judge made itself are left alone (its task goes on by itself)."""

from __future__ import annotations

from judges.models import GateJudge
from judges.tasks import judge_run, score_online
from runs.actions.notify import RunChange

TRIGGERS = frozenset({"human_gate_requested", "human_gate_resolved", "step_completed", "run_forked"})


def may_gate(change: RunChange) -> bool:
    if (
        not change.workspace_id
        or not change.run_pk
        or change.status in ("deleted", "completed", "failed", "cancelled")
    ):
        return False
    if change.actor.startswith("judge:"):
        return False
    if change.events:
        return any(event.get("type") in TRIGGERS for event in change.events)
    return True  # committed by another process, or a new run: not known, look


def finished(change: RunChange) -> bool:
    """A run that just finished (online evaluation), by anyone but a judge."""
    if not change.workspace_id or not change.run_pk or change.actor.startswith("judge:"):
        return False
    if change.status not in ("completed", "failed"):
        return False
    if change.events:
        return any(event.get("type") == "run_status_changed" for event in change.events)
    return True


def queue_judges(change: RunChange) -> None:
    if change.workspace_id is not None and finished(change):
        if GateJudge.objects.filter(
            workspace_id=change.workspace_id, enabled=True, online_percent__gt=0
        ).exists():
            score_online.enqueue(change.run_pk)
    if change.workspace_id is None or not may_gate(change):
        return
    if not GateJudge.objects.filter(workspace_id=change.workspace_id, enabled=True).exists():
        return
    judge_run.enqueue(change.run_pk)
