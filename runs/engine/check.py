"""Checking events against a run's state: ``check_event`` (is this a legal next event?) and
``append_in_place`` (check and apply a batch of external events).

``check_event`` checks what every event shares (its run, its type, a running run, a known step)
and then hands the event to the check of its type in :data:`_CHECKS`, a table keyed by event type
like the fold's handlers in :mod:`runs.engine.fold`. The gate and rule-set checks here are also
what :mod:`runs.engine.decide` applies to commands.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from runs.engine.artifacts import patched_version, pointer_problem
from runs.engine.commands import Context
from runs.engine.errors import EngineError, ErrorCode
from runs.engine.fold import apply_event, checkpoint_name
from runs.engine.guards import (
    check_cost,
    check_error_obj,
    check_usage,
    engine_error,
    nonempty_str,
    require_no_pending_gate,
    require_running,
    require_step,
    validate_data,
)
from runs.engine.state import APPROVED, TERMINAL_STATUSES, RunState, gate_slot
from runs.engine.workflow import GATE_POLICIES
from runs.protocol.errors import ProtocolError
from runs.protocol.schemas import SchemaRegistry
from runs.protocol.validate import EVENT_TYPES as PROTOCOL_EVENT_TYPES

GATES = ("PAUSE_BEFORE", "PAUSE_AFTER", "CHECKPOINT")
DECISIONS = ("approved", "rejected", "edited")
EVENT_TYPES = frozenset(PROTOCOL_EVENT_TYPES)
# Event types that name the step they are about.
STEP_EVENT_TYPES = frozenset(
    ("step_started", "step_completed", "human_gate_requested", "human_gate_resolved", "policy_changed")
)
# Event types whose checks are all about the event's shape: skipped once the protocol's validator ran.
SHAPE_ONLY_EVENT_TYPES = frozenset(("model_io",))


def append_in_place(
    state: RunState,
    events: Iterable[Any],
    ctx: Context,
    on_applied: Callable[[dict[str, Any]], None] | None = None,
    *,
    shape_checked: bool = False,
) -> None:
    """Check each event against the state it meets and apply it to ``state`` in place.

    The fast path for a host's batch: no trial copy of the state. On an error ``state`` is left
    half-applied, so callers must discard it (the actions roll their transaction back).
    """
    for i, event in enumerate(events):
        try:
            check_event(state, event, ctx, shape_checked=shape_checked)
        except EngineError as exc:
            where = f"events[{i}]" + (f".{exc.path}" if exc.path else "")
            raise EngineError(
                exc.code,
                f"event {i} ({event.get('type') if isinstance(event, dict) else '?'}): {exc.message}",
                where,
            ) from None
        apply_event(state, event)
        if on_applied is not None:
            on_applied(event)


def check_event(state: RunState, event: Any, ctx: Context, *, shape_checked: bool = False) -> None:
    """Raise :class:`EngineError` unless ``event`` is a legal next event for ``state``.

    ``shape_checked=True`` says the protocol's validator (runs.protocol.validate.validate_event)
    has already checked the event's shape, so only what depends on the state is checked here.
    """
    if not shape_checked:
        _check_envelope(event)
    if event["runId"] != state.run_id:
        raise engine_error(
            ErrorCode.INVALID_TRACE_EVENT,
            f'event belongs to run "{event["runId"]}", not "{state.run_id}"',
            "runId",
        )
    etype = event.get("type")
    if etype not in EVENT_TYPES:
        raise engine_error(ErrorCode.INVALID_TRACE_EVENT, f"unknown event type {etype!r}", "type")
    if etype != "annotation":  # annotations change no state: a finished run takes them (decide._annotate)
        require_running(state, f"append {etype}")
    if "stepId" in event and not (etype == "step_started" and state.can_discover(event["stepId"])):
        require_step(state, event["stepId"])  # an external run's new step is added when it starts
    if etype in STEP_EVENT_TYPES and event.get("stepId") is None:
        raise engine_error(ErrorCode.INVALID_TRACE_EVENT, f"{etype} needs a stepId", "stepId")
    if shape_checked and etype in SHAPE_ONLY_EVENT_TYPES:
        return
    check = _CHECKS.get(etype)
    if check is not None:
        check(state, event, ctx)


def _check_envelope(event: Any) -> None:
    if not isinstance(event, dict):
        raise engine_error(ErrorCode.INVALID_TRACE_EVENT, "an event is an object")
    for key in ("id", "runId", "ts"):
        if not isinstance(event.get(key), str) or not event[key]:
            raise engine_error(ErrorCode.INVALID_TRACE_EVENT, f"{key} must be a non-empty string", key)


# --------------------------------------------------------------------------- one check per event type
# Each takes (state, event, ctx) after check_event's common checks: a step event's stepId is known.


def _step_started(state: RunState, event: dict[str, Any], ctx: Context) -> None:
    sid = event["stepId"]
    blocker = state.start_blocker(sid)
    if blocker is not None:
        raise engine_error(
            ErrorCode.INVALID_STATE_TRANSITION, f'step "{sid}" cannot start: {blocker}', "stepId"
        )


def _step_completed(state: RunState, event: dict[str, Any], ctx: Context) -> None:
    sid = event["stepId"]
    if type(event.get("ok")) is not bool:
        raise engine_error(ErrorCode.INVALID_TRACE_EVENT, "ok must be a boolean", "ok")
    status = state.step_status[sid]
    if status != "running" and not (event["ok"] is False and status == "pending"):
        raise engine_error(
            ErrorCode.INVALID_STATE_TRANSITION,
            f'step "{sid}" cannot complete: it is {status}, not running',
            "stepId",
        )
    if event["ok"]:
        blocker = state.complete_blocker(sid)
        if blocker is not None:
            raise engine_error(
                ErrorCode.INVALID_STATE_TRANSITION, f'step "{sid}" cannot complete: {blocker}', "stepId"
            )
    elif event.get("error") is not None:
        check_error_obj(event["error"], "error")


def _gate_requested(state: RunState, event: dict[str, Any], ctx: Context) -> None:
    gate = check_gate_name(event.get("gate"))
    check_request_transition(state, event["stepId"], gate, checkpoint_name(state, event))


def _gate_resolved(state: RunState, event: dict[str, Any], ctx: Context) -> None:
    gate = check_gate_name(event.get("gate"))
    name = checkpoint_name(state, event)
    if event.get("decision") not in DECISIONS:
        raise engine_error(
            ErrorCode.INVALID_INPUT, f"decision must be one of {', '.join(DECISIONS)}", "decision"
        )
    check_resolve_transition(state, event["stepId"], gate, name)


def _model_io(state: RunState, event: dict[str, Any], ctx: Context) -> None:
    if event.get("direction") not in ("request", "response", "stream_chunk"):
        raise engine_error(
            ErrorCode.INVALID_INPUT, "direction must be request, response or stream_chunk", "direction"
        )
    check_usage(event.get("usage"))
    check_cost(event.get("cost"))


def _tool_call(state: RunState, event: dict[str, Any], ctx: Context) -> None:
    nonempty_str(event.get("name"), "name", "tool name")


def _rule_changed(state: RunState, event: dict[str, Any], ctx: Context) -> None:
    rule_set = check_rule_set(event.get("snapshot"), ctx.schemas, "snapshot")
    if event.get("ruleSetId") != rule_set["id"]:
        raise engine_error(ErrorCode.INVALID_INPUT, "ruleSetId must equal snapshot.id", "ruleSetId")


def _policy_changed(state: RunState, event: dict[str, Any], ctx: Context) -> None:
    if event.get("policy") not in GATE_POLICIES:
        raise engine_error(
            ErrorCode.INVALID_INPUT, f"policy must be one of {', '.join(GATE_POLICIES)}", "policy"
        )


def _error(state: RunState, event: dict[str, Any], ctx: Context) -> None:
    nonempty_str(event.get("message"), "message", "error message")


def _run_forked(state: RunState, event: dict[str, Any], ctx: Context) -> None:
    nonempty_str(event.get("parentRunId"), "parentRunId", "parentRunId")
    parents = event.get("parentRunIds")
    if parents is not None and (
        not isinstance(parents, list) or not parents or parents[0] != event["parentRunId"]
    ):
        raise engine_error(
            ErrorCode.INVALID_INPUT,
            "parentRunIds must be a non-empty list starting with parentRunId",
            "parentRunIds",
        )


def _annotation(state: RunState, event: dict[str, Any], ctx: Context) -> None:
    if not isinstance(event.get("text"), str):
        raise engine_error(ErrorCode.INVALID_INPUT, "annotation text must be a string", "text")


def _run_status_changed(state: RunState, event: dict[str, Any], ctx: Context) -> None:
    status = event.get("status")
    if status not in TERMINAL_STATUSES:
        raise engine_error(
            ErrorCode.INVALID_STATE_TRANSITION,
            f"a running run can only move to {', '.join(sorted(TERMINAL_STATUSES))}",
            "status",
        )
    running = [s for s, st in state.step_status.items() if st == "running"]
    if running:
        raise engine_error(
            ErrorCode.INVALID_STATE_TRANSITION,
            f"cannot mark the run {status}: waiting for running step(s) "
            + ", ".join(f'"{s}"' for s in running),
            "status",
        )
    if status == "completed":
        require_no_pending_gate(state, "mark the run completed", "status")


def _span_started(state: RunState, event: dict[str, Any], ctx: Context) -> None:
    span_id = nonempty_str(event.get("spanId"), "spanId", "spanId")
    nonempty_str(event.get("name"), "name", "span name")
    if span_id in state.open_spans:
        raise engine_error(ErrorCode.INVALID_STATE_TRANSITION, f'span "{span_id}" is already open', "spanId")


def _span_ended(state: RunState, event: dict[str, Any], ctx: Context) -> None:
    if event.get("spanId") not in state.open_spans:
        raise engine_error(
            ErrorCode.INVALID_STATE_TRANSITION, f'span "{event.get("spanId")}" is not open', "spanId"
        )


def _artifact_written(state: RunState, event: dict[str, Any], ctx: Context) -> None:
    artifact = event.get("artifact")
    if not isinstance(artifact, dict):
        raise engine_error(ErrorCode.INVALID_TRACE_EVENT, "artifact_written needs an artifact", "artifact")
    key = nonempty_str(artifact.get("artifactKey"), "artifact.artifactKey", "artifactKey")
    type_id = nonempty_str(artifact.get("typeId"), "artifact.typeId", "typeId")
    prev = state.artifacts.get(key)
    expected = (prev["version"] if prev else 0) + 1
    if artifact.get("version") != expected:
        raise engine_error(
            ErrorCode.INVALID_STATE_TRANSITION,
            f'artifact "{key}" is at version {expected - 1}; a write must create version {expected}',
            "artifact.version",
        )
    has_data = "data" in artifact
    if "pointer" in artifact:
        problem = pointer_problem(artifact["pointer"], artifact.get("data"), has_data)
        if problem:
            raise engine_error(ErrorCode.INVALID_INPUT, problem[1], f"artifact.{problem[0]}")
    ikey = event.get("idempotencyKey")
    if ikey is not None and ikey in state.idempotency:
        raise engine_error(
            ErrorCode.IDEMPOTENCY_CONFLICT, f'idempotency key "{ikey}" was already used', "idempotencyKey"
        )
    if has_data:
        validate_data(ctx, type_id, artifact["data"], "artifact.data")


def _artifact_patch(state: RunState, event: dict[str, Any], ctx: Context) -> None:
    key = event.get("artifactKey")
    prev = state.artifacts.get(key)  # type: ignore[arg-type]
    if prev is None:
        raise engine_error(ErrorCode.UNKNOWN_ARTIFACT, f"unknown artifact {key!r}", "artifactKey")
    if event.get("fromVersion") != prev["version"] or event.get("toVersion") != prev["version"] + 1:
        raise engine_error(
            ErrorCode.PATCH_FAILED,
            f'artifact "{key}" is at version {prev["version"]}; a patch must go from it to {prev["version"] + 1}',
            "fromVersion",
        )
    ikey = event.get("idempotencyKey")
    if ikey is not None and ikey in state.idempotency:
        raise engine_error(
            ErrorCode.IDEMPOTENCY_CONFLICT, f'idempotency key "{ikey}" was already used', "idempotencyKey"
        )
    try:
        artifact = patched_version(
            prev, to_version=prev["version"] + 1, created_at=event["ts"], patch=event.get("patch")
        )
    except ProtocolError as exc:
        raise EngineError(exc.code, exc.message, exc.path) from None
    validate_data(ctx, prev["typeId"], artifact["data"], "data")


_CHECKS: dict[str, Callable[[RunState, dict[str, Any], Context], None]] = {
    "step_started": _step_started,
    "step_completed": _step_completed,
    "human_gate_requested": _gate_requested,
    "human_gate_resolved": _gate_resolved,
    "artifact_written": _artifact_written,
    "artifact_patch": _artifact_patch,
    "model_io": _model_io,
    "tool_call": _tool_call,
    "rule_changed": _rule_changed,
    "policy_changed": _policy_changed,
    "error": _error,
    "run_forked": _run_forked,
    "annotation": _annotation,
    "run_status_changed": _run_status_changed,
    "span_started": _span_started,
    "span_ended": _span_ended,
}


# --------------------------------------------------------------------------- gates and rule sets
# Shared with runs.engine.decide, which applies them to commands.


def check_gate_name(gate: Any) -> str:
    if gate not in GATES:
        raise engine_error(ErrorCode.INVALID_INPUT, f"gate must be one of {', '.join(GATES)}", "gate")
    name: str = gate  # one of GATES
    return name


def check_request_transition(state: RunState, sid: str, gate: str, checkpoint: str | None) -> None:
    status = state.step_status[sid]
    if gate == "PAUSE_BEFORE" and status in ("running", "completed"):
        raise engine_error(
            ErrorCode.INVALID_STATE_TRANSITION, f'cannot request PAUSE_BEFORE on step "{sid}": it is {status}'
        )
    if gate == "PAUSE_AFTER" and status not in ("running", "completed"):
        raise engine_error(
            ErrorCode.INVALID_STATE_TRANSITION,
            f'cannot request PAUSE_AFTER on step "{sid}": it is {status}, not started',
        )
    if gate == "CHECKPOINT" and status == "completed":
        raise engine_error(
            ErrorCode.INVALID_STATE_TRANSITION,
            f'cannot request a CHECKPOINT on step "{sid}": it has completed',
        )


def check_resolve_transition(state: RunState, sid: str, gate: str, checkpoint: str | None) -> None:
    status = state.step_status[sid]
    gs = state.gate_state[sid]
    slot = gate_slot(gate, checkpoint)
    requested = slot in state.open_gates.get(sid, {})
    label = f'CHECKPOINT "{checkpoint}"' if checkpoint else gate
    if state.is_rejected(sid, slot) and not requested:
        raise engine_error(
            ErrorCode.INVALID_STATE_TRANSITION,
            f'{label} of step "{sid}" was rejected: request it again to retry, or fork the run',
        )
    if gate == "PAUSE_AFTER":
        if status != "completed":
            raise engine_error(
                ErrorCode.INVALID_STATE_TRANSITION,
                f'cannot resolve PAUSE_AFTER of step "{sid}": it is {status}, waiting for the step to complete',
            )
        if gs["after"] == APPROVED and not requested:
            raise engine_error(
                ErrorCode.INVALID_STATE_TRANSITION, f'no PAUSE_AFTER gate is waiting on step "{sid}"'
            )
        return
    if gate == "CHECKPOINT" and checkpoint:
        if status == "completed":
            raise engine_error(
                ErrorCode.INVALID_STATE_TRANSITION, f'cannot resolve {label}: step "{sid}" has completed'
            )
        if gs["checkpoints"].get(checkpoint) == APPROVED and not requested:
            raise engine_error(
                ErrorCode.INVALID_STATE_TRANSITION, f'{label} of step "{sid}" is already approved'
            )
        return
    # start gate: PAUSE_BEFORE, or an unnamed CHECKPOINT approval
    if status in ("running", "completed"):
        raise engine_error(
            ErrorCode.INVALID_STATE_TRANSITION, f'cannot resolve {gate} of step "{sid}": it is {status}'
        )
    if gs["before"] == APPROVED and not requested:
        raise engine_error(ErrorCode.INVALID_STATE_TRANSITION, f'no {gate} gate is waiting on step "{sid}"')


def check_rule_set(rule_set: Any, schemas: SchemaRegistry, path: str = "ruleSet") -> dict[str, Any]:
    """Validate a RuleSet and each rule payload against its ``ruleSchemaId``."""
    if not isinstance(rule_set, dict):
        raise engine_error(ErrorCode.INVALID_INPUT, "a rule set is an object", path)
    nonempty_str(rule_set.get("id"), f"{path}.id", "rule set id")
    schema_id = nonempty_str(rule_set.get("ruleSchemaId"), f"{path}.ruleSchemaId", "ruleSchemaId")
    rules = rule_set.get("rules")
    if not isinstance(rules, list):
        raise engine_error(ErrorCode.INVALID_INPUT, "rules must be a list", f"{path}.rules")
    seen: set[str] = set()
    for i, rule in enumerate(rules):
        where = f"{path}.rules[{i}]"
        if not isinstance(rule, dict):
            raise engine_error(ErrorCode.INVALID_INPUT, "a rule is an object", where)
        rid = nonempty_str(rule.get("id"), f"{where}.id", "rule id")
        if rid in seen:
            raise engine_error(ErrorCode.INVALID_INPUT, f'duplicate rule id "{rid}"', f"{where}.id")
        seen.add(rid)
        if type(rule.get("priority")) is not int:
            raise engine_error(ErrorCode.INVALID_INPUT, "priority must be an integer", f"{where}.priority")
        if type(rule.get("enabled")) is not bool:
            raise engine_error(ErrorCode.INVALID_INPUT, "enabled must be a boolean", f"{where}.enabled")
        if "label" in rule and not isinstance(rule["label"], str):
            raise engine_error(ErrorCode.INVALID_INPUT, "label must be a string", f"{where}.label")
        if "payload" not in rule:
            raise engine_error(ErrorCode.INVALID_INPUT, "a rule needs a payload", f"{where}.payload")
        try:
            schemas.validate(schema_id, rule["payload"], path=f"{where}.payload")
        except ProtocolError as exc:
            raise EngineError(exc.code, exc.message, exc.path) from None
    return rule_set
