"""``decide``: state + command -> new protocol events, or an :class:`EngineError`.

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

from collections.abc import Callable
from typing import Any

from runs.engine.artifacts import patch_digest, patched_version, pointer_problem, write_digest
from runs.engine.check import (
    DECISIONS,
    append_in_place,
    check_gate_name,
    check_request_transition,
    check_resolve_transition,
    check_rule_set,
)
from runs.engine.commands import (
    Annotate,
    AppendEvents,
    BeginStep,
    CancelRun,
    ChangeRuleSet,
    Command,
    CompleteRun,
    CompleteStep,
    Context,
    EndSpan,
    FailRun,
    LogModelIO,
    LogToolCall,
    PatchArtifact,
    RecordError,
    RequestGate,
    ResolveGate,
    SetGatePolicy,
    StartSpan,
    WriteArtifact,
)
from runs.engine.errors import EngineError, ErrorCode
from runs.engine.fold import CHECKPOINT_CORRELATION_PREFIX, checkpoint_name
from runs.engine.guards import (
    check_cost,
    check_error_obj,
    check_usage,
    engine_error,
    is_number,
    make_event,
    nonempty_str,
    optional_step,
    require_no_pending_gate,
    require_running,
    require_step,
    validate_data,
)
from runs.engine.state import APPROVED, RunState, gate_slot
from runs.engine.workflow import GATE_POLICIES
from runs.protocol.errors import ProtocolError
from runs.protocol.patch import check_patch

AFTER_GATE_REASON = "Review outputs before downstream steps proceed"


def decide(state: RunState, command: Command, ctx: Context) -> list[dict[str, Any]]:
    """The events ``command`` produces on ``state``; raises :class:`EngineError` when refused."""
    handler = _DECIDERS.get(type(command))
    if handler is None:
        raise engine_error(ErrorCode.INVALID_INPUT, f"unknown command {type(command).__name__}")
    return handler(state, command, ctx)


def _begin_step(state: RunState, cmd: BeginStep, ctx: Context) -> list[dict[str, Any]]:
    require_running(state, f'begin step "{cmd.step_id}"')
    sid = require_step(state, cmd.step_id)
    blocker = state.start_blocker(sid)
    if blocker is None:
        return [make_event(state, ctx, "step_started", step_id=sid)]
    if state.gate_state[sid]["before"] != APPROVED and state.step_status[sid] in ("pending", "failed"):
        gate = "CHECKPOINT" if state.policy(sid) == "CHECKPOINT" else "PAUSE_BEFORE"
        preds_done = all(
            state.step_status.get(p) == "completed" and state.gate_state[p]["after"] == APPROVED
            for p in state.graph.predecessors.get(sid, ())
        )
        held = gate in state.open_gates.get(sid, {}) or state.is_rejected(sid, gate)
        if preds_done and not held:
            # hold the step: ask for its start gate instead of starting
            return [make_event(state, ctx, "human_gate_requested", step_id=sid, gate=gate)]
    raise engine_error(ErrorCode.INVALID_STATE_TRANSITION, f'step "{sid}" cannot start: {blocker}', "stepId")


def _complete_step(state: RunState, cmd: CompleteStep, ctx: Context) -> list[dict[str, Any]]:
    require_running(state, f'complete step "{cmd.step_id}"')
    sid = require_step(state, cmd.step_id)
    status = state.step_status[sid]
    # a step may fail before it started (the reference's failStep allows it)
    if status != "running" and not (not cmd.ok and status == "pending"):
        raise engine_error(
            ErrorCode.INVALID_STATE_TRANSITION,
            f'step "{sid}" cannot complete: it is {status}, not running',
            "stepId",
        )
    if not cmd.ok:
        error = check_error_obj(cmd.error or {"message": "step failed"}, "error")
        return [
            make_event(state, ctx, "step_completed", step_id=sid, ok=False, error=error),
            make_event(
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
        raise engine_error(
            ErrorCode.INVALID_STATE_TRANSITION, f'step "{sid}" cannot complete: {blocker}', "stepId"
        )
    events = []
    if state.policy(sid) in ("PAUSE_AFTER", "CHECKPOINT"):
        events.append(
            make_event(
                state, ctx, "human_gate_requested", step_id=sid, gate="PAUSE_AFTER", reason=AFTER_GATE_REASON
            )
        )
    events.append(make_event(state, ctx, "step_completed", step_id=sid, ok=True))
    return events


def _request_gate(state: RunState, cmd: RequestGate, ctx: Context) -> list[dict[str, Any]]:
    require_running(state, f'request a gate on step "{cmd.step_id}"')
    sid = require_step(state, cmd.step_id)
    gate = check_gate_name(cmd.gate)
    if cmd.checkpoint is not None:
        if gate != "CHECKPOINT":
            raise engine_error(ErrorCode.INVALID_INPUT, "only CHECKPOINT gates are named", "checkpoint")
        nonempty_str(cmd.checkpoint, "checkpoint", "checkpoint name")
    check_request_transition(state, sid, gate, cmd.checkpoint)
    slot = gate_slot(gate, cmd.checkpoint)
    if slot in state.open_gates.get(sid, {}):
        return []  # already waiting for this very gate
    corr = f"{CHECKPOINT_CORRELATION_PREFIX}{cmd.checkpoint}" if cmd.checkpoint else None
    return [
        make_event(
            state, ctx, "human_gate_requested", step_id=sid, correlation_id=corr, gate=gate, reason=cmd.reason
        )
    ]


def _resolve_gate(state: RunState, cmd: ResolveGate, ctx: Context) -> list[dict[str, Any]]:
    require_running(state, f'resolve a gate on step "{cmd.step_id}"')
    sid = require_step(state, cmd.step_id)
    gate = check_gate_name(cmd.gate)
    if cmd.decision not in DECISIONS:
        raise engine_error(
            ErrorCode.INVALID_INPUT, f"decision must be one of {', '.join(DECISIONS)}", "decision"
        )
    if cmd.checkpoint is not None:
        if gate != "CHECKPOINT":
            raise engine_error(ErrorCode.INVALID_INPUT, "only CHECKPOINT gates are named", "checkpoint")
        nonempty_str(cmd.checkpoint, "checkpoint", "checkpoint name")
    if cmd.edit is not None and cmd.decision != "edited":
        raise engine_error(ErrorCode.INVALID_INPUT, 'an edit goes with decision "edited"', "edit")
    if cmd.note is not None and not isinstance(cmd.note, str):
        raise engine_error(ErrorCode.INVALID_INPUT, "note must be a string", "note")
    check_resolve_transition(state, sid, gate, cmd.checkpoint)
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
    # The resolution names its gate in ``correlationId`` (``checkpoint:<name>``, or ``checkpoint:``
    # for the step's own CHECKPOINT gate when a note could be read as a checkpoint's name), so its
    # ``note`` is the reviewer's: the decision record carries the reviewer's words (see
    # ``checkpoint_name`` and ``reviewer_note``). Without words, a named checkpoint's ``note``
    # repeats its name, which is how the reference names the checkpoint it resolves.
    note = cmd.note or None
    corr = f"{CHECKPOINT_CORRELATION_PREFIX}{cmd.checkpoint}" if cmd.checkpoint else None
    if gate == "CHECKPOINT":
        if cmd.checkpoint:
            open_for_step = state.open_gates.get(sid, {})
            if "CHECKPOINT" in open_for_step and gate_slot(gate, cmd.checkpoint) not in open_for_step:
                raise engine_error(
                    ErrorCode.INVALID_STATE_TRANSITION,
                    f'CHECKPOINT "{cmd.checkpoint}" of step "{sid}" was not requested while the step\'s own '
                    "CHECKPOINT gate waits: resolve that gate, or request the checkpoint first",
                    "checkpoint",
                )
            note = note or cmd.checkpoint
        elif note:
            probe = {"type": "human_gate_resolved", "stepId": sid, "gate": gate, "note": note}
            if checkpoint_name(state, probe) is not None:
                corr = CHECKPOINT_CORRELATION_PREFIX  # the note is words, not a checkpoint's name
    events.append(
        make_event(
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
    return events


def _write_artifact(state: RunState, cmd: WriteArtifact, ctx: Context) -> list[dict[str, Any]]:
    require_running(state, f'write artifact "{cmd.key}"')
    key = nonempty_str(cmd.key, "artifactKey", "artifactKey")
    type_id = nonempty_str(cmd.type_id, "typeId", "typeId")
    optional_step(state, cmd.step_id)
    pointer = cmd.pointer
    has_data = not (cmd.data is None and pointer is not None)
    if pointer is not None:
        problem = pointer_problem(pointer, cmd.data, has_data)
        if problem:
            raise engine_error(ErrorCode.INVALID_INPUT, problem[1], problem[0])
    try:
        digest = write_digest(key, type_id, cmd.data if has_data else None, pointer)
    except ProtocolError as exc:
        raise engine_error(exc.code, exc.message, "data") from None
    if cmd.idempotency_key is not None:
        ikey = nonempty_str(cmd.idempotency_key, "idempotencyKey", "idempotencyKey")
        if _idempotent_hit(state, ikey, key, digest):
            return []
    prev = state.artifacts.get(key)
    if cmd.expected_version is not None:
        current = prev["version"] if prev else 0
        if type(cmd.expected_version) is not int or cmd.expected_version != current:
            raise engine_error(
                ErrorCode.PATCH_FAILED,
                f'artifact "{key}" is at version {current}; the write was based on version {cmd.expected_version}',
                "expectedVersion",
            )
    if has_data:
        validate_data(ctx, type_id, cmd.data, "data")
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
        make_event(
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
        raise engine_error(
            ErrorCode.IDEMPOTENCY_CONFLICT,
            f'idempotency key "{ikey}" was already used for artifact "{prev["artifactKey"]}"',
            "idempotencyKey",
        )
    if state.idempotency_digests.get(ikey) != digest:
        raise engine_error(
            ErrorCode.IDEMPOTENCY_CONFLICT,
            f'idempotency key "{ikey}" already produced version {prev["version"]} of "{key}" with different content',
            "idempotencyKey",
        )
    return True


def _patch_artifact(state: RunState, cmd: PatchArtifact, ctx: Context) -> list[dict[str, Any]]:
    require_running(state, f'patch artifact "{cmd.key}"')
    key = nonempty_str(cmd.key, "artifactKey", "artifactKey")
    optional_step(state, cmd.step_id)
    try:
        check_patch(cmd.patch)
        digest = patch_digest(key, cmd.from_version, cmd.patch)
    except ProtocolError as exc:
        raise EngineError(exc.code, exc.message, exc.path) from None
    if cmd.idempotency_key is not None:
        ikey = nonempty_str(cmd.idempotency_key, "idempotencyKey", "idempotencyKey")
        if _idempotent_hit(state, ikey, key, digest):
            return []
    prev = state.artifacts.get(key)
    if prev is None:
        raise engine_error(ErrorCode.UNKNOWN_ARTIFACT, f'unknown artifact "{key}"', "artifactKey")
    if type(cmd.from_version) is not int or cmd.from_version != prev["version"]:
        raise engine_error(
            ErrorCode.PATCH_FAILED,
            f'artifact "{key}" is at version {prev["version"]}; the patch was made against version {cmd.from_version}',
            "fromVersion",
        )
    ts = ctx.now()
    try:
        artifact = patched_version(prev, to_version=prev["version"] + 1, created_at=ts, patch=cmd.patch)
    except ProtocolError as exc:
        raise EngineError(exc.code, f'patching "{key}" failed: {exc.message}', exc.path) from None
    validate_data(ctx, prev["typeId"], artifact["data"], "data")
    return [
        make_event(
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
    require_running(state, "log model I/O")
    if cmd.direction not in ("request", "response", "stream_chunk"):
        raise engine_error(
            ErrorCode.INVALID_INPUT, "direction must be request, response or stream_chunk", "direction"
        )
    optional_step(state, cmd.step_id)
    check_usage(cmd.usage)
    check_cost(cmd.cost)
    if cmd.duration_ms is not None and (not is_number(cmd.duration_ms) or cmd.duration_ms < 0):
        raise engine_error(ErrorCode.INVALID_INPUT, "durationMs must be a number >= 0", "durationMs")
    return [
        make_event(
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
    require_running(state, "log a tool call")
    name = nonempty_str(cmd.name, "name", "tool name")
    optional_step(state, cmd.step_id)
    return [
        make_event(
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
    # The one command a finished run takes: an annotation records a judgement about the run (a
    # note, a queue review) and changes no state, so reviewing after the fact stays in the record.
    if not isinstance(cmd.text, str):
        raise engine_error(ErrorCode.INVALID_INPUT, "annotation text must be a string", "text")
    tags = list(cmd.tags) if cmd.tags is not None else None
    if tags is not None and not all(isinstance(t, str) for t in tags):
        raise engine_error(ErrorCode.INVALID_INPUT, "tags must be strings", "tags")
    optional_step(state, cmd.step_id)
    return [make_event(state, ctx, "annotation", step_id=cmd.step_id, text=cmd.text, tags=tags)]


def _fail_running_steps(state: RunState, ctx: Context, error: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        make_event(state, ctx, "step_completed", step_id=sid, ok=False, error=error)
        for sid, status in state.step_status.items()
        if status == "running"
    ]


def _record_error(state: RunState, cmd: RecordError, ctx: Context) -> list[dict[str, Any]]:
    require_running(state, "record an error")
    message = nonempty_str(cmd.message, "message", "error message")
    if cmd.code is not None and not isinstance(cmd.code, str):
        raise engine_error(ErrorCode.INVALID_INPUT, "error code must be a string", "code")
    optional_step(state, cmd.step_id)
    error_event = make_event(
        state, ctx, "error", step_id=cmd.step_id, message=message, code=cmd.code, fatal=bool(cmd.fatal)
    )
    if not cmd.fatal:
        return [error_event]
    error = {"message": message, **({"code": cmd.code} if cmd.code else {})}
    return [
        error_event,
        *_fail_running_steps(state, ctx, error),
        make_event(state, ctx, "run_status_changed", status="failed", reason=message),
    ]


def _start_span(state: RunState, cmd: StartSpan, ctx: Context) -> list[dict[str, Any]]:
    require_running(state, "start a span")
    name = nonempty_str(cmd.name, "name", "span name")
    span_id = cmd.span_id if cmd.span_id is not None else ctx.new_id("span")
    nonempty_str(span_id, "spanId", "spanId")
    if span_id in state.open_spans:
        raise engine_error(ErrorCode.INVALID_STATE_TRANSITION, f'span "{span_id}" is already open', "spanId")
    if cmd.parent_span_id is not None and cmd.parent_span_id not in state.open_spans:
        raise engine_error(
            ErrorCode.INVALID_STATE_TRANSITION,
            f'parent span "{cmd.parent_span_id}" is not open',
            "parentSpanId",
        )
    if cmd.kind is not None and cmd.kind not in ("internal", "client", "server", "producer", "consumer"):
        raise engine_error(
            ErrorCode.INVALID_INPUT, "kind must be internal, client, server, producer or consumer", "kind"
        )
    if cmd.attributes is not None and not isinstance(cmd.attributes, dict):
        raise engine_error(ErrorCode.INVALID_INPUT, "attributes must be an object", "attributes")
    optional_step(state, cmd.step_id)
    return [
        make_event(
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
    require_running(state, "end a span")
    span = state.open_spans.get(cmd.span_id)
    if span is None:
        raise engine_error(ErrorCode.INVALID_STATE_TRANSITION, f'span "{cmd.span_id}" is not open', "spanId")
    if cmd.status is not None and cmd.status not in ("ok", "error"):
        raise engine_error(ErrorCode.INVALID_INPUT, "status must be ok or error", "status")
    if cmd.duration_ms is not None and (not is_number(cmd.duration_ms) or cmd.duration_ms < 0):
        raise engine_error(ErrorCode.INVALID_INPUT, "durationMs must be a number >= 0", "durationMs")
    if cmd.attributes is not None and not isinstance(cmd.attributes, dict):
        raise engine_error(ErrorCode.INVALID_INPUT, "attributes must be an object", "attributes")
    error = check_error_obj(cmd.error, "error") if cmd.error is not None else None
    return [
        make_event(
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
    require_running(state, f'change the gate policy of step "{cmd.step_id}"')
    sid = require_step(state, cmd.step_id)
    if cmd.policy not in GATE_POLICIES:
        raise engine_error(
            ErrorCode.INVALID_INPUT, f"policy must be one of {', '.join(GATE_POLICIES)}", "policy"
        )
    if state.policy(sid) == cmd.policy:
        return []
    return [make_event(state, ctx, "policy_changed", step_id=sid, policy=cmd.policy)]


def _change_rule_set(state: RunState, cmd: ChangeRuleSet, ctx: Context) -> list[dict[str, Any]]:
    require_running(state, "change a rule set")
    rule_set = check_rule_set(cmd.rule_set, ctx.schemas)
    return [make_event(state, ctx, "rule_changed", ruleSetId=rule_set["id"], snapshot=rule_set)]


def _cancel_run(state: RunState, cmd: CancelRun, ctx: Context) -> list[dict[str, Any]]:
    require_running(state, "cancel the run")
    error = {"message": cmd.reason or "run cancelled", "code": "CANCELLED"}
    return [
        *_fail_running_steps(state, ctx, error),
        make_event(state, ctx, "run_status_changed", status="cancelled", reason=cmd.reason),
    ]


def _complete_run(state: RunState, cmd: CompleteRun, ctx: Context) -> list[dict[str, Any]]:
    require_running(state, "complete the run")
    running = [sid for sid, st in state.step_status.items() if st == "running"]
    if running:
        raise engine_error(
            ErrorCode.INVALID_STATE_TRANSITION,
            "cannot complete the run: waiting for running step(s) " + ", ".join(f'"{s}"' for s in running),
        )
    require_no_pending_gate(state, "complete the run")
    return [make_event(state, ctx, "run_status_changed", status="completed", reason=cmd.reason)]


def _fail_run(state: RunState, cmd: FailRun, ctx: Context) -> list[dict[str, Any]]:
    require_running(state, "fail the run")
    message = nonempty_str(cmd.reason, "reason", "failure reason")
    error = {"message": message, **({"code": cmd.code} if cmd.code else {})}
    ts = ctx.now()
    return [
        *_fail_running_steps(state, ctx, error),
        make_event(state, ctx, "run_status_changed", ts=ts, status="failed", reason=message),
        make_event(state, ctx, "error", ts=ts, message=message, code=cmd.code, fatal=True),
    ]


def _append_events(state: RunState, cmd: AppendEvents, ctx: Context) -> list[dict[str, Any]]:
    """Check externally supplied events one by one against the state they would meet."""
    events = list(cmd.events)
    append_in_place(state.clone(), events, ctx)
    return events


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
