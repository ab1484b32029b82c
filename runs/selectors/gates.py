"""Gate decisions as a pipeline receives them: the first resolution of one gate after its request.

``gate_decision`` answers ``{decision, note, edits, by, at, seq}`` (the reviewer's note from the
resolution itself; ``edits``: the artifact version written with an "edited" decision; ``by``: who
resolved it, kept beside the event) or None while nobody has decided.
"""

from __future__ import annotations

from typing import Any

from runs.engine.fold import CHECKPOINT_CORRELATION_PREFIX, reviewer_note
from runs.models import ArtifactVersion, Event, Run, Workspace
from runs.protocol.values import loads

EDIT_EVENT_TYPES = ("artifact_written", "artifact_patch")


def _names_other_gate(event: dict[str, Any], checkpoint: str | None) -> bool:
    """True when a CHECKPOINT resolution is about another checkpoint than ``checkpoint``."""
    if event.get("gate") != "CHECKPOINT":
        return False
    corr = event.get("correlationId")
    if isinstance(corr, str) and corr.startswith(CHECKPOINT_CORRELATION_PREFIX):
        return (corr[len(CHECKPOINT_CORRELATION_PREFIX) :] or None) != checkpoint
    if checkpoint is None:  # the reference names a checkpoint in note; a bare note is words
        return False
    return event.get("note") != checkpoint


def _legacy_note(run: Run, seq: int, corr: str) -> str | None:
    """Resolutions written before notes moved into the decision kept them in a ``gate-note``
    annotation right after the resolution."""
    row = Event.objects.filter(run=run, seq=seq + 1, type="annotation", correlation_id=corr).first()
    if row is None:
        return None
    body = loads(row.body)
    return body.get("text") if "gate-note" in (body.get("tags") or []) else None


def _edits(run: Run, seq: int, step_id: str) -> list[dict[str, Any]]:
    """The artifact version the decision wrote (an edit is appended just before its resolution)."""
    row = Event.objects.filter(run=run, seq=seq - 1, type__in=EDIT_EVENT_TYPES, step_id=step_id).first()
    if row is None:
        return []
    version = ArtifactVersion.objects.filter(run=run, seq=seq - 1).first()
    if version is None:
        return []
    artifact = loads(version.body)
    return [{k: artifact[k] for k in ("artifactKey", "typeId", "version", "data") if k in artifact}]


def gate_decision(
    run: Run, *, step_id: str, gate: str, checkpoint: str | None, after_seq: int
) -> dict[str, Any] | None:
    """The first decision on this gate after seq ``after_seq`` (its request), or None."""
    rows = Event.objects.filter(run=run, seq__gt=after_seq, type="human_gate_resolved", step_id=step_id)
    for seq, body, actor, ts in rows.order_by("seq").values_list("seq", "body", "actor", "ts"):
        event = loads(body)
        if event.get("gate") != gate or _names_other_gate(event, checkpoint):
            continue
        note = reviewer_note(event)
        if checkpoint and note is None:
            note = _legacy_note(run, seq, f"{CHECKPOINT_CORRELATION_PREFIX}{checkpoint}")
        if checkpoint and note is not None and event.get("correlationId") is None and note == checkpoint:
            note = None  # the reference's convention: the note only names the checkpoint
        return {
            "decision": event.get("decision"),
            "note": note,
            "edits": _edits(run, seq, step_id),
            "by": actor or None,
            "at": ts,
            "seq": seq,
        }
    return None


def recent_decisions(workspace: Workspace, *, limit: int = 15, runs: int = 50) -> list[dict[str, Any]]:
    """The inbox's history: the newest gate decisions over the workspace's ``runs`` newest runs
    (one index range per run: (run, type, seq)), newest first, each with its run, actor and
    whether a gate judge made it (a machine decision)."""
    recent = list(Run.objects.filter(workspace=workspace).order_by("-started_at", "-id")[:runs])
    by_pk = {run.pk: run for run in recent}
    rows = (
        Event.objects.filter(run_id__in=list(by_pk), type="human_gate_resolved")
        .order_by("-ts", "-seq")
        .values("run_id", "seq", "ts", "step_id", "correlation_id", "actor", "body")[:limit]
    )
    out = []
    for row in rows:
        data = loads(row["body"])
        corr = row.get("correlation_id") or ""
        out.append(
            {
                "run": by_pk[row["run_id"]],
                "seq": row["seq"],
                "ts": row["ts"],
                "step_id": row["step_id"],
                "gate": data.get("gate"),
                "decision": data.get("decision"),
                "checkpoint": corr.removeprefix(CHECKPOINT_CORRELATION_PREFIX)
                if corr.startswith(CHECKPOINT_CORRELATION_PREFIX)
                else "",
                "note": reviewer_note(data),
                "actor": row["actor"],
            }
        )
    return out
