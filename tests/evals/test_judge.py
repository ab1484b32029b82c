"""The LLM judge: its model calls are recorded runs' model_io through the response cache, so a
rescore with the same judge makes 0 provider requests; the calibration section reports it."""

from __future__ import annotations

import pytest
from django.test import Client

from evals import actions, presenters, scoring, selectors
from evals.runner import run_experiment
from runs.models import Event, Run

JUDGE = {
    "kind": "judge",
    "model": "claude-haiku-4-5",
    "prompt": "Answer PASS or FAIL: does this reply help? {output}",
}


@pytest.fixture
def judge_provider(settings, fake):
    settings.WORKBENCH_JUDGE_PROVIDERS = {
        "anthropic": {"base_url": fake.url, "api_key": "test-anthropic-key", "max_retries": 0}
    }


def test_judge_specs_and_verdicts():
    spec = scoring.check_evaluator(JUDGE)
    assert spec == {**JUDGE, "provider": "anthropic", "version": "1"}
    assert scoring.evaluator_label(spec) == "judge:claude-haiku-4-5@1"
    for bad in (
        {"kind": "judge"},
        {**JUDGE, "model": ""},
        {**JUDGE, "provider": "x"},
        {**JUDGE, "version": 2},
    ):
        with pytest.raises(scoring.EvaluatorError):
            scoring.check_evaluator(bad)
    assert scoring.judge_verdict("Echo: PASS or FAIL") == 1.0
    assert scoring.judge_verdict("fail, sorry") == 0.0
    assert scoring.judge_verdict("score: 0.25") == 0.25
    for bad_answer in ("maybe", "7"):
        with pytest.raises(scoring.EvaluatorError):
            scoring.judge_verdict(bad_answer)
    with pytest.raises(scoring.EvaluatorError):  # no judge to call: an error, not a score
        scoring.evaluate(spec, "x", "y", {})


@pytest.mark.django_db
def test_judge_calls_are_recorded_and_a_rescore_hits_the_cache(
    alice, workspace, gate_dataset, fake, judge_provider
):
    experiment = actions.do_create_experiment(
        workspace=workspace, dataset=gate_dataset, name="judged replay", change={}, evaluator=JUDGE
    )
    before = len(fake.requests)
    experiment = run_experiment(experiment.pk)
    assert experiment.status == "completed", experiment.error
    assert len(fake.requests) - before == 3  # the replay asks nobody; the judge asks once per item
    judged = fake.requests[before:]
    assert all(
        r["model"] == "claude-haiku-4-5" and "does this reply help?" in str(r["messages"]) for r in judged
    )
    items = list(experiment.items.all())
    assert [i.score for i in items] == [1.0] * 3, [i.score_detail for i in items]
    judge_runs = Run.unscoped.filter(workspace=workspace, workflow_id="evals-judge")
    assert judge_runs.count() == 3 and {r.status for r in judge_runs} == {"completed"}
    calls = Event.objects.filter(run__in=judge_runs, type="model_io")
    assert calls.filter(body__contains='"direction":"response"').count() == 3

    # rescore with the same judge: answered from the response cache, still recorded
    before = len(fake.requests)
    experiment = actions.do_rescore_experiment(experiment, evaluator=JUDGE)
    assert len(fake.requests) == before  # 0 provider requests
    assert [i.score for i in experiment.items.all()] == [1.0] * 3
    assert Run.unscoped.filter(workspace=workspace, workflow_id="evals-judge").count() == 6

    # another prompt is another judge: asked again
    other = {**JUDGE, "prompt": "Reply FAIL or PASS. {output}", "version": "2"}
    experiment = actions.do_rescore_experiment(experiment, evaluator=other)
    assert len(fake.requests) == before + 3
    assert [i.score for i in experiment.items.all()] == [0.0] * 3

    # the calibration section: each judge version against the reviewers' decisions (all approved)
    expected = {i["id"]: i for i in selectors.items_at(gate_dataset, experiment.as_of_revision)}
    rows = {r["evaluator"]: r for r in presenters.calibration(list(experiment.items.all()), expected)}
    assert rows["judge:claude-haiku-4-5@1"]["confusion"] == {"tp": 3, "fp": 0, "tn": 0, "fn": 0}
    assert rows["judge:claude-haiku-4-5@2"]["confusion"] == {"tp": 0, "fp": 0, "tn": 0, "fn": 3}
    client = Client()
    client.force_login(alice)
    page = client.get(f"/evals/experiments/{experiment.public_id}/")
    assert page.status_code == 200 and b"judge:claude-haiku-4-5@1" in page.content


@pytest.mark.django_db
def test_a_failing_judge_leaves_the_item_unscored(workspace, gate_dataset, fake, judge_provider):
    fake.script(
        {"error": (500, "api_error", "down")}, {"error": (500, "api_error", "down")}, {"text": "PASS"}
    )
    experiment = run_experiment(
        actions.do_create_experiment(
            workspace=workspace, dataset=gate_dataset, name="flaky judge", change={}, evaluator=JUDGE
        ).pk
    )
    assert experiment.status == "completed"
    scores = sorted((i.score is None, i.score) for i in experiment.items.all())
    assert [s for _, s in scores].count(None) == 2 and 1.0 in [s for _, s in scores]
    statuses = sorted(Run.unscoped.filter(workflow_id="evals-judge").values_list("status", flat=True))
    assert statuses == ["completed", "failed", "failed"]  # no judgement run is left running
    assert all(i.score_detail.get("error") for i in experiment.items.all() if i.score is None)
