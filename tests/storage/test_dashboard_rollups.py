"""The dashboard's rollups (runs.actions.rollups: run status counters, MetricRollup) kept on the
write path, and read back by runs.selectors.dashboard: statuses move with the runs, durations,
model latencies and gate decisions are counted once, deletes subtract, a rebuild agrees."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

import pytest

from runs import actions
from runs.actions import rollups
from runs.engine import commands as c
from runs.models import MetricRollup, Run, RunMetricRollup
from runs.presenters import histogram
from runs.selectors.dashboard import DashboardFilters, dashboard_data

pytestmark = pytest.mark.django_db

ALL = DashboardFilters(first=date(2000, 1, 1), last=date(2100, 1, 1))


def _run(workspace, workflow, run_id, *, decide=None, finish=None, model="m-1", duration=350):
    actions.do_start_run(workspace=workspace, workflow=workflow, actor="user:alice", run_id=run_id)

    def do(command, actor="user:alice"):
        actions.do_command(workspace=workspace, run_id=run_id, command=command, actor=actor)

    do(c.BeginStep(step_id="parse"))
    do(c.LogModelIO(direction="response", provider="p", model=model, duration_ms=duration,
                    usage={"inputTokens": 10, "outputTokens": 5}, cost={"amount": 0.25, "currency": "USD"},
                    step_id="parse"))  # fmt: skip
    do(c.CompleteStep(step_id="parse"))
    if decide:
        do(c.ResolveGate(step_id="review", gate="PAUSE_BEFORE", decision=decide), actor="user:bob")
    if finish == "failed":
        do(c.FailRun(reason="boom"))
    elif finish == "cancelled":
        do(c.CancelRun())
    return Run.objects.get(workspace=workspace, run_id=run_id)


def test_statuses_durations_latencies_and_decisions_are_counted(workspace, workflow):
    _run(workspace, workflow, "r1", decide="approved")
    _run(workspace, workflow, "r2", decide="rejected", finish="failed", model="m-2", duration=4000)
    _run(workspace, workflow, "r3", finish="cancelled")
    data = dashboard_data(workspace, ALL)
    (day,) = data.runs_by_day
    assert data.runs_by_day[day] == {"running": 1, "completed": 0, "failed": 1, "cancelled": 1}
    # two finished runs, their durations under their workflow
    assert sum(histogram.total(h) for h in data.run_latency.values()) == 2
    assert {label for _, label in data.run_latency} == {"wf-demo"}
    assert data.model_latency[(day, "m-1")] == {histogram.bucket_of(350): 2}
    assert data.model_latency[(day, "m-2")] == {histogram.bucket_of(4000): 1}
    # two runs' calls (on their shards' rows) summed exactly, whichever database adds them
    assert data.usage_by_model[(day, "m-1")] == [2, 30, {"USD": Decimal("0.50")}]
    assert data.decisions == {("review", "user:bob", "approved"): 1, ("review", "user:bob", "rejected"): 1}
    assert histogram.total(data.decision_latency["review"]) == 2
    # r1 waits at publish (PAUSE_AFTER is not reached yet): r3 was cancelled, r2 failed
    assert data.waiting_gates == sum(
        r.pending_gates for r in Run.objects.for_workspace(workspace) if r.status == "running"
    )
    assert data.workflows == ["wf-demo"] and data.models == ["m-1", "m-2"]
    assert rollups.rollups_match(workspace)


def test_filters_by_workflow_and_model(workspace, workflow):
    _run(workspace, workflow, "r1", decide="approved")
    _run(workspace, workflow, "r2", model="m-2")
    only = dashboard_data(workspace, DashboardFilters(first=ALL.first, last=ALL.last, model="m-2"))
    assert {m for _, m in only.model_latency} == {"m-2"} and {m for _, m in only.usage_by_model} == {"m-2"}
    assert sum(sum(v.values()) for v in only.runs_by_day.values()) == 2  # the run charts keep every run
    assert only.models == ["m-1", "m-2"]  # still every model to choose from
    none = dashboard_data(workspace, DashboardFilters(first=ALL.first, last=ALL.last, workflow="other"))
    assert not none.runs_by_day and not none.model_latency and not none.decisions and none.waiting_gates == 0
    assert none.models == ["m-1", "m-2"]
    later = dashboard_data(workspace, DashboardFilters(first=date(2100, 1, 2), last=date(2100, 1, 3)))
    assert not later.runs_by_day and not later.usage_by_model


def test_delete_subtracts_and_rebuild_restores(workspace, workflow, other_workspace):
    _run(workspace, workflow, "r1", decide="rejected", finish="failed")
    _run(workspace, workflow, "r2", decide="approved")
    _run(other_workspace, workflow, "theirs", decide="approved", finish="failed")
    actions.do_delete_run(workspace=workspace, run_id="r1")
    data = dashboard_data(workspace, ALL)
    assert data.decisions == {("review", "user:bob", "approved"): 1}
    assert not data.run_latency  # r2 still runs
    assert sum(c["failed"] for c in data.runs_by_day.values()) == 0
    assert rollups.rollups_match(workspace)

    MetricRollup.objects.filter(workspace=workspace).delete()  # damaged
    RunMetricRollup.objects.all().delete()
    assert not rollups.rollups_match(workspace)
    rollups.rebuild(workspace)
    assert rollups.rollups_match(workspace) and rollups.rollups_match(other_workspace) is False
    rollups.rebuild(other_workspace)
    assert rollups.rollups_match(other_workspace)
    assert dashboard_data(workspace, ALL).decisions == {("review", "user:bob", "approved"): 1}
