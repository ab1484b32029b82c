"""Small checks shared by :mod:`runs.engine.decide`, :mod:`runs.engine.check` and
:mod:`runs.engine.lifecycle`: each raises :class:`EngineError` with a protocol error code and the
path of the offending field, or returns the value it checked."""

from __future__ import annotations

from typing import Any

from runs.engine.commands import Context
from runs.engine.errors import EngineError, ErrorCode
from runs.engine.state import USAGE_FIELDS, RunState
from runs.protocol.errors import ProtocolError


def engine_error(code: str, message: str, path: str = "") -> EngineError:
    return EngineError(code, message, path)


def make_event(
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


def require_running(state: RunState, action: str) -> None:
    if state.is_finished:
        raise engine_error(
            ErrorCode.INVALID_STATE_TRANSITION,
            f'cannot {action}: run "{state.run_id}" is {state.status} (finished runs take no commands)',
        )


def require_step(state: RunState, step_id: Any, path: str = "stepId") -> str:
    if not isinstance(step_id, str) or step_id not in state.step_status:
        raise engine_error(
            ErrorCode.UNKNOWN_STEP,
            f"unknown step {step_id!r} (not in workflow {state.run.get('workflowId')!r})",
            path,
        )
    return step_id


def optional_step(state: RunState, step_id: Any) -> None:
    if step_id is not None:
        require_step(state, step_id)


def nonempty_str(value: Any, path: str, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise engine_error(ErrorCode.INVALID_INPUT, f"{what} must be a non-empty string", path)
    return value


def validate_data(ctx: Context, type_id: str, data: Any, path: str) -> None:
    try:
        ctx.schemas.validate(type_id, data, path=path)
    except ProtocolError as exc:
        raise EngineError(exc.code, exc.message, exc.path) from None


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_usage(usage: Any) -> None:
    if usage is None:
        return
    if not isinstance(usage, dict):
        raise engine_error(ErrorCode.INVALID_INPUT, "usage must be an object", "usage")
    for key, value in usage.items():
        if key not in USAGE_FIELDS:
            raise engine_error(ErrorCode.INVALID_INPUT, f"unknown usage field {key!r}", f"usage.{key}")
        if type(value) is not int or value < 0:
            raise engine_error(
                ErrorCode.INVALID_INPUT, "token counts are non-negative integers", f"usage.{key}"
            )


def check_cost(cost: Any) -> None:
    if cost is None:
        return
    if not isinstance(cost, dict) or set(cost) - {"amount", "currency"}:
        raise engine_error(ErrorCode.INVALID_INPUT, "cost is {amount, currency}", "cost")
    if not is_number(cost.get("amount")) or cost["amount"] < 0 or cost["amount"] != cost["amount"]:
        raise engine_error(ErrorCode.INVALID_INPUT, "cost amount must be a number >= 0", "cost.amount")
    nonempty_str(cost.get("currency"), "cost.currency", "cost currency")


def check_error_obj(error: Any, path: str) -> dict[str, Any]:
    if not isinstance(error, dict) or not isinstance(error.get("message"), str):
        raise engine_error(ErrorCode.INVALID_INPUT, "error is {message, code?}", path)
    if error.get("code") is not None and not isinstance(error["code"], str):
        raise engine_error(ErrorCode.INVALID_INPUT, "error code must be a string", f"{path}.code")
    return {k: error[k] for k in ("message", "code") if error.get(k) is not None}


def require_no_pending_gate(state: RunState, action: str, path: str = "") -> None:
    """A run never completes while a gate waits for a person: nobody decided it, so nothing may
    pretend the work behind it was approved (fail or cancel the run instead)."""
    waiting = state.pending_gates()
    if waiting:
        names = ", ".join(
            f'{g["gate"]}{":" + g["checkpoint"] if g.get("checkpoint") else ""} of "{g["stepId"]}"'
            for g in waiting
        )
        raise engine_error(
            ErrorCode.INVALID_STATE_TRANSITION,
            f"cannot {action}: gate(s) still waiting for a decision: {names}",
            path,
        )
