"""Rules that add runs to a queue by themselves (pure): rejected gates, errors, cost above a
threshold, a percentage sample of a workflow's finished runs.

    rules = {"rejectedGates": true, "errors": true, "costAbove": {"USD": "0.50"},
             "samplePercent": 10, "workflowId": "wf-letters"}   # workflowId narrows every rule
    parse_rules(raw) -> rules (checked) or ValueError in words
    matches(rules, facts) -> bool   # facts: RunFacts of one run change
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any

RULE_KEYS = frozenset({"rejectedGates", "errors", "costAbove", "samplePercent", "workflowId"})


@dataclass(frozen=True)
class RunFacts:
    run_id: str
    workflow_id: str
    status: str
    finished: bool
    rejected_gates: int
    had_error: bool  # an error event in this change, or the run failed
    cost: dict[str, str] = field(default_factory=dict)  # currency -> decimal string


def parse_rules(raw: Any) -> dict[str, Any]:
    if raw in (None, {}):
        return {}
    if not isinstance(raw, dict) or set(raw) - RULE_KEYS:
        raise ValueError(f"rules is an object with any of {', '.join(sorted(RULE_KEYS))}")
    out: dict[str, Any] = {}
    for key in ("rejectedGates", "errors"):
        if key in raw:
            if not isinstance(raw[key], bool):
                raise ValueError(f"{key} is true or false")
            out[key] = raw[key]
    if "costAbove" in raw:
        cost = raw["costAbove"]
        if not isinstance(cost, dict) or len(cost) != 1:
            raise ValueError('costAbove is {"<currency>": "<amount>"}')
        ((currency, amount),) = cost.items()
        try:
            value = Decimal(str(amount))
        except InvalidOperation:
            raise ValueError("costAbove's amount is a number") from None
        if not value.is_finite() or value < 0:
            raise ValueError("costAbove's amount is a number of 0 or more")
        out["costAbove"] = {str(currency)[:8]: str(value)}
    if "samplePercent" in raw:
        pct = raw["samplePercent"]
        if isinstance(pct, bool) or not isinstance(pct, int | float) or not 0 < pct <= 100:
            raise ValueError("samplePercent is more than 0 and at most 100")
        out["samplePercent"] = pct
    if "workflowId" in raw:
        if not isinstance(raw["workflowId"], str) or not raw["workflowId"]:
            raise ValueError("workflowId names a workflow")
        out["workflowId"] = raw["workflowId"][:200]
    return out


def in_sample(run_id: str, percent: float) -> bool:
    """A stable choice per run id: the same run is always in or out of a given sample."""
    bucket = int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:4], "big") % 10_000
    return bucket < percent * 100


def matches(rules: dict[str, Any], facts: RunFacts) -> bool:
    if not rules or (rules.get("workflowId") and rules["workflowId"] != facts.workflow_id):
        return False
    if rules.get("rejectedGates") and facts.rejected_gates > 0:
        return True
    if rules.get("errors") and facts.had_error:
        return True
    if not facts.finished:
        return False
    for currency, amount in (rules.get("costAbove") or {}).items():
        try:
            if Decimal(facts.cost.get(currency, "0")) > Decimal(amount):
                return True
        except InvalidOperation:
            pass
    percent = rules.get("samplePercent")
    return percent is not None and in_sample(facts.run_id, float(percent))
