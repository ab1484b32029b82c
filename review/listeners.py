"""Rules at work: after a run change commits (runs.actions.notify), queues whose rules match the
run get it as an item. Only changes that can match (a rejection or an error in the change, or a
finished run) read anything; an ordinary append costs nothing here."""

from __future__ import annotations

import logging

from review.actions import do_add_items
from review.models import Queue
from review.rules import RunFacts, matches, parse_rules
from runs.actions.notify import RunChange
from runs.engine.state import TERMINAL_STATUSES
from runs.models import Run

log = logging.getLogger(__name__)
RULE_ACTOR = "rule"


def facts_of(run: Run, change: RunChange) -> RunFacts:
    return RunFacts(
        run_id=run.run_id,
        workflow_id=run.workflow_id,
        status=run.status,
        finished=run.status in TERMINAL_STATUSES,
        rejected_gates=run.rejected_gates,
        had_error=run.status == "failed" or any(e.get("type") == "error" for e in change.events),
        cost=dict(run.cost_totals or {}),
    )


def may_match(change: RunChange) -> bool:
    if not change.workspace_id or not change.run_pk or change.status == "deleted":
        return False
    if change.status in TERMINAL_STATUSES:
        return True
    return any(
        e.get("type") == "error"
        or (e.get("type") == "human_gate_resolved" and e.get("decision") == "rejected")
        for e in change.events
    )


def add_by_rules(change: RunChange) -> None:
    workspace_id = change.workspace_id
    if workspace_id is None or not may_match(change):
        return
    queues = list(Queue.objects.filter(workspace_id=workspace_id).exclude(rules={}))
    if not queues:
        return
    run = Run.unscoped.filter(pk=change.run_pk, workspace_id=workspace_id).first()
    if run is None:
        return
    facts = facts_of(run, change)
    for queue in queues:
        try:
            if matches(parse_rules(queue.rules), facts):
                do_add_items(queue=queue, items=[{"runId": run.run_id}], actor=RULE_ACTOR)
        except ValueError:
            log.warning("queue %s has rules it cannot read", queue.queue_id)
