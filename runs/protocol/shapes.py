"""The reference's object shapes, field by field, in the order its parser (zod) emits them.

The reference parses a bundle before it uses it: zod builds each known object anew with the
schema's keys in the schema's order and drops keys the schema does not know. Wherever the
reference then *prints* an object (``JSON.stringify`` of an event as an OTel attribute, say),
that order shows. :func:`event_in_reference_order` rebuilds an event the same way. Values the
schema leaves open (``data``, ``payload``, ``args``, ``result``, ``attributes``, patch
``value``, rule ``payload``) keep their own order.

A trace event's keys: ``id, runId, ts, stepId, correlationId, type`` (``stepId`` keeps its
place where a type makes it required), then the type's own fields below.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

EVENT_BASE = ("id", "runId", "ts", "stepId", "correlationId", "type")

EVENT_FIELDS: dict[str, tuple[str, ...]] = {
    "step_started": (),
    "step_completed": ("ok", "error"),
    "artifact_written": ("artifact", "idempotencyKey"),
    "artifact_patch": ("artifactKey", "fromVersion", "toVersion", "patch", "idempotencyKey"),
    "model_io": ("direction", "provider", "model", "usage", "cost", "durationMs", "summary", "payload"),
    "tool_call": ("name", "args", "result"),
    "human_gate_requested": ("gate", "reason"),
    "human_gate_resolved": ("gate", "decision", "note"),
    "rule_changed": ("ruleSetId", "snapshot"),
    "policy_changed": ("policy",),
    "error": ("message", "code", "fatal"),
    "run_forked": ("parentRunId", "parentRunIds", "forkedFromStepId"),
    "annotation": ("text", "tags"),
    "run_status_changed": ("status", "reason"),
    "span_started": ("spanId", "parentSpanId", "name", "kind", "attributes"),
    "span_ended": ("spanId", "status", "durationMs", "attributes", "error"),
}

POINTER = ("kind", "ref", "payloadHash", "sha256", "byteLength")
ARTIFACT_VERSION = ("artifactKey", "typeId", "version", "createdAt", "pointer", "data")
RULE = ("id", "priority", "enabled", "label", "payload")
RULE_SET = ("id", "ruleSchemaId", "rules")
ERROR_INFO = ("message", "code")
USAGE = ("inputTokens", "outputTokens", "totalTokens", "cachedInputTokens", "reasoningTokens")
COST = ("amount", "currency")
PATCH_OP = ("op", "path", "value", "from")  # each op carries a subset, in this order


def _pick(obj: Any, keys: tuple[str, ...], nested: Mapping[str, Callable[[Any], Any]] | None = None) -> Any:
    if not isinstance(obj, Mapping):
        return obj
    out: dict[str, Any] = {}
    for key in keys:
        if key in obj:
            value = obj[key]
            if nested and key in nested:
                value = nested[key](value)
            out[key] = value
    return out


def _list_of(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda items: [fn(item) for item in items] if isinstance(items, list) else items


def artifact_in_reference_order(artifact: Any) -> Any:
    return _pick(artifact, ARTIFACT_VERSION, {"pointer": lambda p: _pick(p, POINTER)})


def rule_set_in_reference_order(rule_set: Any) -> Any:
    return _pick(rule_set, RULE_SET, {"rules": _list_of(lambda r: _pick(r, RULE))})


_NESTED: dict[str, Callable[[Any], Any]] = {
    "artifact": artifact_in_reference_order,
    "snapshot": rule_set_in_reference_order,
    "patch": _list_of(lambda op: _pick(op, PATCH_OP)),
    "error": lambda e: _pick(e, ERROR_INFO),
    "usage": lambda u: _pick(u, USAGE),
    "cost": lambda c: _pick(c, COST),
}


def event_in_reference_order(event: Mapping[str, Any]) -> dict[str, Any]:
    """The event as the reference holds it after parsing: schema order, unknown keys dropped.

    An event of an unknown type is returned with its keys as they are."""
    fields = EVENT_FIELDS.get(event.get("type"))  # type: ignore[arg-type]
    if fields is None:
        return dict(event)
    picked: dict[str, Any] = _pick(event, EVENT_BASE + fields, _NESTED)  # a Mapping gives a dict
    return picked
