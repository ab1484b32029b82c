"""Pure edits of a rule set: the order reviewers see, moving a rule, switching it on or off.

Each function takes a rule set (a protocol ``RuleSet`` object) and returns a new one; the input
is never mutated. The result is what a ``ChangeRuleSet`` command carries, so the engine still
validates it (``check_rule_set``) before a ``rule_changed`` event is emitted.

    ordered_rules(rules)                 highest priority first, ties in stored order
    move_rule(rule_set, "r2", "up")      swaps priorities with its neighbour in that order
    toggle_rule(rule_set, "r2")          flips ``enabled``
"""

from __future__ import annotations

from typing import Any

from runs.engine.errors import EngineError, ErrorCode

DIRECTIONS = ("up", "down")


def _priority(rule: dict[str, Any]) -> int:
    value = rule.get("priority", 0)
    return value if type(value) is int else 0


def ordered_rules(rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Highest priority first; rules of equal priority keep their stored order (a stable sort)."""
    return sorted(rules, key=lambda r: -_priority(r))


def _copy(rule_set: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    rules = [dict(r) for r in rule_set.get("rules", [])]
    return {**rule_set, "rules": rules}, rules


def _find(rules: list[dict[str, Any]], rule_id: str) -> dict[str, Any]:
    for rule in rules:
        if rule.get("id") == rule_id:
            return rule
    raise EngineError(ErrorCode.INVALID_INPUT, f'no rule "{rule_id}" in this rule set', "ruleId")


def move_rule(rule_set: dict[str, Any], rule_id: str, direction: str) -> dict[str, Any]:
    """The rule set with ``rule_id`` one place higher ("up") or lower ("down") in ``ordered_rules``.

    The rule trades priorities with its neighbour; when both have the same priority the moved rule
    gets one more (up) or one less (down) than the neighbour, so the new order is strict. Moving
    the first rule up or the last rule down returns an unchanged copy.
    """
    if direction not in DIRECTIONS:
        raise EngineError(ErrorCode.INVALID_INPUT, "direction must be up or down", "direction")
    new_set, rules = _copy(rule_set)
    target = _find(rules, rule_id)
    ordered = ordered_rules(rules)
    idx = next(i for i, r in enumerate(ordered) if r is target)
    other_idx = idx - 1 if direction == "up" else idx + 1
    if not 0 <= other_idx < len(ordered):
        return new_set
    other = ordered[other_idx]
    a, b = _priority(target), _priority(other)
    if a == b:
        target["priority"] = b + 1 if direction == "up" else b - 1
    else:
        target["priority"], other["priority"] = b, a
    return new_set


def toggle_rule(rule_set: dict[str, Any], rule_id: str) -> dict[str, Any]:
    """The rule set with ``rule_id`` switched on when it was off, and off when it was on."""
    new_set, rules = _copy(rule_set)
    target = _find(rules, rule_id)
    target["enabled"] = not target.get("enabled", False)
    return new_set


def edit_rule(
    rule_set: dict[str, Any], rule_id: str, *, payload: Any, label: str | None = None
) -> dict[str, Any]:
    """The rule set with a new payload (and, when given, label) for ``rule_id``."""
    new_set, rules = _copy(rule_set)
    target = _find(rules, rule_id)
    target["payload"] = payload
    if label is not None and label.strip():
        target["label"] = label.strip()[:200]
    return new_set
