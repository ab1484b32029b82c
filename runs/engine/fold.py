"""Folding events into state: ``fold(run, events)`` and ``apply_event(state, event)``.

The fold is lenient: any protocol-valid trace, including one exported by the reference
runtime, folds without raising. Oddities (an event of another run, an unknown step, a
patch that does not apply) are recorded in ``state.warnings`` and otherwise ignored.
The strict checks live in :mod:`runs.engine.check` (events) and :mod:`runs.engine.decide` (commands).

``apply_event`` does O(1) work per event apart from what the event itself carries
(a patch is applied to a copy of the artifact's data; a keyed write is digested).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from runs.engine.artifacts import patch_digest, patched_version, write_digest
from runs.engine.state import AFTER_POLICIES, APPROVED, PENDING, RunState, gate_slot, routes_rejections
from runs.protocol.errors import ProtocolError

CHECKPOINT_CORRELATION_PREFIX = "checkpoint:"


def fold(run: dict[str, Any], events: Iterable[dict[str, Any]], *, start: RunState | None = None) -> RunState:
    """State of ``run`` after ``events`` (appended to ``start`` when given, else to the initial state)."""
    state = start if start is not None else RunState.initial(run)
    handlers = _HANDLERS
    for event in events:
        _apply(state, event, handlers)
    return state


def apply_event(state: RunState, event: dict[str, Any]) -> None:
    """Apply one event to ``state`` in place."""
    _apply(state, event, _HANDLERS)


def _apply(
    state: RunState, event: dict[str, Any], handlers: dict[str, Callable[[RunState, dict[str, Any]], None]]
) -> None:
    state.revision += 1
    etype: Any = event.get("type")  # as recorded: counted and looked up whatever it is
    counts = state.events_by_type
    counts[etype] = counts.get(etype, 0) + 1
    state.last_event_id = event.get("id")
    state.last_event_at = event.get("ts")
    if event.get("runId") != state.run.get("id"):
        state.warn("INVALID_TRACE_EVENT", f"event {event.get('id')} belongs to run {event.get('runId')!r}")
    handler = handlers.get(etype)
    if handler is None:
        state.warn("INVALID_TRACE_EVENT", f"unknown event type {etype!r}")
        return
    handler(state, event)


def _known_step(state: RunState, event: dict[str, Any]) -> str | None:
    sid = event.get("stepId")
    if sid in state.step_status:
        known: str = sid  # a key of step_status
        return known
    if event.get("type") == "step_started" and isinstance(sid, str) and state.can_discover(sid):
        state.add_step(sid)  # an external run found a new step (see runs.engine.state)
        return sid
    state.warn("UNKNOWN_STEP", f"{event.get('type')} for unknown step {sid!r}")
    return None


def checkpoint_name(state: RunState, event: dict[str, Any]) -> str | None:
    """The named checkpoint a CHECKPOINT gate event is about, or None for the step's start gate.

    A request carries the name in ``correlationId`` as ``checkpoint:<name>`` (the protocol has
    no field for it). A resolution this workbench writes carries it there too, and then its
    ``note`` is the reviewer's note (``checkpoint:`` with an empty name says "the step's own,
    unnamed CHECKPOINT gate"). A resolution without that correlation id names its checkpoint in
    ``note`` (the reference's convention), but a note is also where a reviewer's words go, so
    such a ``note`` names a checkpoint only when

    - that checkpoint was requested and is still pending on the step, or
    - no unnamed CHECKPOINT gate was requested on the step (the reference resolves named
      checkpoints without requesting them; its exports must keep folding as it folds them).

    Otherwise the resolution answers the requested (unnamed) CHECKPOINT gate and ``note`` is the
    reviewer's note. The decision only depends on the state before the event, so folding a trace
    again always gives the same answer.
    """
    if event.get("gate") != "CHECKPOINT":
        return None
    corr = event.get("correlationId")
    if isinstance(corr, str) and corr.startswith(CHECKPOINT_CORRELATION_PREFIX):
        return corr[len(CHECKPOINT_CORRELATION_PREFIX) :] or None
    if event.get("type") != "human_gate_resolved":
        return None
    note = event.get("note")
    if not isinstance(note, str) or not note:
        return None
    open_for_step = state.open_gates.get(event.get("stepId"), {})  # type: ignore[arg-type]
    if gate_slot("CHECKPOINT", note) in open_for_step:
        return note
    if "CHECKPOINT" in open_for_step:
        return None
    return note


def reviewer_note(event: dict[str, Any]) -> str | None:
    """The reviewer's note of a ``human_gate_resolved`` event (None when it only names a checkpoint).

    A resolution of a named checkpoint that carries ``checkpoint:<name>`` in ``correlationId``
    keeps the reviewer's words in ``note``; without words, ``note`` repeats the name (so that
    readers following the reference's convention, the name in ``note``, read the same gate)."""
    note = event.get("note")
    if not isinstance(note, str) or not note:
        return None
    corr = event.get("correlationId")
    if event.get("gate") == "CHECKPOINT" and isinstance(corr, str):
        if corr.startswith(CHECKPOINT_CORRELATION_PREFIX):
            return None if note == corr[len(CHECKPOINT_CORRELATION_PREFIX) :] else note
    return note


def _step_started(state: RunState, event: dict[str, Any]) -> None:
    sid = _known_step(state, event)
    if sid is None:
        return
    state.step_status[sid] = "running"
    state.step_attempts[sid] = state.step_attempts.get(sid, 0) + 1
    state.step_errors.pop(sid, None)
    rejected = state.rejections.get(sid)
    if rejected:  # a new attempt: the review of the previous outcome no longer applies
        for slot in [s for s in rejected if s == "PAUSE_AFTER" or s.startswith("CHECKPOINT:")]:
            del rejected[slot]
        if not rejected:
            del state.rejections[sid]


def _step_completed(state: RunState, event: dict[str, Any]) -> None:
    sid = _known_step(state, event)
    if sid is None:
        return
    rejected = state.rejections.get(sid)
    if rejected and routes_rejections(state.run):  # the node received the rejection and reacted
        for slot in [s for s in rejected if s.startswith("CHECKPOINT:")]:
            del rejected[slot]
        if not rejected:
            del state.rejections[sid]
    if event.get("ok"):
        state.step_status[sid] = "completed"
        if state.policy(sid) in AFTER_POLICIES:
            state.gate_state[sid]["after"] = PENDING
    else:
        state.step_status[sid] = "failed"
        state.step_errors[sid] = event.get("error") or {"message": "step failed"}


def _artifact_written(state: RunState, event: dict[str, Any]) -> None:
    artifact = event.get("artifact")
    if not isinstance(artifact, dict) or not isinstance(artifact.get("artifactKey"), str):
        state.warn("INVALID_TRACE_EVENT", "artifact_written without an artifact")
        return
    key = artifact["artifactKey"]
    state.artifacts[key] = artifact
    ikey = event.get("idempotencyKey")
    if ikey:
        state.idempotency[ikey] = {"artifactKey": key, "version": artifact.get("version")}
        try:
            state.idempotency_digests[ikey] = write_digest(
                key, artifact.get("typeId"), artifact.get("data"), artifact.get("pointer")
            )
        except ProtocolError as exc:
            state.warn(exc.code, f"idempotency key {ikey!r}: {exc.message}")


def _artifact_patch(state: RunState, event: dict[str, Any]) -> None:
    key = event.get("artifactKey")
    prev = state.artifacts.get(key)  # type: ignore[arg-type]
    if prev is None:
        state.warn("UNKNOWN_ARTIFACT", f"artifact_patch of unknown artifact {key!r}")
        return
    if prev.get("version") != event.get("fromVersion"):
        state.warn(
            "PATCH_FAILED",
            f"artifact_patch of {key!r} from version {event.get('fromVersion')} but latest is {prev.get('version')}",
        )
    try:
        artifact = patched_version(
            prev, to_version=event.get("toVersion"), created_at=event.get("ts"), patch=event.get("patch")
        )
    except ProtocolError as exc:
        state.warn(exc.code, f"artifact_patch of {key!r}: {exc.message}")
        return
    state.artifacts[key] = artifact  # type: ignore[index]
    ikey = event.get("idempotencyKey")
    if ikey:
        state.idempotency[ikey] = {"artifactKey": key, "version": artifact["version"]}
        try:
            state.idempotency_digests[ikey] = patch_digest(key, event.get("fromVersion"), event.get("patch"))  # type: ignore[arg-type]
        except ProtocolError as exc:
            state.warn(exc.code, f"idempotency key {ikey!r}: {exc.message}")


def _model_io(state: RunState, event: dict[str, Any]) -> None:
    if event.get("direction") != "response":
        return
    state.model_calls += 1
    usage = event.get("usage")
    if isinstance(usage, dict):
        tokens = state.tokens
        for name, value in usage.items():
            if type(value) is int and name in tokens:
                tokens[name] += value
        if type(usage.get("totalTokens")) is not int:
            # like the telemetry ledger: a usage without its own total counts input + output
            tokens["totalTokens"] += sum(
                v for v in (usage.get("inputTokens"), usage.get("outputTokens")) if type(v) is int
            )
    duration = event.get("durationMs")
    if isinstance(duration, int | float) and not isinstance(duration, bool):
        state.model_duration_ms += duration
    cost = event.get("cost")
    if isinstance(cost, dict) and isinstance(cost.get("currency"), str):
        currency = cost["currency"].strip().upper()
        amount = cost.get("amount")
        if currency and isinstance(amount, int | float) and not isinstance(amount, bool):
            state.add_cost(currency, amount)


def _gate_requested(state: RunState, event: dict[str, Any]) -> None:
    sid = _known_step(state, event)
    if sid is None:
        return
    gate = event.get("gate")
    name = checkpoint_name(state, event)
    slot = gate_slot(gate, name)  # type: ignore[arg-type]
    state.open_gates.setdefault(sid, {})[slot] = {
        "stepId": sid,
        "gate": gate,
        "checkpoint": name,
        "reason": event.get("reason"),
        "requestedAt": event.get("ts"),
        "eventId": event.get("id"),
    }
    rejected = state.rejections.get(sid)
    if rejected and slot in rejected:  # asking again is the retry of a rejected gate
        del rejected[slot]
        if not rejected:
            del state.rejections[sid]


def _gate_resolved(state: RunState, event: dict[str, Any]) -> None:
    sid = _known_step(state, event)
    if sid is None:
        return
    gate = event.get("gate")
    approved = event.get("decision") != "rejected"
    gs = state.gate_state[sid]
    name = checkpoint_name(state, event)
    if gate == "PAUSE_BEFORE":
        gs["before"] = APPROVED if approved else PENDING
    elif gate == "PAUSE_AFTER":
        gs["after"] = APPROVED if approved else PENDING
    elif gate == "CHECKPOINT":
        if name:
            gs["checkpoints"][name] = APPROVED if approved else PENDING
        elif approved:
            gs["before"] = APPROVED
    slot = gate_slot(gate, name)  # type: ignore[arg-type]
    open_for_step = state.open_gates.get(sid)
    if open_for_step is not None:
        open_for_step.pop(slot, None)
        if not open_for_step:
            del state.open_gates[sid]
    if approved:
        rejected = state.rejections.get(sid)
        if rejected and slot in rejected:
            del rejected[slot]
            if not rejected:
                del state.rejections[sid]
    else:
        state.rejections.setdefault(sid, {})[slot] = {
            "stepId": sid,
            "gate": gate,
            "checkpoint": name,
            "note": reviewer_note(event),
            "at": event.get("ts"),
            "eventId": event.get("id"),
        }


def _rule_changed(state: RunState, event: dict[str, Any]) -> None:
    snapshot = event.get("snapshot")
    rid = event.get("ruleSetId") or (snapshot or {}).get("id")
    if not isinstance(snapshot, dict) or not isinstance(rid, str):
        state.warn("INVALID_TRACE_EVENT", "rule_changed without a rule set snapshot")
        return
    state.rule_sets[rid] = snapshot


def _policy_changed(state: RunState, event: dict[str, Any]) -> None:
    sid = _known_step(state, event)
    if sid is None:
        return
    old = state.policy(sid)
    policy = event.get("policy")
    state.policies[sid] = policy  # type: ignore[assignment]
    if state.step_status[sid] == PENDING:
        # not started yet: the start gate follows the new policy. A start gate that was
        # already in force keeps its value (an approval given stays given).
        gated = ("PAUSE_BEFORE", "CHECKPOINT")
        if policy in gated and old not in gated:
            state.gate_state[sid]["before"] = PENDING
        elif policy not in gated:
            state.gate_state[sid]["before"] = APPROVED


def _run_forked(state: RunState, event: dict[str, Any]) -> None:
    parents = event.get("parentRunIds") or ([event["parentRunId"]] if event.get("parentRunId") else [])
    for parent in parents:
        if parent not in state.parent_run_ids:
            state.parent_run_ids.append(parent)


def _run_status_changed(state: RunState, event: dict[str, Any]) -> None:
    status = event.get("status")
    run = dict(state.run)
    run["status"] = status
    if status == "running":
        run.pop("endedAt", None)
    else:
        run["endedAt"] = event.get("ts")
    state.run = run


def _span_started(state: RunState, event: dict[str, Any]) -> None:
    span_id = event.get("spanId")
    state.open_spans[span_id] = {  # type: ignore[index]
        "spanId": span_id,
        "name": event.get("name"),
        "parentSpanId": event.get("parentSpanId"),
        "kind": event.get("kind"),
        "stepId": event.get("stepId"),
        "startedAt": event.get("ts"),
    }


def _span_ended(state: RunState, event: dict[str, Any]) -> None:
    if state.open_spans.pop(event.get("spanId"), None) is None:  # type: ignore[arg-type]
        state.warn("INVALID_TRACE_EVENT", f"span_ended for span {event.get('spanId')!r} that is not open")


def _noop(state: RunState, event: dict[str, Any]) -> None:
    return None


_HANDLERS: dict[str, Callable[[RunState, dict[str, Any]], None]] = {
    "step_started": _step_started,
    "step_completed": _step_completed,
    "artifact_written": _artifact_written,
    "artifact_patch": _artifact_patch,
    "model_io": _model_io,
    "tool_call": _noop,
    "human_gate_requested": _gate_requested,
    "human_gate_resolved": _gate_resolved,
    "rule_changed": _rule_changed,
    "policy_changed": _policy_changed,
    "error": _noop,
    "run_forked": _run_forked,
    "annotation": _noop,
    "run_status_changed": _run_status_changed,
    "span_started": _span_started,
    "span_ended": _span_ended,
}
