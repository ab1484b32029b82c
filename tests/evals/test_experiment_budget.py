"""A run budget over an experiment: the fork of each dataset item whose next model call would pass
its budget pauses at a ``budget`` gate before the call; the loopback fake counts no request until a
person raises the limit (the decision names it), then that fork goes on and makes its call; a
person stopping it there ends it with BUDGET_EXCEEDED, still without a call. Every pause, raise
and stop is in the budget trail."""

from __future__ import annotations

from decimal import Decimal

import pytest

from evals import actions
from evals.runner import run_experiment
from runs.actions import budgets
from runs.actions.gatepolicy import do_stop_at_budget
from runs.execution.replay import run_fork
from runs.models import Event, ForkStatus, RunFork
from runs.models_budgets import BudgetRecord
from runs.protocol.validate import validate_event
from runs.protocol.values import loads
from runs.selectors.budgets import run_spend
from tests.evals.pipeline import WORKFLOW


def _events(run) -> list[dict]:
    return [loads(b) for b in Event.objects.filter(run=run).order_by("seq").values_list("body", flat=True)]


def _budget_gates(run) -> list[dict]:
    return [
        e
        for e in _events(run)
        if e["type"].startswith("human_gate_") and e.get("correlationId") == "checkpoint:budget"
    ]


@pytest.mark.django_db(transaction=True)
def test_an_experiment_pauses_each_fork_at_its_budget_gate_until_a_person_raises_it(
    workspace, gate_dataset, recorded, fake
):
    # each source run spent its classify call, then its draft call; a fork of the draft step starts
    # with the classify call's cost (its history): its budget is one and a half classify calls, so
    # the draft call (about one more classify call) would pass it
    classify = run_spend(recorded[0], "USD") - Decimal(
        str(
            next(
                e["cost"]["amount"]
                for e in reversed(_events(recorded[0]))
                if e["type"] == "model_io" and e["direction"] == "response"
            )
        )
    )
    assert classify > 0
    limit = (classify * Decimal("1.5")).quantize(Decimal("0.000001"))
    budgets.do_set_budgets(
        workspace=workspace, monthly_cap=None, run_default=None, workflows={WORKFLOW["id"]: limit}, actor="t"
    )
    before = len(fake.requests)
    experiment = actions.do_create_experiment(
        workspace=workspace,
        dataset=gate_dataset,
        name="haiku drafts",
        change={"configurable": {"draftModel": "claude-haiku-4-5"}},
    )
    experiment = run_experiment(experiment.pk)
    items = list(experiment.items.order_by("item_key"))
    assert [i.status for i in items] == ["waiting"] * 3  # each fork waits at its budget gate
    assert len(fake.requests) == before  # and nothing was called
    forks = [RunFork.objects.get(run=i.run) for i in items]
    assert all(f.status == ForkStatus.WAITING and f.provider_calls == 0 for f in forks)
    for item in items:
        (gate,) = _budget_gates(item.run)
        validate_event(gate, "event")
        assert gate["gate"] == "CHECKPOINT" and gate["stepId"] == "draft"
        assert "would pass it" in gate["reason"] and "(workflow budget)" in gate["reason"]
    paused = BudgetRecord.objects.filter(workspace=workspace, kind="paused")
    assert sorted(paused.values_list("run_id", flat=True)) == sorted(i.run_id_text for i in items)

    # a person raises the first fork's limit: its gate is approved naming it, the fork goes on
    raised = budgets.do_set_run_budget(
        workspace=workspace, run_id=items[0].run_id_text, limit="1", actor="user:alice"
    )
    assert raised["resumed"] is True
    forks[0].refresh_from_db()
    assert forks[0].status == ForkStatus.PENDING  # handed back to the executor
    assert len(fake.requests) == before
    done = run_fork(forks[0].pk)
    assert done.status == ForkStatus.COMPLETED, done.error_message
    assert len(fake.requests) == before + 1  # the draft call, once the limit was raised
    assert fake.requests[-1]["model"] == "claude-haiku-4-5"
    request, decision = _budget_gates(items[0].run)
    assert decision["decision"] == "approved" and "Budget raised to USD 1" in decision["note"]
    assert done.run.status == "completed"  # the review gate: its source's recorded decision
    assert (
        sum(1 for e in _events(items[0].run) if e["type"] == "model_io" and e["direction"] == "request") == 2
    )

    # a person stops the second fork at its budget: it ends without a call
    do_stop_at_budget(workspace=workspace, run_id=items[1].run_id_text, actor="user:alice")
    stopped = run_fork(forks[1].pk)
    assert stopped.status == ForkStatus.FAILED and stopped.error_code == "BUDGET_EXCEEDED"
    assert "Stopped at its budget by user:alice" in stopped.error_message
    assert len(fake.requests) == before + 1

    # the third still waits, and has called nothing
    forks[2].refresh_from_db()
    assert forks[2].status == ForkStatus.WAITING and forks[2].provider_calls == 0
    # the items record what their forks did once a person decided; the summary follows
    items = list(experiment.items.order_by("item_key"))
    assert [i.status for i in items] == ["completed", "failed", "waiting"]
    assert items[0].provider_calls == 1 and items[0].score is not None
    assert "BUDGET_EXCEEDED" in items[1].error and items[2].provider_calls == 0
    experiment.refresh_from_db()
    assert experiment.summary["statuses"] == {"completed": 1, "failed": 1, "waiting": 1}
    trail = BudgetRecord.objects.filter(workspace=workspace).exclude(kind="settings")
    assert sorted(trail.values_list("kind", flat=True)) == ["paused"] * 3 + ["raised", "stopped"]
