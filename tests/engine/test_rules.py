"""Pure rule-set edits: order, move, toggle, edit (runs.engine.rules)."""

from __future__ import annotations

import copy

import pytest

from runs.engine import ChangeRuleSet, EngineError
from runs.engine.rules import edit_rule, move_rule, ordered_rules, toggle_rule


def rule(rid: str, priority: int, enabled: bool = True) -> dict:
    return {"id": rid, "priority": priority, "enabled": enabled, "payload": {"kind": "remote", "value": rid}}


RS = {"id": "rs", "ruleSchemaId": "rules.basic", "rules": [rule("a", 1), rule("b", 5), rule("c", 1)]}


def ids(rule_set: dict) -> list[str]:
    return [r["id"] for r in ordered_rules(rule_set["rules"])]


def test_order_is_priority_then_stored_order():
    assert ids(RS) == ["b", "a", "c"]


def test_move_up_swaps_priorities_with_the_neighbour():
    before = copy.deepcopy(RS)
    moved = move_rule(RS, "a", "up")
    assert ids(moved) == ["a", "b", "c"]
    assert {r["id"]: r["priority"] for r in moved["rules"]} == {"a": 5, "b": 1, "c": 1}
    assert RS == before  # the input is never mutated


def test_move_between_equal_priorities_makes_the_order_strict():
    moved = move_rule(RS, "c", "up")
    assert ids(moved) == ["b", "c", "a"]
    down = move_rule(RS, "a", "down")
    assert ids(down) == ["b", "c", "a"]


def test_moving_past_the_ends_changes_nothing():
    assert move_rule(RS, "b", "up") == RS
    assert move_rule(RS, "c", "down") == RS


def test_unknown_rule_and_direction_are_input_errors():
    with pytest.raises(EngineError) as exc:
        move_rule(RS, "zz", "up")
    assert exc.value.code == "INVALID_INPUT" and exc.value.path == "ruleId"
    with pytest.raises(EngineError) as exc:
        move_rule(RS, "a", "sideways")
    assert exc.value.path == "direction"


def test_toggle_and_edit():
    off = toggle_rule(RS, "b")
    assert [r["enabled"] for r in off["rules"]] == [True, False, True]
    assert toggle_rule(off, "b") == RS
    edited = edit_rule(RS, "a", payload={"kind": "onsite", "value": "x"}, label="  Office  ")
    assert edited["rules"][0]["payload"] == {"kind": "onsite", "value": "x"}
    assert edited["rules"][0]["label"] == "Office"
    assert "label" not in edit_rule(RS, "a", payload={}, label="  ")["rules"][0]


def test_moved_rule_set_is_accepted_by_the_engine(diamond):
    diamond.do(ChangeRuleSet(RS))
    diamond.do(ChangeRuleSet(move_rule(diamond.state.rule_sets["rs"], "c", "up")))
    assert ids(diamond.state.rule_sets["rs"]) == ["b", "c", "a"]
