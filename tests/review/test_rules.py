"""review.rules (pure) and the listener that applies them after each commit."""

from __future__ import annotations

import pytest

from review.rules import RunFacts, in_sample, matches, parse_rules


def facts(**kw):
    base = dict(
        run_id="r1", workflow_id="wf", status="running", finished=False, rejected_gates=0, had_error=False
    )
    return RunFacts(**{**base, **kw})


def test_rules_match_rejections_errors_cost_and_a_stable_sample():
    assert matches({"rejectedGates": True}, facts(rejected_gates=1))
    assert not matches({"rejectedGates": True}, facts())
    assert matches({"errors": True}, facts(had_error=True))
    cost = {"costAbove": {"USD": "0.5"}}
    assert matches(cost, facts(finished=True, status="completed", cost={"USD": "0.51"}))
    assert not matches(cost, facts(finished=True, status="completed", cost={"USD": "0.50"}))
    assert not matches(cost, facts(cost={"USD": "9"}))  # not finished yet
    assert not matches({"errors": True, "workflowId": "other"}, facts(had_error=True))
    chosen = [i for i in range(1000) if in_sample(f"run_{i}", 10)]
    assert 60 < len(chosen) < 140 and chosen == [i for i in range(1000) if in_sample(f"run_{i}", 10)]
    assert matches({"samplePercent": 100}, facts(finished=True, status="completed"))


def test_rules_are_checked():
    assert parse_rules({"costAbove": {"USD": 1}})["costAbove"] == {"USD": "1"}
    for bad in ({"nope": 1}, {"samplePercent": 0}, {"costAbove": {"USD": "x"}}, {"errors": "yes"}):
        with pytest.raises(ValueError):
            parse_rules(bad)


@pytest.mark.django_db(transaction=True)
def test_a_rejected_gate_and_a_failed_run_join_their_queues(workspace, make_run):
    from review.actions import do_create_queue
    from review.models import Item
    from runs import actions
    from runs.engine import commands as c

    rejected = do_create_queue(
        workspace=workspace,
        name="Rejected",
        score_configs=[{"name": "ok", "dataType": "BOOLEAN"}],
        rules={"rejectedGates": True},
    )
    errors = do_create_queue(
        workspace=workspace,
        name="Errors",
        score_configs=[{"name": "ok", "dataType": "BOOLEAN"}],
        rules={"errors": True},
    )
    make_run("run_0")
    make_run("run_1")
    assert Item.objects.count() == 0
    actions.do_command(
        workspace=workspace,
        run_id="run_0",
        command=c.ResolveGate("review", "PAUSE_BEFORE", "rejected"),
        actor="u",
    )
    actions.do_command(workspace=workspace, run_id="run_1", command=c.RecordError("boom"), actor="u")
    assert list(rejected.items.values_list("run__run_id", flat=True)) == ["run_0"]
    assert list(errors.items.values_list("run__run_id", flat=True)) == ["run_1"]
