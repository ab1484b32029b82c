"""Commands and ``decide``: state + command -> new protocol events, or an :class:`EngineError`.

``decide`` never mutates the state; the caller appends the returned events and applies
them with :func:`runs.engine.fold.apply_event`. A refused command raises with nothing
emitted. An empty list means the command was already satisfied (an idempotent retry).

Gate semantics over the workflow DAG:

* a step may begin when every predecessor completed (and its PAUSE_AFTER review, if
  any, was approved) and its own start gate allows it;
* PAUSE_BEFORE (and CHECKPOINT, whose start needs an unnamed CHECKPOINT approval, as in
  the reference): ``BeginStep`` on a step whose start gate is not approved emits the
  ``human_gate_requested`` event instead of starting, and holds until approved;
* PAUSE_AFTER (and CHECKPOINT): completing the step requests a PAUSE_AFTER review and
  successors wait until it is approved;
* named checkpoints are requested and approved one by one inside a step; a step cannot
  complete successfully while one of its checkpoints is pending or rejected;
* a rejection is a fact that stops forward progress on that path: the gate stays shut
  until it is requested again (the retry) or the run is forked. Nothing is skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from runs.engine.artifacts import patch_digest, patched_version, pointer_problem, write_digest
from runs.engine.errors import EngineError, ErrorCode
from runs.engine.fold import CHECKPOINT_CORRELATION_PREFIX, apply_event, checkpoint_name
from runs.engine.state import APPROVED, TERMINAL_STATUSES, USAGE_FIELDS, RunState, gate_slot
from runs.engine.workflow import GATE_POLICIES, normalize_workflow
from runs.protocol.errors import ProtocolError
from runs.protocol.patch import check_patch
from runs.protocol.schemas import SchemaRegistry, default_registry
from runs.protocol.validate import EVENT_TYPES as PROTOCOL_EVENT_TYPES
from runs.protocol.values import new_id, now_iso

GATES = ("PAUSE_BEFORE", "PAUSE_AFTER", "CHECKPOINT")
DECISIONS = ("approved", "rejected", "edited")
AFTER_GATE_REASON = "Review outputs before downstream steps proceed"


@dataclass
class Context:
    """What ``decide`` needs from the outside world: a clock, id generation and schemas."""

    now: Callable[[], str] = now_iso
    new_id: Callable[[str], str] = new_id
    schemas: SchemaRegistry = field(default_factory=default_registry)


# --------------------------------------------------------------------------- commands


@dataclass(frozen=True)
class BeginStep:
    step_id: str


@dataclass(frozen=True)
class CompleteStep:
    step_id: str
    ok: bool = True
    error: dict[str, Any] | None = None  # {message, code?} when ok is False


@dataclass(frozen=True)
class RequestGate:
    step_id: str
    gate: str
    reason: str | None = None
    checkpoint: str | None = None


@dataclass(frozen=True)
class WriteArtifact:
    key: str
    type_id: str
    data: Any
    idempotency_key: str | None = None
    step_id: str | None = None
    pointer: dict[str, Any] | None = None
    # The version the writer based its data on (0: the artifact must not exist yet). A write
    # against an older version is refused with PATCH_FAILED, like a patch with a stale fromVersion.
    expected_version: int | None = None


@dataclass(frozen=True)
class PatchArtifact:
    key: str
    from_version: int
    patch: list[dict[str, Any]]
    idempotency_key: str | None = None
    step_id: str | None = None


@dataclass(frozen=True)
class ResolveGate:
    step_id: str
    gate: str
    decision: str
    note: str | None = None
    checkpoint: str | None = None
    edit: WriteArtifact | PatchArtifact | None = None  # only with decision "edited"


@dataclass(frozen=True)
class LogModelIO:
    direction: str
    provider: str | None = None
    model: str | None = None
    usage: dict[str, int] | None = None
    cost: dict[str, Any] | None = None
    duration_ms: float | None = None
    summary: str | None = None
    payload: Any = None
    step_id: str | None = None
    correlation_id: str | None = None


@dataclass(frozen=True)
class LogToolCall:
    name: str
    args: Any = None
    result: Any = None
    step_id: str | None = None
    correlation_id: str | None = None


@dataclass(frozen=True)
class Annotate:
    text: str
    tags: tuple[str, ...] | list[str] | None = None
    step_id: str | None = None


@dataclass(frozen=True)
class RecordError:
    message: str
    code: str | None = None
    fatal: bool = False
    step_id: str | None = None


@dataclass(frozen=True)
class StartSpan:
    name: str
    span_id: str | None = None  # generated when absent
    parent_span_id: str | None = None
    kind: str | None = None
    attributes: dict[str, Any] | None = None
    step_id: str | None = None


@dataclass(frozen=True)
class EndSpan:
    span_id: str
    status: str | None = None
    duration_ms: float | None = None
    attributes: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


@dataclass(frozen=True)
class SetGatePolicy:
    step_id: str
    policy: str


@dataclass(frozen=True)
class ChangeRuleSet:
    rule_set: dict[str, Any]


@dataclass(frozen=True)
class CancelRun:
    reason: str | None = None


@dataclass(frozen=True)
class CompleteRun:
    reason: str | None = None


@dataclass(frozen=True)
class FailRun:
    reason: str
    code: str | None = None


@dataclass(frozen=True)
class AppendEvents:
    events: tuple[dict[str, Any], ...] | list[dict[str, Any]]


Command = (
    BeginStep
    | CompleteStep
    | RequestGate
    | ResolveGate
    | WriteArtifact
    | PatchArtifact
    | LogModelIO
    | LogToolCall
    | Annotate
    | RecordError
    | StartSpan
    | EndSpan
    | SetGatePolicy
    | ChangeRuleSet
    | CancelRun
    | CompleteRun
    | FailRun
    | AppendEvents
)


# --------------------------------------------------------------------------- helpers


def _err(code: str, message: str, path: str = "") -> EngineError:
    return EngineError(code, message, path)


def _event(
    state: RunState,
    ctx: Context,
    etype: str,
    *,
    step_id: str | None = None,
    correlation_id: str | None = None,
    ts: str | None = None,
    **fields: Any,
) -> dict[str, Any]:
    event: dict[str, Any] = {"id": ctx.new_id("evt"), "runId": state.run_id, "ts": ts or ctx.now()}
    if step_id is not None:
        event["stepId"] = step_id
    if correlation_id is not None:
        event["correlationId"] = correlation_id
    event["type"] = etype
    for key, value in fields.items():
        if value is not None:
            event[key] = value
    return event


def _require_running(state: RunState, action: str) -> None:
    if state.is_finished:
        raise _err(
            ErrorCode.INVALID_STATE_TRANSITION,
            f'cannot {action}: run "{state.run_id}" is {state.status} (finished runs take no commands)',
        )


def _require_step(state: RunState, step_id: Any, path: str = "stepId") -> str:
    if not isinstance(step_id, str) or step_id not in state.step_status:
        raise _err(
            ErrorCode.UNKNOWN_STEP,
            f"unknown step {step_id!r} (not in workflow {state.run.get('workflowId')!r})",
            path,
        )
    return step_id


def _optional_step(state: RunState, step_id: Any) -> None:
    if step_id is not None:
        _require_step(state, step_id)


def _nonempty_str(value: Any, path: str, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _err(ErrorCode.INVALID_INPUT, f"{what} must be a non-empty string", path)
    return value


def _validate(ctx: Context, type_id: str, data: Any, path: str) -> None:
    try:
        ctx.schemas.validate(type_id, data, path=path)
    except ProtocolError as exc:
        raise EngineError(exc.code, exc.message, exc.path) from None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_usage(usage: Any) -> None:
    if usage is None:
        return
    if not isinstance(usage, dict):
        raise _err(ErrorCode.INVALID_INPUT, "usage must be an object", "usage")
    for key, value in usage.items():
        if key not in USAGE_FIELDS:
            raise _err(ErrorCode.INVALID_INPUT, f"unknown usage field {key!r}", f"usage.{key}")
        if type(value) is not int or value < 0:
            raise _err(ErrorCode.INVALID_INPUT, "token counts are non-negative integers", f"usage.{key}")


def _check_cost(cost: Any) -> None:
    if cost is None:
        return
    if not isinstance(cost, dict) or set(cost) - {"amount", "currency"}:
        raise _err(ErrorCode.INVALID_INPUT, "cost is {amount, currency}", "cost")
    if not _is_number(cost.get("amount")) or cost["amount"] < 0 or cost["amount"] != cost["amount"]:
        raise _err(ErrorCode.INVALID_INPUT, "cost amount must be a number >= 0", "cost.amount")
    _nonempty_str(cost.get("currency"), "cost.currency", "cost currency")


def _check_error_obj(error: Any, path: str) -> dict[str, Any]:
    if not isinstance(error, dict) or not isinstance(error.get("message"), str):
        raise _err(ErrorCode.INVALID_INPUT, "error is {message, code?}", path)
    if error.get("code") is not None and not isinstance(error["code"], str):
        raise _err(ErrorCode.INVALID_INPUT, "error code must be a string", f"{path}.code")
    return {k: error[k] for k in ("message", "code") if error.get(k) is not None}


# --------------------------------------------------------------------------- decide


def decide(state: RunState, command: Command, ctx: Context) -> list[dict[str, Any]]:
    """The events ``command`` produces on ``state``; raises :class:`EngineError` when refused."""
    handler = _DECIDERS.get(type(command))
    if handler is None:
        raise _err(ErrorCode.INVALID_INPUT, f"unknown command {type(command).__name__}")
    return handler(state, command, ctx)


def _begin_step(state: RunState, cmd: BeginStep, ctx: Context) -> list[dict[str, Any]]:
    _require_running(state, f'begin step "{cmd.step_id}"')
    sid = _require_step(state, cmd.step_id)
    blocker = state.start_blocker(sid)
    if blocker is None:
        return [_event(state, ctx, "step_started", step_id=sid)]
    if state.gate_state[sid]["before"] != APPROVED and state.step_status[sid] in ("pending", "failed"):
        gate = "CHECKPOINT" if state.policy(sid) == "CHECKPOINT" else "PAUSE_BEFORE"
        preds_done = all(
            state.step_status.get(p) == "completed" and state.gate_state[p]["after"] == APPROVED
            for p in state.graph.predecessors.get(sid, ())
        )
        held = gate in state.open_gates.get(sid, {}) or state.is_rejected(sid, gate)
        if preds_done and not held:
            # hold the step: ask for its start gate instead of starting
            return [_event(state, ctx, "human_gate_requested", step_id=sid, gate=gate)]
    raise _err(ErrorCode.INVALID_STATE_TRANSITION, f'step "{sid}" cannot start: {blocker}', "stepId")


def _complete_step(state: RunState, cmd: CompleteStep, ctx: Context) -> list[dict[str, Any]]:
    _require_running(state, f'complete step "{cmd.step_id}"')
    sid = _require_step(state, cmd.step_id)
    status = state.step_status[sid]
    # a step may fail before it started (the reference's failStep allows it)
    if status != "running" and not (not cmd.ok and status == "pending"):
        raise _err(
            ErrorCode.INVALID_STATE_TRANSITION,
            f'step "{sid}" cannot complete: it is {status}, not running',
            "stepId",
        )
    if not cmd.ok:
        error = _check_error_obj(cmd.error or {"message": "step failed"}, "error")
        return [
            _event(state, ctx, "step_completed", step_id=sid, ok=False, error=error),
            _event(
                state,
                ctx,
                "error",
                step_id=sid,
                message=error["message"],
                code=error.get("code"),
                fatal=False,
            ),
        ]
    blocker = state.complete_blocker(sid)
    if blocker is not None:
        raise _err(ErrorCode.INVALID_STATE_TRANSITION, f'step "{sid}" cannot complete: {blocker}', "stepId")
    events = []
    if state.policy(sid) in ("PAUSE_AFTER", "CHECKPOINT"):
        events.append(
            _event(
                state, ctx, "human_gate_requested", step_id=sid, gate="PAUSE_AFTER", reason=AFTER_GATE_REASON
            )
        )
    events.append(_event(state, ctx, "step_completed", step_id=sid, ok=True))
    return events


def _check_gate_name(gate: Any) -> str:
    if gate not in GATES:
        raise _err(ErrorCode.INVALID_INPUT, f"gate must be one of {', '.join(GATES)}", "gate")
    return gate


def _request_gate(state: RunState, cmd: RequestGate, ctx: Context) -> list[dict[str, Any]]:
    _require_running(state, f'request a gate on step "{cmd.step_id}"')
    sid = _require_step(state, cmd.step_id)
    gate = _check_gate_name(cmd.gate)
    if cmd.checkpoint is not None:
        if gate != "CHECKPOINT":
            raise _err(ErrorCode.INVALID_INPUT, "only CHECKPOINT gates are named", "checkpoint")
        _nonempty_str(cmd.checkpoint, "checkpoint", "checkpoint name")
    _check_request_transition(state, sid, gate, cmd.checkpoint)
    slot = gate_slot(gate, cmd.checkpoint)
    if slot in state.open_gates.get(sid, {}):
        return []  # already waiting for this very gate
    corr = f"{CHECKPOINT_CORRELATION_PREFIX}{cmd.checkpoint}" if cmd.checkpoint else None
    return [
        _event(
            state, ctx, "human_gate_requested", step_id=sid, correlation_id=corr, gate=gate, reason=cmd.reason
        )
    ]


def _check_request_transition(state: RunState, sid: str, gate: str, checkpoint: str | None) -> None:
    status = state.step_status[sid]
    if gate == "PAUSE_BEFORE" and status in ("running", "completed"):
        raise _err(
            ErrorCode.INVALID_STATE_TRANSITION, f'cannot request PAUSE_BEFORE on step "{sid}": it is {status}'
        )
    if gate == "PAUSE_AFTER" and status not in ("running", "completed"):
        raise _err(
            ErrorCode.INVALID_STATE_TRANSITION,
            f'cannot request PAUSE_AFTER on step "{sid}": it is {status}, not started',
        )
    if gate == "CHECKPOINT" and status == "completed":
        raise _err(
            ErrorCode.INVALID_STATE_TRANSITION,
            f'cannot request a CHECKPOINT on step "{sid}": it has completed',
        )


def _check_resolve_transition(state: RunState, sid: str, gate: str, checkpoint: str | None) -> None:
    status = state.step_status[sid]
    gs = state.gate_state[sid]
    slot = gate_slot(gate, checkpoint)
    requested = slot in state.open_gates.get(sid, {})
    label = f'CHECKPOINT "{checkpoint}"' if checkpoint else gate
    if state.is_rejected(sid, slot) and not requested:
        raise _err(
            ErrorCode.INVALID_STATE_TRANSITION,
            f'{label} of step "{sid}" was rejected: request it again to retry, or fork the run',
        )
    if gate == "PAUSE_AFTER":
        if status != "completed":
            raise _err(
                ErrorCode.INVALID_STATE_TRANSITION,
                f'cannot resolve PAUSE_AFTER of step "{sid}": it is {status}, waiting for the step to complete',
            )
        if gs["after"] == APPROVED and not requested:
            raise _err(ErrorCode.INVALID_STATE_TRANSITION, f'no PAUSE_AFTER gate is waiting on step "{sid}"')
        return
    if gate == "CHECKPOINT" and checkpoint:
        if status == "completed":
            raise _err(
                ErrorCode.INVALID_STATE_TRANSITION, f'cannot resolve {label}: step "{sid}" has completed'
            )
        if gs["checkpoints"].get(checkpoint) == APPROVED and not requested:
            raise _err(ErrorCode.INVALID_STATE_TRANSITION, f'{label} of step "{sid}" is already approved')
        return
    # start gate: PAUSE_BEFORE, or an unnamed CHECKPOINT approval
    if status in ("running", "completed"):
        raise _err(
            ErrorCode.INVALID_STATE_TRANSITION, f'cannot resolve {gate} of step "{sid}": it is {status}'
        )
    if gs["before"] == APPROVED and not requested:
        raise _err(ErrorCode.INVALID_STATE_TRANSITION, f'no {gate} gate is waiting on step "{sid}"')


def _resolve_gate(state: RunState, cmd: ResolveGate, ctx: Context) -> list[dict[str, Any]]:
    _require_running(state, f'resolve a gate on step "{cmd.step_id}"')
    sid = _require_step(state, cmd.step_id)
    gate = _check_gate_name(cmd.gate)
    if cmd.decision not in DECISIONS:
        raise _err(ErrorCode.INVALID_INPUT, f"decision must be one of {', '.join(DECISIONS)}", "decision")
    if cmd.checkpoint is not None:
        if gate != "CHECKPOINT":
            raise _err(ErrorCode.INVALID_INPUT, "only CHECKPOINT gates are named", "checkpoint")
        _nonempty_str(cmd.checkpoint, "checkpoint", "checkpoint name")
    if cmd.edit is not None and cmd.decision != "edited":
        raise _err(ErrorCode.INVALID_INPUT, 'an edit goes with decision "edited"', "edit")
    if cmd.note is not None and not isinstance(cmd.note, str):
        raise _err(ErrorCode.INVALID_INPUT, "note must be a string", "note")
    _check_resolve_transition(state, sid, gate, cmd.checkpoint)
    events: list[dict[str, Any]] = []
    if cmd.edit is not None:
        edit = cmd.edit
        if edit.step_id is None:
            edit = type(edit)(**{**edit.__dict__, "step_id": sid})
        events.extend(
            _write_artifact(state, edit, ctx)
            if isinstance(edit, WriteArtifact)
            else _patch_artifact(state, edit, ctx)
        )
    # A named checkpoint travels in ``note`` (the reference's convention); a note given alongside
    # it is kept as an annotation so that it is not lost. A reviewer's note on the step's own
    # CHECKPOINT gate stays in ``note`` only when the fold will read it as a note (see
    # ``checkpoint_name``); otherwise it too becomes an annotation, so that approving with a note
    # can never resolve a checkpoint nobody asked for.
    note = cmd.checkpoint if cmd.checkpoint else cmd.note
    side_note = cmd.note if cmd.checkpoint else None
    if gate == "CHECKPOINT" and note:
        probe = {"type": "human_gate_resolved", "stepId": sid, "gate": gate, "note": note}
        read_as = checkpoint_name(state, probe)
        if cmd.checkpoint and read_as != cmd.checkpoint:
            raise _err(
                ErrorCode.INVALID_STATE_TRANSITION,
                f'CHECKPOINT "{cmd.checkpoint}" of step "{sid}" was not requested while the step\'s own '
                "CHECKPOINT gate waits: resolve that gate, or request the checkpoint first",
                "checkpoint",
            )
        if not cmd.checkpoint and read_as is not None:
            note, side_note = None, cmd.note
    corr = f"{CHECKPOINT_CORRELATION_PREFIX}{cmd.checkpoint}" if cmd.checkpoint else None
    events.append(
        _event(
            state,
            ctx,
            "human_gate_resolved",
            step_id=sid,
            correlation_id=corr,
            gate=gate,
            decision=cmd.decision,
            note=note,
        )
    )
    if side_note:
        tags = ["gate-note", f"checkpoint:{cmd.checkpoint}"] if cmd.checkpoint else ["gate-note", gate]
        events.append(
            _event(state, ctx, "annotation", step_id=sid, correlation_id=corr, text=side_note, tags=tags)
        )
    return events


def _write_artifact(state: RunState, cmd: WriteArtifact, ctx: Context) -> list[dict[str, Any]]:
    _require_running(state, f'write artifact "{cmd.key}"')
    key = _nonempty_str(cmd.key, "artifactKey", "artifactKey")
    type_id = _nonempty_str(cmd.type_id, "typeId", "typeId")
    _optional_step(state, cmd.step_id)
    pointer = cmd.pointer
    has_data = not (cmd.data is None and pointer is not None)
    if pointer is not None:
        problem = pointer_problem(pointer, cmd.data, has_data)
        if problem:
            raise _err(ErrorCode.INVALID_INPUT, problem[1], problem[0])
    try:
        digest = write_digest(key, type_id, cmd.data if has_data else None, pointer)
    except ProtocolError as exc:
        raise _err(exc.code, exc.message, "data") from None
    if cmd.idempotency_key is not None:
        ikey = _nonempty_str(cmd.idempotency_key, "idempotencyKey", "idempotencyKey")
        if _idempotent_hit(state, ikey, key, digest):
            return []
    prev = state.artifacts.get(key)
    if cmd.expected_version is not None:
        current = prev["version"] if prev else 0
        if type(cmd.expected_version) is not int or cmd.expected_version != current:
            raise _err(
                ErrorCode.PATCH_FAILED,
                f'artifact "{key}" is at version {current}; the write was based on version {cmd.expected_version}',
                "expectedVersion",
            )
    if has_data:
        _validate(ctx, type_id, cmd.data, "data")
    ts = ctx.now()
    artifact: dict[str, Any] = {
        "artifactKey": key,
        "typeId": type_id,
        "version": (prev["version"] if prev else 0) + 1,
        "createdAt": ts,
    }
    if has_data:
        artifact["data"] = cmd.data
    if pointer is not None:
        artifact["pointer"] = pointer
    return [
        _event(
            state,
            ctx,
            "artifact_written",
            step_id=cmd.step_id,
            ts=ts,
            artifact=artifact,
            idempotencyKey=cmd.idempotency_key,
        )
    ]


def _idempotent_hit(state: RunState, ikey: str, key: str, digest: str) -> bool:
    """True when ``ikey`` already produced exactly this content; conflict when it produced other content."""
    prev = state.idempotency.get(ikey)
    if prev is None:
        return False
    if prev["artifactKey"] != key:
        raise _err(
            ErrorCode.IDEMPOTENCY_CONFLICT,
            f'idempotency key "{ikey}" was already used for artifact "{prev["artifactKey"]}"',
            "idempotencyKey",
        )
    if state.idempotency_digests.get(ikey) != digest:
        raise _err(
            ErrorCode.IDEMPOTENCY_CONFLICT,
            f'idempotency key "{ikey}" already produced version {prev["version"]} of "{key}" with different content',
            "idempotencyKey",
        )
    return True


def _patch_artifact(state: RunState, cmd: PatchArtifact, ctx: Context) -> list[dict[str, Any]]:
    _require_running(state, f'patch artifact "{cmd.key}"')
    key = _nonempty_str(cmd.key, "artifactKey", "artifactKey")
    _optional_step(state, cmd.step_id)
    try:
        check_patch(cmd.patch)
        digest = patch_digest(key, cmd.from_version, cmd.patch)
    except ProtocolError as exc:
        raise EngineError(exc.code, exc.message, exc.path) from None
    if cmd.idempotency_key is not None:
        ikey = _nonempty_str(cmd.idempotency_key, "idempotencyKey", "idempotencyKey")
        if _idempotent_hit(state, ikey, key, digest):
            return []
    prev = state.artifacts.get(key)
    if prev is None:
        raise _err(ErrorCode.UNKNOWN_ARTIFACT, f'unknown artifact "{key}"', "artifactKey")
    if type(cmd.from_version) is not int or cmd.from_version != prev["version"]:
        raise _err(
            ErrorCode.PATCH_FAILED,
            f'artifact "{key}" is at version {prev["version"]}; the patch was made against version {cmd.from_version}',
            "fromVersion",
        )
    ts = ctx.now()
    try:
        artifact = patched_version(prev, to_version=prev["version"] + 1, created_at=ts, patch=cmd.patch)
    except ProtocolError as exc:
        raise EngineError(exc.code, f'patching "{key}" failed: {exc.message}', exc.path) from None
    _validate(ctx, prev["typeId"], artifact["data"], "data")
    return [
        _event(
            state,
            ctx,
            "artifact_patch",
            step_id=cmd.step_id,
            ts=ts,
            artifactKey=key,
            fromVersion=prev["version"],
            toVersion=prev["version"] + 1,
            patch=cmd.patch,
            idempotencyKey=cmd.idempotency_key,
        )
    ]


def _log_model_io(state: RunState, cmd: LogModelIO, ctx: Context) -> list[dict[str, Any]]:
    _require_running(state, "log model I/O")
    if cmd.direction not in ("request", "response", "stream_chunk"):
        raise _err(
            ErrorCode.INVALID_INPUT, "direction must be request, response or stream_chunk", "direction"
        )
    _optional_step(state, cmd.step_id)
    _check_usage(cmd.usage)
    _check_cost(cmd.cost)
    if cmd.duration_ms is not None and (not _is_number(cmd.duration_ms) or cmd.duration_ms < 0):
        raise _err(ErrorCode.INVALID_INPUT, "durationMs must be a number >= 0", "durationMs")
    return [
        _event(
            state,
            ctx,
            "model_io",
            step_id=cmd.step_id,
            correlation_id=cmd.correlation_id,
            direction=cmd.direction,
            provider=cmd.provider,
            model=cmd.model,
            usage=cmd.usage,
            cost=cmd.cost,
            durationMs=cmd.duration_ms,
            summary=cmd.summary,
            payload=cmd.payload,
        )
    ]


def _log_tool_call(state: RunState, cmd: LogToolCall, ctx: Context) -> list[dict[str, Any]]:
    _require_running(state, "log a tool call")
    name = _nonempty_str(cmd.name, "name", "tool name")
    _optional_step(state, cmd.step_id)
    return [
        _event(
            state,
            ctx,
            "tool_call",
            step_id=cmd.step_id,
            correlation_id=cmd.correlation_id,
            name=name,
            args=cmd.args,
            result=cmd.result,
        )
    ]


def _annotate(state: RunState, cmd: Annotate, ctx: Context) -> list[dict[str, Any]]:
    _require_running(state, "annotate")
    if not isinstance(cmd.text, str):
        raise _err(ErrorCode.INVALID_INPUT, "annotation text must be a string", "text")
    tags = list(cmd.tags) if cmd.tags is not None else None
    if tags is not None and not all(isinstance(t, str) for t in tags):
        raise _err(ErrorCode.INVALID_INPUT, "tags must be strings", "tags")
    _optional_step(state, cmd.step_id)
    return [_event(state, ctx, "annotation", step_id=cmd.step_id, text=cmd.text, tags=tags)]


def _fail_running_steps(state: RunState, ctx: Context, error: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        _event(state, ctx, "step_completed", step_id=sid, ok=False, error=error)
        for sid, status in state.step_status.items()
        if status == "running"
    ]


def _record_error(state: RunState, cmd: RecordError, ctx: Context) -> list[dict[str, Any]]:
    _require_running(state, "record an error")
    message = _nonempty_str(cmd.message, "message", "error message")
    if cmd.code is not None and not isinstance(cmd.code, str):
        raise _err(ErrorCode.INVALID_INPUT, "error code must be a string", "code")
    _optional_step(state, cmd.step_id)
    error_event = _event(
        state, ctx, "error", step_id=cmd.step_id, message=message, code=cmd.code, fatal=bool(cmd.fatal)
    )
    if not cmd.fatal:
        return [error_event]
    error = {"message": message, **({"code": cmd.code} if cmd.code else {})}
    return [
        error_event,
        *_fail_running_steps(state, ctx, error),
        _event(state, ctx, "run_status_changed", status="failed", reason=message),
    ]


def _start_span(state: RunState, cmd: StartSpan, ctx: Context) -> list[dict[str, Any]]:
    _require_running(state, "start a span")
    name = _nonempty_str(cmd.name, "name", "span name")
    span_id = cmd.span_id if cmd.span_id is not None else ctx.new_id("span")
    _nonempty_str(span_id, "spanId", "spanId")
    if span_id in state.open_spans:
        raise _err(ErrorCode.INVALID_STATE_TRANSITION, f'span "{span_id}" is already open', "spanId")
    if cmd.parent_span_id is not None and cmd.parent_span_id not in state.open_spans:
        raise _err(
            ErrorCode.INVALID_STATE_TRANSITION,
            f'parent span "{cmd.parent_span_id}" is not open',
            "parentSpanId",
        )
    if cmd.kind is not None and cmd.kind not in ("internal", "client", "server", "producer", "consumer"):
        raise _err(
            ErrorCode.INVALID_INPUT, "kind must be internal, client, server, producer or consumer", "kind"
        )
    if cmd.attributes is not None and not isinstance(cmd.attributes, dict):
        raise _err(ErrorCode.INVALID_INPUT, "attributes must be an object", "attributes")
    _optional_step(state, cmd.step_id)
    return [
        _event(
            state,
            ctx,
            "span_started",
            step_id=cmd.step_id,
            spanId=span_id,
            parentSpanId=cmd.parent_span_id,
            name=name,
            kind=cmd.kind,
            attributes=cmd.attributes,
        )
    ]


def _end_span(state: RunState, cmd: EndSpan, ctx: Context) -> list[dict[str, Any]]:
    _require_running(state, "end a span")
    span = state.open_spans.get(cmd.span_id)
    if span is None:
        raise _err(ErrorCode.INVALID_STATE_TRANSITION, f'span "{cmd.span_id}" is not open', "spanId")
    if cmd.status is not None and cmd.status not in ("ok", "error"):
        raise _err(ErrorCode.INVALID_INPUT, "status must be ok or error", "status")
    if cmd.duration_ms is not None and (not _is_number(cmd.duration_ms) or cmd.duration_ms < 0):
        raise _err(ErrorCode.INVALID_INPUT, "durationMs must be a number >= 0", "durationMs")
    if cmd.attributes is not None and not isinstance(cmd.attributes, dict):
        raise _err(ErrorCode.INVALID_INPUT, "attributes must be an object", "attributes")
    error = _check_error_obj(cmd.error, "error") if cmd.error is not None else None
    return [
        _event(
            state,
            ctx,
            "span_ended",
            step_id=span.get("stepId"),
            spanId=cmd.span_id,
            status=cmd.status,
            durationMs=cmd.duration_ms,
            attributes=cmd.attributes,
            error=error,
        )
    ]


def _set_gate_policy(state: RunState, cmd: SetGatePolicy, ctx: Context) -> list[dict[str, Any]]:
    _require_running(state, f'change the gate policy of step "{cmd.step_id}"')
    sid = _require_step(state, cmd.step_id)
    if cmd.policy not in GATE_POLICIES:
        raise _err(ErrorCode.INVALID_INPUT, f"policy must be one of {', '.join(GATE_POLICIES)}", "policy")
    if state.policy(sid) == cmd.policy:
        return []
    return [_event(state, ctx, "policy_changed", step_id=sid, policy=cmd.policy)]


def check_rule_set(rule_set: Any, schemas: SchemaRegistry, path: str = "ruleSet") -> dict[str, Any]:
    """Validate a RuleSet and each rule payload against its ``ruleSchemaId``."""
    if not isinstance(rule_set, dict):
        raise _err(ErrorCode.INVALID_INPUT, "a rule set is an object", path)
    _nonempty_str(rule_set.get("id"), f"{path}.id", "rule set id")
    schema_id = _nonempty_str(rule_set.get("ruleSchemaId"), f"{path}.ruleSchemaId", "ruleSchemaId")
    rules = rule_set.get("rules")
    if not isinstance(rules, list):
        raise _err(ErrorCode.INVALID_INPUT, "rules must be a list", f"{path}.rules")
    seen: set[str] = set()
    for i, rule in enumerate(rules):
        where = f"{path}.rules[{i}]"
        if not isinstance(rule, dict):
            raise _err(ErrorCode.INVALID_INPUT, "a rule is an object", where)
        rid = _nonempty_str(rule.get("id"), f"{where}.id", "rule id")
        if rid in seen:
            raise _err(ErrorCode.INVALID_INPUT, f'duplicate rule id "{rid}"', f"{where}.id")
        seen.add(rid)
        if type(rule.get("priority")) is not int:
            raise _err(ErrorCode.INVALID_INPUT, "priority must be an integer", f"{where}.priority")
        if type(rule.get("enabled")) is not bool:
            raise _err(ErrorCode.INVALID_INPUT, "enabled must be a boolean", f"{where}.enabled")
        if "label" in rule and not isinstance(rule["label"], str):
            raise _err(ErrorCode.INVALID_INPUT, "label must be a string", f"{where}.label")
        if "payload" not in rule:
            raise _err(ErrorCode.INVALID_INPUT, "a rule needs a payload", f"{where}.payload")
        try:
            schemas.validate(schema_id, rule["payload"], path=f"{where}.payload")
        except ProtocolError as exc:
            raise EngineError(exc.code, exc.message, exc.path) from None
    return rule_set


def _change_rule_set(state: RunState, cmd: ChangeRuleSet, ctx: Context) -> list[dict[str, Any]]:
    _require_running(state, "change a rule set")
    rule_set = check_rule_set(cmd.rule_set, ctx.schemas)
    return [_event(state, ctx, "rule_changed", ruleSetId=rule_set["id"], snapshot=rule_set)]


def _cancel_run(state: RunState, cmd: CancelRun, ctx: Context) -> list[dict[str, Any]]:
    _require_running(state, "cancel the run")
    error = {"message": cmd.reason or "run cancelled", "code": "CANCELLED"}
    return [
        *_fail_running_steps(state, ctx, error),
        _event(state, ctx, "run_status_changed", status="cancelled", reason=cmd.reason),
    ]


def _complete_run(state: RunState, cmd: CompleteRun, ctx: Context) -> list[dict[str, Any]]:
    _require_running(state, "complete the run")
    running = [sid for sid, st in state.step_status.items() if st == "running"]
    if running:
        raise _err(
            ErrorCode.INVALID_STATE_TRANSITION,
            "cannot complete the run: waiting for running step(s) " + ", ".join(f'"{s}"' for s in running),
        )
    return [_event(state, ctx, "run_status_changed", status="completed", reason=cmd.reason)]


def _fail_run(state: RunState, cmd: FailRun, ctx: Context) -> list[dict[str, Any]]:
    _require_running(state, "fail the run")
    message = _nonempty_str(cmd.reason, "reason", "failure reason")
    error = {"message": message, **({"code": cmd.code} if cmd.code else {})}
    ts = ctx.now()
    return [
        *_fail_running_steps(state, ctx, error),
        _event(state, ctx, "run_status_changed", ts=ts, status="failed", reason=message),
        _event(state, ctx, "error", ts=ts, message=message, code=cmd.code, fatal=True),
    ]


# --------------------------------------------------------------------------- external events

EVENT_TYPES = frozenset(PROTOCOL_EVENT_TYPES)


def _append_events(state: RunState, cmd: AppendEvents, ctx: Context) -> list[dict[str, Any]]:
    """Check externally supplied events one by one against the state they would meet."""
    events = list(cmd.events)
    append_in_place(state.clone(), events, ctx)
    return events


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
        if not isinstance(event, dict):
            raise _err(ErrorCode.INVALID_TRACE_EVENT, "an event is an object")
        for key in ("id", "runId", "ts"):
            if not isinstance(event.get(key), str) or not event[key]:
                raise _err(ErrorCode.INVALID_TRACE_EVENT, f"{key} must be a non-empty string", key)
    if event["runId"] != state.run_id:
        raise _err(
            ErrorCode.INVALID_TRACE_EVENT,
            f'event belongs to run "{event["runId"]}", not "{state.run_id}"',
            "runId",
        )
    etype = event.get("type")
    if etype not in EVENT_TYPES:
        raise _err(ErrorCode.INVALID_TRACE_EVENT, f"unknown event type {etype!r}", "type")
    _require_running(state, f"append {etype}")
    if "stepId" in event:
        _require_step(state, event["stepId"])
    sid = event.get("stepId")
    if (
        etype
        in ("step_started", "step_completed", "human_gate_requested", "human_gate_resolved", "policy_changed")
        and sid is None
    ):
        raise _err(ErrorCode.INVALID_TRACE_EVENT, f"{etype} needs a stepId", "stepId")
    if etype == "step_started":
        blocker = state.start_blocker(sid)
        if blocker is not None:
            raise _err(ErrorCode.INVALID_STATE_TRANSITION, f'step "{sid}" cannot start: {blocker}', "stepId")
    elif etype == "step_completed":
        if type(event.get("ok")) is not bool:
            raise _err(ErrorCode.INVALID_TRACE_EVENT, "ok must be a boolean", "ok")
        if state.step_status[sid] != "running" and not (
            event["ok"] is False and state.step_status[sid] == "pending"
        ):
            raise _err(
                ErrorCode.INVALID_STATE_TRANSITION,
                f'step "{sid}" cannot complete: it is {state.step_status[sid]}, not running',
                "stepId",
            )
        if event["ok"]:
            blocker = state.complete_blocker(sid)
            if blocker is not None:
                raise _err(
                    ErrorCode.INVALID_STATE_TRANSITION, f'step "{sid}" cannot complete: {blocker}', "stepId"
                )
        elif event.get("error") is not None:
            _check_error_obj(event["error"], "error")
    elif etype in ("human_gate_requested", "human_gate_resolved"):
        gate = _check_gate_name(event.get("gate"))
        name = checkpoint_name(state, event)
        if etype == "human_gate_requested":
            _check_request_transition(state, sid, gate, name)
        else:
            if event.get("decision") not in DECISIONS:
                raise _err(
                    ErrorCode.INVALID_INPUT, f"decision must be one of {', '.join(DECISIONS)}", "decision"
                )
            _check_resolve_transition(state, sid, gate, name)
    elif etype == "artifact_written":
        _check_written_event(state, event, ctx)
    elif etype == "artifact_patch":
        _check_patch_event(state, event, ctx)
    elif etype == "model_io":
        if shape_checked:
            return
        if event.get("direction") not in ("request", "response", "stream_chunk"):
            raise _err(
                ErrorCode.INVALID_INPUT, "direction must be request, response or stream_chunk", "direction"
            )
        _check_usage(event.get("usage"))
        _check_cost(event.get("cost"))
    elif etype == "tool_call":
        _nonempty_str(event.get("name"), "name", "tool name")
    elif etype == "rule_changed":
        rule_set = check_rule_set(event.get("snapshot"), ctx.schemas, "snapshot")
        if event.get("ruleSetId") != rule_set["id"]:
            raise _err(ErrorCode.INVALID_INPUT, "ruleSetId must equal snapshot.id", "ruleSetId")
    elif etype == "policy_changed":
        if event.get("policy") not in GATE_POLICIES:
            raise _err(ErrorCode.INVALID_INPUT, f"policy must be one of {', '.join(GATE_POLICIES)}", "policy")
    elif etype == "error":
        _nonempty_str(event.get("message"), "message", "error message")
    elif etype == "run_forked":
        _nonempty_str(event.get("parentRunId"), "parentRunId", "parentRunId")
        parents = event.get("parentRunIds")
        if parents is not None and (
            not isinstance(parents, list) or not parents or parents[0] != event["parentRunId"]
        ):
            raise _err(
                ErrorCode.INVALID_INPUT,
                "parentRunIds must be a non-empty list starting with parentRunId",
                "parentRunIds",
            )
    elif etype == "annotation":
        if not isinstance(event.get("text"), str):
            raise _err(ErrorCode.INVALID_INPUT, "annotation text must be a string", "text")
    elif etype == "run_status_changed":
        status = event.get("status")
        if status not in TERMINAL_STATUSES:
            raise _err(
                ErrorCode.INVALID_STATE_TRANSITION,
                f"a running run can only move to {', '.join(sorted(TERMINAL_STATUSES))}",
                "status",
            )
        running = [s for s, st in state.step_status.items() if st == "running"]
        if running:
            raise _err(
                ErrorCode.INVALID_STATE_TRANSITION,
                f"cannot mark the run {status}: waiting for running step(s) "
                + ", ".join(f'"{s}"' for s in running),
                "status",
            )
    elif etype == "span_started":
        span_id = _nonempty_str(event.get("spanId"), "spanId", "spanId")
        _nonempty_str(event.get("name"), "name", "span name")
        if span_id in state.open_spans:
            raise _err(ErrorCode.INVALID_STATE_TRANSITION, f'span "{span_id}" is already open', "spanId")
    elif etype == "span_ended":
        if event.get("spanId") not in state.open_spans:
            raise _err(
                ErrorCode.INVALID_STATE_TRANSITION, f'span "{event.get("spanId")}" is not open', "spanId"
            )


def _check_written_event(state: RunState, event: dict[str, Any], ctx: Context) -> None:
    artifact = event.get("artifact")
    if not isinstance(artifact, dict):
        raise _err(ErrorCode.INVALID_TRACE_EVENT, "artifact_written needs an artifact", "artifact")
    key = _nonempty_str(artifact.get("artifactKey"), "artifact.artifactKey", "artifactKey")
    type_id = _nonempty_str(artifact.get("typeId"), "artifact.typeId", "typeId")
    prev = state.artifacts.get(key)
    expected = (prev["version"] if prev else 0) + 1
    if artifact.get("version") != expected:
        raise _err(
            ErrorCode.INVALID_STATE_TRANSITION,
            f'artifact "{key}" is at version {expected - 1}; a write must create version {expected}',
            "artifact.version",
        )
    has_data = "data" in artifact
    if "pointer" in artifact:
        problem = pointer_problem(artifact["pointer"], artifact.get("data"), has_data)
        if problem:
            raise _err(ErrorCode.INVALID_INPUT, problem[1], f"artifact.{problem[0]}")
    ikey = event.get("idempotencyKey")
    if ikey is not None and ikey in state.idempotency:
        raise _err(
            ErrorCode.IDEMPOTENCY_CONFLICT, f'idempotency key "{ikey}" was already used', "idempotencyKey"
        )
    if has_data:
        _validate(ctx, type_id, artifact["data"], "artifact.data")


def _check_patch_event(state: RunState, event: dict[str, Any], ctx: Context) -> None:
    key = event.get("artifactKey")
    prev = state.artifacts.get(key)  # type: ignore[arg-type]
    if prev is None:
        raise _err(ErrorCode.UNKNOWN_ARTIFACT, f"unknown artifact {key!r}", "artifactKey")
    if event.get("fromVersion") != prev["version"] or event.get("toVersion") != prev["version"] + 1:
        raise _err(
            ErrorCode.PATCH_FAILED,
            f'artifact "{key}" is at version {prev["version"]}; a patch must go from it to {prev["version"] + 1}',
            "fromVersion",
        )
    ikey = event.get("idempotencyKey")
    if ikey is not None and ikey in state.idempotency:
        raise _err(
            ErrorCode.IDEMPOTENCY_CONFLICT, f'idempotency key "{ikey}" was already used', "idempotencyKey"
        )
    try:
        artifact = patched_version(
            prev, to_version=prev["version"] + 1, created_at=event["ts"], patch=event.get("patch")
        )
    except ProtocolError as exc:
        raise EngineError(exc.code, exc.message, exc.path) from None
    _validate(ctx, prev["typeId"], artifact["data"], "data")


_DECIDERS: dict[type, Callable[[RunState, Any, Context], list[dict[str, Any]]]] = {
    BeginStep: _begin_step,
    CompleteStep: _complete_step,
    RequestGate: _request_gate,
    ResolveGate: _resolve_gate,
    WriteArtifact: _write_artifact,
    PatchArtifact: _patch_artifact,
    LogModelIO: _log_model_io,
    LogToolCall: _log_tool_call,
    Annotate: _annotate,
    RecordError: _record_error,
    StartSpan: _start_span,
    EndSpan: _end_span,
    SetGatePolicy: _set_gate_policy,
    ChangeRuleSet: _change_rule_set,
    CancelRun: _cancel_run,
    CompleteRun: _complete_run,
    FailRun: _fail_run,
    AppendEvents: _append_events,
}


# --------------------------------------------------------------------------- runs and forks


def _check_subject(subject: Any) -> dict[str, str]:
    if not isinstance(subject, dict):
        raise _err(ErrorCode.INVALID_INPUT, "subject must be an object", "subject")
    for key, value in subject.items():
        if key not in ("userId", "tenantId", "accountId", "planId"):
            raise _err(ErrorCode.INVALID_INPUT, f"unknown subject field {key!r}", f"subject.{key}")
        _nonempty_str(value, f"subject.{key}", key)
    return subject


def _check_context(context: Any) -> dict[str, Any]:
    if not isinstance(context, dict):
        raise _err(ErrorCode.INVALID_INPUT, "context must be an object", "context")
    parent = context.get("parentRunId")
    parents = context.get("parentRunIds")
    if parent is None and parents is None:
        raise _err(ErrorCode.INVALID_INPUT, "context needs parentRunId or parentRunIds", "context")
    if parent is not None:
        _nonempty_str(parent, "context.parentRunId", "parentRunId")
    if parents is not None:
        if not isinstance(parents, list) or not parents or not all(isinstance(p, str) and p for p in parents):
            raise _err(
                ErrorCode.INVALID_INPUT,
                "parentRunIds must be a non-empty list of run ids",
                "context.parentRunIds",
            )
        if parent is not None and parents[0] != parent:
            raise _err(
                ErrorCode.INVALID_INPUT, "parentRunIds[0] must equal parentRunId", "context.parentRunIds"
            )
    return context


# A run's title (what tells it apart in lists): set by the pipeline, kept in the protocol's free-form
# `run.metadata` under this key, since the protocol's RunInstance has no title field and `subject`
# is strictly {userId, tenantId, accountId, planId}. Bundles carry it unchanged.
TITLE_KEY = "workbench.title"
TITLE_MAX = 300


def check_title(title: Any, path: str = "title") -> str:
    """A run title: a string of 1..300 characters once trimmed, no control characters."""
    if not isinstance(title, str) or not title.strip():
        raise _err(ErrorCode.INVALID_INPUT, "title must be a non-empty string", path)
    title = title.strip()
    if len(title) > TITLE_MAX:
        raise _err(ErrorCode.INVALID_INPUT, f"title must be at most {TITLE_MAX} characters", path)
    if any(ord(ch) < 32 or 127 <= ord(ch) < 160 for ch in title):
        raise _err(ErrorCode.INVALID_INPUT, "title must not contain control characters", path)
    return title


def run_title(run: dict[str, Any]) -> str:
    """What a run is called: its own title (metadata) when valid, else its workflow's title or id.
    Lenient (a bundle from elsewhere may carry anything under the key): never raises."""
    metadata = run.get("metadata")
    own = metadata.get(TITLE_KEY) if isinstance(metadata, dict) else None
    try:
        return check_title(own)
    except EngineError:
        pass
    snapshot = run.get("workflowSnapshot") if isinstance(run.get("workflowSnapshot"), dict) else {}
    return str(snapshot.get("title") or run.get("workflowId") or "")[:TITLE_MAX]


def with_title(run: dict[str, Any], title: str) -> dict[str, Any]:
    """A copy of the run document whose metadata names ``title`` (checked)."""
    metadata = dict(run["metadata"]) if isinstance(run.get("metadata"), dict) else {}
    metadata[TITLE_KEY] = check_title(title)
    return {**run, "metadata": metadata}


def new_run(
    *,
    ctx: Context,
    workflow: dict[str, Any],
    run_id: str | None = None,
    subject: dict[str, str] | None = None,
    metadata: dict[str, Any] | None = None,
    tags: list[str] | None = None,
    context: dict[str, Any] | None = None,
    title: str | None = None,
) -> RunState:
    """The initial state of a new run of ``workflow`` (``INVALID_WORKFLOW`` when malformed).
    ``title`` (or ``metadata["workbench.title"]``) names the run; it is checked either way."""
    spec = normalize_workflow(workflow)
    run: dict[str, Any] = {
        "id": run_id if run_id is not None else ctx.new_id("run"),
        "workflowId": spec["id"],
        "workflowVersion": spec["version"],
        "workflowSnapshot": spec,
        "startedAt": ctx.now(),
        "status": "running",
    }
    _nonempty_str(run["id"], "runId", "run id")
    if context is not None:
        run["context"] = _check_context(context)
    if subject is not None:
        run["subject"] = _check_subject(subject)
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise _err(ErrorCode.INVALID_INPUT, "metadata must be a JSON object", "metadata")
        run["metadata"] = metadata
        if TITLE_KEY in metadata:
            run = with_title(run, check_title(metadata[TITLE_KEY], f"metadata.{TITLE_KEY}"))
    if title is not None:
        run = with_title(run, title)
    if tags is not None:
        if not isinstance(tags, list | tuple) or not all(isinstance(t, str) for t in tags):
            raise _err(ErrorCode.INVALID_INPUT, "tags must be a list of strings", "tags")
        run["tags"] = list(tags)
    return RunState.initial(run)


def fork_run(
    parent: RunState,
    *,
    ctx: Context,
    new_run_id: str | None = None,
    from_seq: int | None = None,
    from_step_id: str | None = None,
    extra_parents: tuple[str, ...] | list[str] = (),
) -> tuple[RunState, list[dict[str, Any]]]:
    """Branch a new run off ``parent`` (the parent's state at the fork point).

    The child gets the parent's workflow snapshot, subject, metadata and tags (plus
    ``fork``), ``context`` with the parent ids and ``forkedFromStepId``. Returned events
    (to apply to the returned initial state) write the parent's latest artifacts as
    version 1, re-emit its rule sets and gate policy overrides, and end with
    ``run_forked``, like the reference's fork helpers. ``from_seq``, when given, must be
    the revision ``parent`` was folded to; it is recorded as ``metadata.forkedFromSeq``.
    """
    if from_seq is not None:
        if type(from_seq) is not int or from_seq < 0 or from_seq != parent.revision:
            raise _err(
                ErrorCode.INVALID_INPUT,
                f"fork from seq {from_seq}: the parent state given is at seq {parent.revision} (fold it to {from_seq} first)",
                "fromSeq",
            )
    if from_step_id is not None:
        _require_step(parent, from_step_id, "fromStepId")
    extras = [p for p in extra_parents if p != parent.run_id]
    for p in extras:
        _nonempty_str(p, "extraParents", "parent run id")
    prun = parent.run
    context: dict[str, Any] = {
        "parentRunId": prun["id"],
        "parentRunIds": [prun["id"], *dict.fromkeys(extras)],
    }
    if from_step_id is not None:
        context["forkedFromStepId"] = from_step_id
    metadata = dict(prun["metadata"]) if isinstance(prun.get("metadata"), dict) else None
    if from_seq is not None:
        metadata = {**(metadata or {}), "forkedFromSeq": from_seq}
    tags = list(dict.fromkeys([*(prun.get("tags") or []), "fork"]))
    child = new_run(
        ctx=ctx,
        workflow=prun["workflowSnapshot"],
        run_id=new_run_id,
        subject=prun.get("subject"),
        metadata=metadata,
        tags=tags,
        context=context,
    )
    ts = child.run["startedAt"]
    events: list[dict[str, Any]] = []
    for art in parent.artifacts.values():
        artifact = {"artifactKey": art["artifactKey"], "typeId": art["typeId"], "version": 1, "createdAt": ts}
        if "data" in art:
            artifact["data"] = art["data"]
        if "pointer" in art:
            artifact["pointer"] = art["pointer"]
        events.append(_event(child, ctx, "artifact_written", ts=ts, artifact=artifact))
    for rid, rule_set in parent.rule_sets.items():
        events.append(_event(child, ctx, "rule_changed", ts=ts, ruleSetId=rid, snapshot=rule_set))
    for sid, policy in parent.policies.items():
        if policy != child.policy(sid):
            events.append(_event(child, ctx, "policy_changed", ts=ts, step_id=sid, policy=policy))
    events.append(
        _event(
            child,
            ctx,
            "run_forked",
            parentRunId=prun["id"],
            parentRunIds=context["parentRunIds"] if extras else None,
            forkedFromStepId=from_step_id,
        )
    )
    return child, events
