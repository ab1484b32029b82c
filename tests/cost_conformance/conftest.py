"""The golden cases (cases.json) and what every way in needs: loopback provider fakes, tasks run at once."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.openai_api import FakeOpenAI
from tests.task_backends import IMMEDIATE, task_backend

CASES: list[dict[str, Any]] = json.loads((Path(__file__).parent / "cases.json").read_text())["cases"]


def cases_through(way: str) -> list[Any]:
    """The cases that go through ``way`` (the others say in ``notThrough`` why they cannot)."""
    return [pytest.param(case, id=case["id"]) for case in CASES if way not in case["notThrough"]]


def workspace_row(case: dict[str, Any]) -> dict[str, Any] | None:
    price = case["price"]
    return price["row"] if price["source"] == "workspace" else None


def assert_cost(case: dict[str, Any], cost: dict[str, Any] | None, why: str | None) -> None:
    """The recorded ``model_io.cost`` equals the case's expected cost (to the 12th decimal, the
    ledger's precision), in its currency. An unknown cost is absent and its reason is required: the
    case names it (``expected.why``) and the way recorded it (``why``: the pricing note, "no
    cache-read price for ..."); only a call without usage records none (nothing was priced: the
    ledger says "no usage reported")."""
    expected = case["expected"]
    if expected["cost"] is None:
        assert expected.get("why"), f"{case['id']}: an unknown cost must name its reason (expected.why)"
        assert cost is None, f"{case['id']}: priced {cost}, expected unknown ({expected['why']})"
        if expected["usage"] is None:
            assert why is None, (case["id"], why)
            return
        assert why is not None, f"{case['id']}: unpriced without a recorded reason ({expected['why']})"
        assert why.startswith(expected["why"]), (case["id"], why)
        return
    assert cost is not None, f"{case['id']}: not priced ({why}), expected {expected['cost']}"
    assert cost["currency"] == expected["currency"], case["id"]
    got = Decimal(repr(cost["amount"]))
    assert abs(got - Decimal(expected["cost"])) < Decimal("1e-12"), (case["id"], got, expected["cost"])


def assert_usage(case: dict[str, Any], usage: dict[str, Any] | None, *, reasoning: bool = True) -> None:
    """Input, output and cached tokens as the conventions count them (unknown stays absent)."""
    expected = case["expected"]["usage"]
    if expected is None:
        assert usage is None, f"{case['id']}: usage {usage} recorded, the provider reported none"
        return
    assert usage is not None, case["id"]
    for key in ("inputTokens", "outputTokens", "cachedInputTokens"):
        assert (usage.get(key) or 0) == expected[key], (case["id"], key, usage)
    if reasoning and expected.get("reasoningTokens"):
        assert usage.get("reasoningTokens") == expected["reasoningTokens"], (case["id"], usage)


@pytest.fixture
def immediate_tasks():
    with task_backend(IMMEDIATE) as backend:
        yield backend


@pytest.fixture
def anthropic_fake():
    with FakeAnthropic() as fake:
        yield fake


@pytest.fixture
def openai_fake():
    with FakeOpenAI() as fake:
        yield fake
