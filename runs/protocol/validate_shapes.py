"""The value checks that :mod:`runs.protocol.validate` is built from, the shapes of artifacts,
rule sets and JSON patches, and one checker per trace event type (:data:`EVENT_VALIDATORS`, the
table ``validate_event`` dispatches on).

Each check raises :class:`ProtocolError` with the ``code`` its caller passes and the JSON path of
the offending value; the rules they follow are in :mod:`runs.protocol.validate`'s docstring.
``req_*`` checks read a required key of an object, ``opt_*`` an optional one, ``check_*`` a value.
"""

from __future__ import annotations

import math
import re
from datetime import datetime
from typing import Any

from runs.protocol.errors import ErrorCode, ProtocolError

GATE_POLICIES = ("AUTO", "PAUSE_BEFORE", "PAUSE_AFTER", "CHECKPOINT")
GATES = ("PAUSE_BEFORE", "PAUSE_AFTER", "CHECKPOINT")
RUN_STATUSES = ("running", "completed", "failed", "cancelled")
STEP_STATUSES = ("pending", "running", "completed", "failed")
GATE_DECISIONS = ("approved", "rejected", "edited")
GATE_MARKS = ("approved", "pending")
MODEL_IO_DIRECTIONS = ("request", "response", "stream_chunk")
SPAN_KINDS = ("internal", "client", "server", "producer", "consumer")
SPAN_STATUSES = ("ok", "error")
POINTER_KINDS = ("inline", "external")
USAGE_KEYS = ("inputTokens", "outputTokens", "totalTokens", "cachedInputTokens", "reasoningTokens")
SUBJECT_KEYS = ("userId", "tenantId", "accountId", "planId")

MAX_SAFE_INTEGER = 2**53 - 1  # zod's int(): JavaScript's safe integers only

_TS = re.compile(
    r"(\d{4})-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d"
    r"(?::[0-5]\d(?:\.\d+)?)?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)",
    re.ASCII,  # \d is 0-9 only, as in JavaScript (not every Unicode digit)
)
_HEX64 = re.compile(r"[0-9a-f]{64}")

_RB = ErrorCode.INVALID_RUN_BUNDLE


# ---------------------------------------------------------------- primitives


def fail(code: str, path: str, message: str) -> ProtocolError:
    return ProtocolError(code, message, path)


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def expected(code: str, path: str, what: str, value: Any) -> ProtocolError:
    return fail(code, path, f"must be {what}, got {type_name(value)}")


def join_path(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def as_object(value: Any, path: str, code: str) -> dict[str, Any]:
    if type(value) is not dict:
        raise expected(code, path, "an object", value)
    return value


def as_array(value: Any, path: str, code: str) -> list[Any]:
    if type(value) is not list:
        raise expected(code, path, "an array", value)
    return value


def require(obj: dict[str, Any], key: str, path: str, code: str) -> Any:
    try:
        return obj[key]
    except KeyError:
        raise fail(code, join_path(path, key), "is required") from None


def check_str(value: Any, path: str, code: str, nonempty: bool = False) -> str:
    if type(value) is not str:
        raise expected(code, path, "a non-empty string" if nonempty else "a string", value)
    if nonempty and not value:
        raise fail(code, path, "must be a non-empty string")
    return value


def req_str(obj: dict[str, Any], key: str, path: str, code: str, nonempty: bool = False) -> str:
    value = obj.get(key, MISSING)
    if type(value) is str and (value or not nonempty):
        return value
    if value is MISSING:
        raise fail(code, join_path(path, key), "is required")
    return check_str(value, join_path(path, key), code, nonempty)


def opt_str(obj: dict[str, Any], key: str, path: str, code: str, nonempty: bool = False) -> None:
    value = obj.get(key, MISSING)
    if value is MISSING or (type(value) is str and (value or not nonempty)):
        return
    check_str(value, join_path(path, key), code, nonempty)


MISSING: Any = object()


_fromisoformat = datetime.fromisoformat


def common_ts_ok(value: str) -> bool:
    """Fast accept of the usual form ``YYYY-MM-DDTHH:MM:SS.sssZ`` (what JavaScript writes).

    ``datetime.fromisoformat`` (C) checks the digits, ranges and calendar once the
    separators are pinned; anything else goes to the regular expression.
    """
    if len(value) != 24 or value[23] != "Z" or value[4:20:3] != "--T::.":
        return False
    try:
        _fromisoformat(value)
    except ValueError:
        return False
    return True


def req_ts(obj: dict[str, Any], key: str, path: str, code: str) -> None:
    value = obj.get(key, MISSING)
    if type(value) is str and (
        common_ts_ok(value) or (_TS.fullmatch(value) is not None and value[8:10] < "29")
    ):
        return
    if value is MISSING:
        raise fail(code, join_path(path, key), "is required")
    check_timestamp(value, join_path(path, key), code)


def req_enum(obj: dict[str, Any], key: str, allowed: tuple[str, ...], path: str, code: str) -> None:
    value = obj.get(key, MISSING)
    if type(value) is str and value in allowed:
        return
    if value is MISSING:
        raise fail(code, join_path(path, key), "is required")
    check_enum(value, allowed, join_path(path, key), code)


def opt_enum(obj: dict[str, Any], key: str, allowed: tuple[str, ...], path: str, code: str) -> None:
    value = obj.get(key, MISSING)
    if value is MISSING or (type(value) is str and value in allowed):
        return
    check_enum(value, allowed, join_path(path, key), code)


def req_int(obj: dict[str, Any], key: str, path: str, code: str, minimum: int | None = None) -> None:
    value = obj.get(key, MISSING)
    if (
        type(value) is int
        and (minimum is None or value >= minimum)
        and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER
    ):
        return
    if value is MISSING:
        raise fail(code, join_path(path, key), "is required")
    check_int(value, join_path(path, key), code, minimum)


def opt_number(obj: dict[str, Any], key: str, path: str, code: str, minimum: float | None = None) -> None:
    value = obj.get(key, MISSING)
    if value is MISSING or (
        type(value) is float and math.isfinite(value) and (minimum is None or value >= minimum)
    ):
        return
    check_number(value, join_path(path, key), code, minimum)


def req_bool(obj: dict[str, Any], key: str, path: str, code: str) -> None:
    value = obj.get(key, MISSING)
    if type(value) is bool:
        return
    if value is MISSING:
        raise fail(code, join_path(path, key), "is required")
    check_bool(value, join_path(path, key), code)


def is_int(value: Any) -> bool:
    """A JavaScript safe integer (``3.0`` and ``1e3`` count; ``2**53`` does not, as in zod)."""
    t = type(value)
    return (
        t is int or (t is float and value.is_integer())
    ) and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER


def check_int(value: Any, path: str, code: str, minimum: int | None = None) -> None:
    if not is_int(value):
        t = type(value)
        if (t is int or (t is float and value.is_integer())) and type(value) is not bool:
            raise fail(code, path, f"must be a safe integer (at most {MAX_SAFE_INTEGER} in magnitude)")
        raise fail(code, path, _int_message(minimum))
    if minimum is not None and value < minimum:
        raise fail(code, path, _int_message(minimum))


def _int_message(minimum: int | None) -> str:
    if minimum == 0:
        return "must be a non-negative integer"
    if minimum is None:
        return "must be an integer"
    return f"must be an integer >= {minimum}"


def check_number(value: Any, path: str, code: str, minimum: float | None = None) -> None:
    t = type(value)
    if not (t is int or (t is float and math.isfinite(value))):
        raise expected(code, path, "a finite number", value)
    if minimum is not None and value < minimum:
        raise fail(code, path, f"must be a number >= {minimum:g}")


def check_bool(value: Any, path: str, code: str) -> None:
    if type(value) is not bool:
        raise expected(code, path, "a boolean", value)


def check_enum(value: Any, allowed: tuple[str, ...], path: str, code: str) -> None:
    if value not in allowed or type(value) is not str:
        options = " | ".join(repr(a) for a in allowed)
        shown = repr(value) if isinstance(value, str) else type_name(value)
        raise fail(code, path, f"must be one of {options}, got {shown}")


def check_timestamp(value: Any, path: str, code: str) -> None:
    if type(value) is not str:
        raise expected(code, path, "an ISO 8601 timestamp string", value)
    match = _TS.fullmatch(value)
    if match is None:
        raise fail(code, path, "must be an ISO 8601 date-time with a Z or +HH:MM offset")
    day = int(match.group(3))
    if day > 28 and day > _days_in_month(int(match.group(1)), int(match.group(2))):
        raise fail(code, path, "is not a calendar date")


def _days_in_month(year: int, month: int) -> int:
    """Proleptic Gregorian, year 0000 included (a leap year, as in zod's date pattern)."""
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def check_strings(
    value: Any, path: str, code: str, nonempty_list: bool = False, nonempty_items: bool = False
) -> None:
    items = as_array(value, path, code)
    if nonempty_list and not items:
        raise fail(code, path, "must be a non-empty array")
    for i, item in enumerate(items):
        if type(item) is not str:
            raise expected(code, f"{path}[{i}]", "a string", item)
        if nonempty_items and not item:
            raise fail(code, f"{path}[{i}]", "must be a non-empty string")


def check_strict(obj: dict[str, Any], allowed: tuple[str, ...], path: str, code: str) -> None:
    for key in obj:
        if key not in allowed:
            raise fail(code, join_path(path, str(key)), "is not allowed here (unknown key)")


def _error_info(value: Any, path: str, code: str) -> None:
    obj = as_object(value, path, code)
    req_str(obj, "message", path, code)
    opt_str(obj, "code", path, code)


# ---------------------------------------------------------------- artifacts and rule sets


def validate_artifact_version(artifact: Any, path: str, code: str = _RB) -> None:
    """``{artifactKey, typeId, version >= 1, createdAt, pointer?, data?}``."""
    obj = as_object(artifact, path, code)
    req_str(obj, "artifactKey", path, code, nonempty=True)
    req_str(obj, "typeId", path, code, nonempty=True)
    version = obj.get("version", MISSING)
    if not (type(version) is int and 1 <= version <= MAX_SAFE_INTEGER):
        if version is MISSING:
            raise fail(code, join_path(path, "version"), "is required")
        check_int(version, join_path(path, "version"), code, minimum=1)
    req_ts(obj, "createdAt", path, code)
    if "pointer" in obj:
        _pointer(obj["pointer"], join_path(path, "pointer"), code)


def _pointer(value: Any, path: str, code: str) -> None:
    """Inline or external pointer. ``payloadHash`` is 64 lowercase hex; the legacy ``sha256``
    alias of older inline pointers is any string (the reference never constrained it) and must
    equal ``payloadHash`` only when both are non-empty; an external pointer needs a ``ref``."""
    pointer = as_object(value, path, code)
    req_enum(pointer, "kind", POINTER_KINDS, path, code)
    opt_str(pointer, "ref", path, code)
    if "payloadHash" in pointer:
        digest = pointer["payloadHash"]
        if type(digest) is not str or _HEX64.fullmatch(digest) is None:
            raise fail(code, join_path(path, "payloadHash"), "must be 64 lowercase hex characters (SHA-256)")
    opt_str(pointer, "sha256", path, code)
    if "byteLength" in pointer:
        check_int(pointer["byteLength"], join_path(path, "byteLength"), code, minimum=0)
    if pointer.get("payloadHash") and pointer.get("sha256") and pointer["payloadHash"] != pointer["sha256"]:
        raise fail(code, join_path(path, "payloadHash"), "must equal sha256 when both are set")
    if pointer["kind"] == "external" and not pointer.get("ref"):
        raise fail(code, join_path(path, "ref"), 'is required (non-empty) when kind is "external"')


def validate_rule_set(rule_set: Any, path: str, code: str = _RB) -> None:
    """``{id, ruleSchemaId, rules: [{id, priority (int), enabled (bool), label?, payload}]}``."""
    obj = as_object(rule_set, path, code)
    req_str(obj, "id", path, code, nonempty=True)
    req_str(obj, "ruleSchemaId", path, code, nonempty=True)
    rules_path = join_path(path, "rules")
    for i, rule in enumerate(as_array(require(obj, "rules", path, code), rules_path, code)):
        rule_path = f"{rules_path}[{i}]"
        r = as_object(rule, rule_path, code)
        req_str(r, "id", rule_path, code, nonempty=True)
        req_int(r, "priority", rule_path, code)
        req_bool(r, "enabled", rule_path, code)
        opt_str(r, "label", rule_path, code)


# ---------------------------------------------------------------- trace events


def _ev_step_started(e: dict[str, Any], path: str, code: str) -> None:
    req_str(e, "stepId", path, code, nonempty=True)


def _ev_step_completed(e: dict[str, Any], path: str, code: str) -> None:
    req_str(e, "stepId", path, code, nonempty=True)
    req_bool(e, "ok", path, code)
    if "error" in e:
        _error_info(e["error"], join_path(path, "error"), code)


def _ev_artifact_written(e: dict[str, Any], path: str, code: str) -> None:
    validate_artifact_version(require(e, "artifact", path, code), join_path(path, "artifact"), code)
    opt_str(e, "idempotencyKey", path, code)


_PATCH_OP_KEYS: dict[str, tuple[str, ...]] = {
    "add": ("op", "path", "value"),
    "replace": ("op", "path", "value"),
    "test": ("op", "path", "value"),
    "remove": ("op", "path"),
    "move": ("op", "path", "from"),
    "copy": ("op", "path", "from"),
}
_PATCH_OPS = tuple(_PATCH_OP_KEYS)


def validate_patch(patch: Any, path: str, code: str = _RB) -> None:
    """An RFC 6902 JSON Patch: a list of strict operation objects."""
    for i, op in enumerate(as_array(patch, path, code)):
        op_path = f"{path}[{i}]"
        o = as_object(op, op_path, code)
        name = require(o, "op", op_path, code)
        check_enum(name, _PATCH_OPS, join_path(op_path, "op"), code)
        allowed = _PATCH_OP_KEYS[name]
        check_strict(o, allowed, op_path, code)
        req_str(o, "path", op_path, code)
        if "value" in allowed:
            require(o, "value", op_path, code)
        if "from" in allowed:
            req_str(o, "from", op_path, code)


def _ev_artifact_patch(e: dict[str, Any], path: str, code: str) -> None:
    req_str(e, "artifactKey", path, code, nonempty=True)
    req_int(e, "fromVersion", path, code, minimum=1)
    req_int(e, "toVersion", path, code, minimum=1)
    validate_patch(require(e, "patch", path, code), join_path(path, "patch"), code)
    opt_str(e, "idempotencyKey", path, code)


_USAGE_KEY_SET = frozenset(USAGE_KEYS)
_COST_KEY_SET = frozenset(("amount", "currency"))


def _usage_ok(usage: Any) -> bool:
    """Absent (``MISSING``) or a valid usage object."""
    if usage is MISSING:
        return True
    if type(usage) is not dict or not _USAGE_KEY_SET.issuperset(usage):
        return False
    for value in usage.values():
        if not (type(value) is int and 0 <= value <= MAX_SAFE_INTEGER):
            return False
    return True


def _cost_ok(cost: Any) -> bool:
    """Absent (``MISSING``) or a valid cost object."""
    if cost is MISSING:
        return True
    if type(cost) is not dict or len(cost) != 2 or not _COST_KEY_SET.issuperset(cost):
        return False
    amount, currency = cost["amount"], cost["currency"]
    return (
        (type(amount) is float or type(amount) is int)
        and 0 <= amount < math.inf
        and type(currency) is str
        and currency != ""
    )


def _ev_model_io(e: dict[str, Any], path: str, code: str) -> None:
    get = e.get
    direction = get("direction")
    duration = get("durationMs", 0.0)
    if (
        type(direction) is str
        and direction in MODEL_IO_DIRECTIONS
        and type(provider := get("provider", "-")) is str
        and provider != ""
        and type(model := get("model", "-")) is str
        and model != ""
        and type(get("summary", "")) is str
        and _usage_ok(get("usage", MISSING))
        and _cost_ok(get("cost", MISSING))
        and (type(duration) is float or type(duration) is int)
        and 0 <= duration < math.inf
    ):
        return  # the usual event, checked in one expression; the lines below explain failures
    req_enum(e, "direction", MODEL_IO_DIRECTIONS, path, code)
    opt_str(e, "provider", path, code, nonempty=True)
    opt_str(e, "model", path, code, nonempty=True)
    opt_str(e, "summary", path, code)
    usage = e.get("usage", MISSING)
    if usage is not MISSING and not _usage_ok(usage):
        usage_path = join_path(path, "usage")
        u = as_object(usage, usage_path, code)
        for key, value in u.items():
            if key not in USAGE_KEYS:
                raise fail(code, join_path(usage_path, str(key)), "is not allowed here (unknown key)")
            if not (type(value) is int and 0 <= value <= MAX_SAFE_INTEGER):
                check_int(value, join_path(usage_path, key), code, minimum=0)
    cost = e.get("cost", MISSING)
    if cost is not MISSING and not _cost_ok(cost):
        cost_path = join_path(path, "cost")
        c = as_object(cost, cost_path, code)
        check_strict(c, ("amount", "currency"), cost_path, code)
        check_number(require(c, "amount", cost_path, code), join_path(cost_path, "amount"), code, minimum=0)
        req_str(c, "currency", cost_path, code, nonempty=True)
    opt_number(e, "durationMs", path, code, minimum=0)


def _ev_tool_call(e: dict[str, Any], path: str, code: str) -> None:
    req_str(e, "name", path, code)


def _ev_human_gate_requested(e: dict[str, Any], path: str, code: str) -> None:
    req_str(e, "stepId", path, code, nonempty=True)
    req_enum(e, "gate", GATES, path, code)
    opt_str(e, "reason", path, code)


def _ev_human_gate_resolved(e: dict[str, Any], path: str, code: str) -> None:
    req_str(e, "stepId", path, code, nonempty=True)
    req_enum(e, "gate", GATES, path, code)
    req_enum(e, "decision", GATE_DECISIONS, path, code)
    opt_str(e, "note", path, code)


def _ev_rule_changed(e: dict[str, Any], path: str, code: str) -> None:
    req_str(e, "ruleSetId", path, code, nonempty=True)
    validate_rule_set(require(e, "snapshot", path, code), join_path(path, "snapshot"), code)


def _ev_policy_changed(e: dict[str, Any], path: str, code: str) -> None:
    req_str(e, "stepId", path, code, nonempty=True)
    req_enum(e, "policy", GATE_POLICIES, path, code)


def _ev_error(e: dict[str, Any], path: str, code: str) -> None:
    req_str(e, "message", path, code)
    opt_str(e, "code", path, code)
    if "fatal" in e:
        check_bool(e["fatal"], join_path(path, "fatal"), code)


def _ev_run_forked(e: dict[str, Any], path: str, code: str) -> None:
    req_str(e, "parentRunId", path, code, nonempty=True)
    if "parentRunIds" in e:
        ids_path = join_path(path, "parentRunIds")
        check_strings(e["parentRunIds"], ids_path, code, nonempty_list=True, nonempty_items=True)
        # parentRunIds[0] == parentRunId is a rule of run.context only: the event carries the
        # lineage as recorded (the reference accepts any order here, and so do we).
    opt_str(e, "forkedFromStepId", path, code)


def _ev_annotation(e: dict[str, Any], path: str, code: str) -> None:
    req_str(e, "text", path, code)
    if "tags" in e:
        check_strings(e["tags"], join_path(path, "tags"), code)


def _ev_run_status_changed(e: dict[str, Any], path: str, code: str) -> None:
    req_enum(e, "status", RUN_STATUSES, path, code)
    opt_str(e, "reason", path, code)


def _ev_span_started(e: dict[str, Any], path: str, code: str) -> None:
    req_str(e, "spanId", path, code, nonempty=True)
    opt_str(e, "parentSpanId", path, code, nonempty=True)
    req_str(e, "name", path, code, nonempty=True)
    opt_enum(e, "kind", SPAN_KINDS, path, code)
    if "attributes" in e:
        as_object(e["attributes"], join_path(path, "attributes"), code)


def _ev_span_ended(e: dict[str, Any], path: str, code: str) -> None:
    req_str(e, "spanId", path, code, nonempty=True)
    opt_enum(e, "status", SPAN_STATUSES, path, code)
    opt_number(e, "durationMs", path, code, minimum=0)
    if "attributes" in e:
        as_object(e["attributes"], join_path(path, "attributes"), code)
    if "error" in e:
        _error_info(e["error"], join_path(path, "error"), code)


EVENT_VALIDATORS = {
    "step_started": _ev_step_started,
    "step_completed": _ev_step_completed,
    "artifact_written": _ev_artifact_written,
    "artifact_patch": _ev_artifact_patch,
    "model_io": _ev_model_io,
    "tool_call": _ev_tool_call,
    "human_gate_requested": _ev_human_gate_requested,
    "human_gate_resolved": _ev_human_gate_resolved,
    "rule_changed": _ev_rule_changed,
    "policy_changed": _ev_policy_changed,
    "error": _ev_error,
    "run_forked": _ev_run_forked,
    "annotation": _ev_annotation,
    "run_status_changed": _ev_run_status_changed,
    "span_started": _ev_span_started,
    "span_ended": _ev_span_ended,
}
