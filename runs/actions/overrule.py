"""Overrule a machine decision: in one action, a person forks the run from just before a gate a
gate judge decided (actor ``judge:<name>@<version>``) and decides that gate themselves.

The fork is a branch from the judge's ``human_gate_resolved`` event (its history ends right before
it, so the gate waits again in the fork) whose overlay names the person's decision
(``gateDecisions``) and the tag ``overrule``. A fork the workbench re-executes (a registered
program) takes that decision when its step code reaches the gate; a fork its host drives (an SDK
or imported run) has the gate decided by the person at once, in the same transaction. The source
run, and the judge's decision in it, are never touched: the machine decision stays on the record.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from runs.actions.core import ActionError
from runs.actions.forks import do_fork_with_history
from runs.actions.gatepolicy import do_decide_gate
from runs.models import Event, ForkStatus, RunFork, Workspace
from runs.protocol.errors import ErrorCode
from runs.protocol.values import loads
from runs.selectors.runs import get_run

MACHINE_PREFIX = "judge:"  # a gate judge's actor (judges app): judge:<name>@<version>
OVERRULE_TAG = "overrule"
NOT_A_MACHINE_DECISION = "NOT_A_MACHINE_DECISION"
SAME_DECISION = "SAME_DECISION"
DECISIONS = ("approved", "rejected")
NOTE_MAX = 4000


def is_machine(actor: str | None) -> bool:
    return bool(actor) and str(actor).startswith(MACHINE_PREFIX)


def machine_decision(workspace: Workspace, run_id: str, seq: Any) -> dict[str, Any]:
    """The judge's gate decision at ``seq`` of the run (its columns and body as ``data``), or
    NOT_A_MACHINE_DECISION (RunNotFound for a run the workspace does not hold)."""
    run = get_run(workspace, run_id)
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
        raise ActionError(ErrorCode.INVALID_INPUT, "seq is the decision's event number (1 or more)", "seq")
    row = (
        Event.objects.filter(run=run, seq=seq, type="human_gate_resolved")
        .values("seq", "actor", "correlation_id", "body")
        .first()
    )
    if row is None or not is_machine(row["actor"]):
        raise ActionError(
            NOT_A_MACHINE_DECISION,
            f"event #{seq} of {run_id} is not a gate decision a judge made; a person's decision is "
            "changed by deciding the gate again after a fork, not overruled",
            "seq",
        )
    found: dict[str, Any] = dict(row)
    found["data"] = loads(found.pop("body"))
    return found


def _checkpoint(found: dict[str, Any]) -> str | None:
    if found["data"].get("gate") != "CHECKPOINT":
        return None
    corr = found.get("correlation_id") or ""
    if corr.startswith("checkpoint:"):
        return corr.removeprefix("checkpoint:")
    return found["data"].get("note") or None


def do_overrule(
    *,
    workspace: Workspace,
    run_id: str,
    seq: Any,
    decision: Any,
    note: Any = "",
    actor: str,
) -> RunFork:
    """Fork ``run_id`` from before the judge's decision at ``seq`` with ``actor``'s own ``decision``
    (approved or rejected, the other of the judge's). Refusals change nothing: INVALID_INPUT,
    NOT_A_MACHINE_DECISION, SAME_DECISION, and whatever the fork or the gate's policy refuses."""
    if decision not in DECISIONS:
        raise ActionError(ErrorCode.INVALID_INPUT, "decision is approved or rejected", "decision")
    if note is not None and not isinstance(note, str):
        raise ActionError(ErrorCode.INVALID_INPUT, "note is a string", "note")
    note = (note or "").strip()[:NOTE_MAX]
    with transaction.atomic():
        found = machine_decision(workspace, run_id, seq)
        data = found["data"]
        if data.get("decision") == decision:
            raise ActionError(
                SAME_DECISION,
                f"{found['actor']} already {decision} this gate; overruling takes the other decision",
                "decision",
            )
        step_id, gate, checkpoint = str(data.get("stepId")), str(data.get("gate")), _checkpoint(found)
        said = f"Overrules {found['actor']} ({data.get('decision')} at #{found['seq']} of {run_id})"
        full_note = f"{said}: {note}" if note else said
        chosen = {"decision": decision}
        if checkpoint is None:  # a named checkpoint's resolution carries its name in `note`
            chosen["note"] = full_note
        fork = do_fork_with_history(
            workspace=workspace,
            source_run_id=run_id,
            mode="branch",
            from_seq=found["seq"],
            overlay={
                "gateDecisions": {step_id: chosen},
                "tags": [OVERRULE_TAG],
            },
            actor=actor,
        )
        if fork.status == ForkStatus.EXTERNAL:  # nobody re-executes it: the person decides now
            do_decide_gate(
                workspace=workspace,
                run_id=fork.run.run_id,
                step_id=step_id,
                gate=gate,
                decision=decision,
                note=full_note,
                checkpoint=checkpoint,
                actor=actor,
            )
    return fork
