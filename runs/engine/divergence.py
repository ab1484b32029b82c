"""Replay comparison (pure): which events of a replay are its own, and whether one equals the
source's event at the same position.

Events are compared as protocol JSON with what differs between two faithful executions left
out: event ``id``, ``runId``, ``ts``, ``correlationId``, span ids, durations measured on a
clock (``durationMs``) and the creation time of artifact versions. Everything else (types,
steps, decisions, model outputs, usage, cost, artifact data) must be equal. One exception: a
model answer taken from the response cache by a traced client is recorded with the summary
:data:`REPLAYED_SUMMARY`, which stands for whatever summary the original answer had; the
answer itself (payload, usage, cost) is still compared.

Protocol 1.0.0 has no ``replay.diverged`` event. A divergence is recorded as an
``annotation`` whose tags include :data:`DIVERGED_TAG` and whose text is canonical JSON
``{"type": "replay.diverged", "originalEventId", "replayEventId", "divergencePoint", ...}``,
so bundles with it verify under the reference's rules.
"""

from __future__ import annotations

from typing import Any

DIVERGED_TAG = "workbench:replay.diverged"
AUDIT_TAG = "workbench:audit"
MARKER_TAGS = frozenset({DIVERGED_TAG, AUDIT_TAG})
REPLAYED_SUMMARY = "replayed"  # the summary of a model answer replayed from the cache
IGNORED_KEYS = frozenset({"id", "runId", "ts", "correlationId", "spanId", "parentSpanId", "durationMs"})


def is_marker(event: dict[str, Any]) -> bool:
    """Events the fork machinery itself writes (not part of what is compared)."""
    kind = event.get("type")
    if kind == "run_forked":
        return True
    if kind == "annotation":
        return any(tag in MARKER_TAGS for tag in event.get("tags") or ())
    return False


def comparable(event: dict[str, Any]) -> dict[str, Any]:
    """The event without the fields two faithful executions may differ in."""
    out = {k: v for k, v in event.items() if k not in IGNORED_KEYS}
    artifact = out.get("artifact")
    if isinstance(artifact, dict) and "createdAt" in artifact:
        out["artifact"] = {k: v for k, v in artifact.items() if k != "createdAt"}
    return out


def same_event(original: dict[str, Any] | None, replay: dict[str, Any] | None) -> bool:
    if original is None or replay is None:
        return original is replay
    left, right = comparable(original), comparable(replay)
    if left.get("type") == "model_io" and REPLAYED_SUMMARY in (left.get("summary"), right.get("summary")):
        left.pop("summary", None)
        right.pop("summary", None)
    return left == right


def divergence_kind(original: dict[str, Any] | None, replay: dict[str, Any] | None) -> str:
    """``extra`` (the source has no event there), ``missing`` (the replay ended early),
    ``type`` (another kind of event) or ``output`` (same kind, other content)."""
    if original is None:
        return "extra"
    if replay is None:
        return "missing"
    if original.get("type") != replay.get("type"):
        return "type"
    return "output"


def score(matched: int, compared: int) -> float:
    """matched / compared (1.0 when nothing was there to compare)."""
    return 1.0 if compared == 0 else matched / compared
