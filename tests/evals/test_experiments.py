"""Experiments over a dataset of decided gates: replay (no provider request), a changed draft
model (re-executed from the draft step only), rescore (no task model call)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from evals import actions
from evals.runner import run_experiment
from runs.models import Event


def _costs(run) -> Decimal:
    total = Decimal(0)
    for event in Event.objects.filter(run=run, type="model_io"):
        cost = event.data.get("cost")
        if event.data.get("direction") == "response" and cost:
            total += Decimal(str(cost["amount"]))
    return total


@pytest.mark.django_db
def test_empty_change_replays_with_no_provider_request_and_scores_as_the_baseline(
    workspace, gate_dataset, fake
):
    before = len(fake.requests)
    experiment = actions.do_create_experiment(
        workspace=workspace, dataset=gate_dataset, name="replay", change={}
    )
    experiment = run_experiment(experiment.pk)
    assert len(fake.requests) == before  # 0 provider requests
    assert experiment.status == "completed", experiment.error
    items = list(experiment.items.all())
    assert [i.status for i in items] == ["completed"] * 3
    assert [i.score for i in items] == [1.0] * 3
    assert all(i.provider_calls == 0 and i.cache_hits == 2 for i in items)
    assert all(i.first_divergence_seq is None for i in items)
    summary = experiment.summary
    assert summary["providerCalls"] == 0 and summary["cacheHits"] == 6
    assert summary["meanScore"] == {"n": 3, "mean": 1.0, "low": 1.0, "high": 1.0}
    assert Decimal(summary["costDelta"]) == 0


@pytest.mark.django_db
def test_changed_draft_model_reexecutes_from_the_draft_step_only(workspace, gate_dataset, recorded, fake):
    baseline = run_experiment(
        actions.do_create_experiment(workspace=workspace, dataset=gate_dataset, name="base", change={}).pk
    )
    before = len(fake.requests)
    experiment = actions.do_create_experiment(
        workspace=workspace,
        dataset=gate_dataset,
        name="haiku drafts",
        change={"configurable": {"draftModel": "claude-haiku-4-5"}},
        baseline=baseline,
    )
    experiment = run_experiment(experiment.pk)
    assert experiment.status == "completed", experiment.error
    new_requests = fake.requests[before:]
    assert len(new_requests) == 3  # one draft call per item, nothing before the draft step
    assert {r["model"] for r in new_requests} == {"claude-haiku-4-5"}
    assert all(r["messages"][0]["content"].startswith("Reply to:") for r in new_requests)
    items = list(experiment.items.all())
    assert all(i.provider_calls == 1 and i.cache_hits == 1 for i in items)  # classify: from the record
    expected_delta = sum(
        (_costs(i.run) - _costs(r) for i, r in zip(items, sorted_sources(items, recorded), strict=True)),
        Decimal(0),
    )
    assert expected_delta < 0  # haiku is cheaper
    assert Decimal(experiment.summary["costDelta"]).quantize(Decimal("0.01")) == expected_delta.quantize(
        Decimal("0.01")
    )
    assert Decimal(experiment.summary["costDelta"]) == expected_delta  # to the last digit, in fact
    # the reply names its model: every item regressed against the baseline
    assert [i.score for i in items] == [0.0] * 3
    assert experiment.summary["baseline"]["regressions"] == 3
    draft_seq = min(Event.objects.filter(run=recorded[0], step_id="draft").values_list("seq", flat=True))
    assert all(i.first_divergence_seq is not None and i.first_divergence_seq >= draft_seq for i in items)


def sorted_sources(items, recorded):
    by_id = {r.run_id: r for r in recorded}
    return [by_id[i.source_run_id] for i in items]


@pytest.mark.django_db
def test_rescore_makes_no_task_model_call(workspace, gate_dataset, fake):
    experiment = actions.do_create_experiment(
        workspace=workspace,
        dataset=gate_dataset,
        name="haiku",
        change={"configurable": {"draftModel": "claude-haiku-4-5"}},
    )
    experiment = run_experiment(experiment.pk)
    assert [i.score for i in experiment.items.all()] == [0.0] * 3
    before = len(fake.requests)
    forks = Event.objects.filter(type="run_forked").count()
    experiment = actions.do_rescore_experiment(
        experiment, evaluator={"kind": "jsonpath", "paths": ["$.text"]}
    )
    assert len(fake.requests) == before  # 0 task model calls
    assert Event.objects.filter(type="run_forked").count() == forks  # nothing re-ran
    assert [i.score for i in experiment.items.all()] == [1.0] * 3
    assert experiment.rescored == 1
    history = experiment.items.first().score_detail["history"]
    assert history == {"exact": 0.0, "jsonpath:$.text": 1.0}


@pytest.mark.django_db
def test_a_fork_at_a_gate_nobody_decided_is_reported_waiting_not_approved(workspace, gate_dataset, fake):
    experiment = actions.do_create_experiment(
        workspace=workspace,
        dataset=gate_dataset,
        name="extra review",
        change={"configurable": {"extraReview": True}},
    )
    experiment = run_experiment(experiment.pk)
    items = list(experiment.items.all())
    assert [i.status for i in items] == ["waiting"] * 3  # nothing decided for a person
    assert all(i.score is None for i in items)
    assert experiment.summary["statuses"] == {"waiting": 3}
    assert experiment.summary["meanScore"]["n"] == 0
    assert not Event.objects.filter(
        run__in=[i.run for i in items], type="human_gate_resolved", body__contains="extra"
    )
