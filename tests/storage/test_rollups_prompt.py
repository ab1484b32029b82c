"""The cost rollups file each model call under the prompt version it was made with
(payload["workbench.prompt"]), and rows written before that label existed still add up."""

from __future__ import annotations

import io
from decimal import Decimal

import pytest
from django.core.management import call_command

from runs import actions
from runs.actions import rollups
from runs.models import CostRollup
from runs.protocol.telemetry import prompt_label
from runs.selectors.ledger import ledger_from_rollups
from tests.storage.test_rollups import ALL_DAYS, WORKFLOW

pytestmark = pytest.mark.django_db


def _call(n: int, *, prompt: object = None, cost: float = 0.25, tokens: int = 100) -> dict:
    event = {
        "id": f"evt_p{n}",
        "runId": "r1",
        "ts": "2026-03-01T10:00:00.000Z",
        "type": "model_io",
        "direction": "response",
        "provider": "openai",
        "model": "m-1",
        "stepId": "plan",
        "usage": {"inputTokens": tokens, "outputTokens": 0},
        "cost": {"amount": cost, "currency": "USD"},
    }
    if prompt is not None:
        event["payload"] = {"workbench.prompt": prompt}
    return event


def _prompts(acc) -> dict:
    return {k: (t.event_count, t.total_tokens, dict(t.cost)) for k, t in acc.by_prompt.items()}


@pytest.mark.parametrize(
    ("ref", "label"),
    [
        ({"name": "greet", "version": 3}, "greet@3"),
        ({"name": "a@b", "version": 12}, "a@b@12"),
        ({"name": "greet", "version": True}, ""),
        ({"name": "greet", "version": "3"}, ""),
        ({"name": None, "version": 3}, ""),
        ("greet@3", ""),
        (None, ""),
    ],
)
def test_prompt_label(ref, label):
    payload = {} if ref is None else {"workbench.prompt": ref}
    assert prompt_label({"payload": payload}) == label
    assert prompt_label({"payload": "not a dict"}) == ""


def test_calls_are_counted_under_their_prompt_version(workspace):
    actions.do_start_run(workspace=workspace, workflow=WORKFLOW, run_id="r1")
    events = [
        _call(1, prompt={"name": "greet", "version": 2}),
        _call(2, prompt={"name": "greet", "version": 2}, cost=0.5, tokens=50),
        _call(3, prompt={"name": "greet", "version": 10}),
        _call(4),
    ]
    actions.do_append_events(workspace=workspace, run_id="r1", events=events)
    assert sorted(CostRollup.objects.filter(workspace=workspace).values_list("prompt", "calls")) == [
        ("", 1),
        ("greet@10", 1),
        ("greet@2", 2),
    ]
    acc = ledger_from_rollups(workspace, **ALL_DAYS)
    assert _prompts(acc) == {"greet@2": (2, 150, {"USD": 0.75}), "greet@10": (1, 100, {"USD": 0.25})}
    extra = acc.breakdown_result()
    assert [row["key"] for row in extra["byPrompt"]] == ["greet@2", "greet@10"]  # by version number
    assert extra["unattributed"]["byPrompt"]["eventCount"] == 1  # the call without a prompt
    assert acc.exact_cost_by_currency() == {"USD": Decimal("1.25")}
    assert rollups.rollups_match(workspace)


def test_rows_written_before_the_prompt_label_still_add_up(workspace):
    """A row from before the label (prompt "", hashed without it) counts in every total; a new call
    without a prompt adds to it; ``rebuild_rollups`` files the old calls under their version."""
    actions.do_start_run(workspace=workspace, workflow=WORKFLOW, run_id="r1")
    actions.do_append_events(
        workspace=workspace, run_id="r1", events=[_call(1, prompt={"name": "greet", "version": 1})]
    )
    (row,) = CostRollup.objects.filter(workspace=workspace)
    old_key = rollups._key_hash(
        (row.run_day, row.shard, *[getattr(row, c) for c in rollups._LABELS[:-1]], "")
    )
    CostRollup.objects.filter(pk=row.pk).update(prompt="", key_hash=old_key)  # as the old code wrote it

    actions.do_append_events(workspace=workspace, run_id="r1", events=[_call(2)])
    (row,) = CostRollup.objects.filter(workspace=workspace)  # the same row, not a twin
    assert (row.prompt, row.calls, Decimal(row.cost)) == ("", 2, Decimal("0.5"))
    acc = ledger_from_rollups(workspace, **ALL_DAYS)
    assert (acc.totals.event_count, acc.exact_cost_by_currency()) == (2, {"USD": Decimal("0.5")})
    assert acc.by_prompt == {} and acc.breakdown_result()["byPrompt"] == []

    assert not rollups.rollups_match(workspace)
    call_command("rebuild_rollups", "--workspace", workspace.slug, stdout=io.StringIO())
    assert rollups.rollups_match(workspace)
    acc = ledger_from_rollups(workspace, **ALL_DAYS)
    assert _prompts(acc) == {"greet@1": (1, 100, {"USD": 0.25})}
    assert (acc.totals.event_count, acc.exact_cost_by_currency()) == (2, {"USD": Decimal("0.5")})
