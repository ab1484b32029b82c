"""The monitoring dashboard's reads: every number comes from the rollups the write path keeps
(runs.actions.rollups: RunRollup, CostRollup, MetricRollup), grouped by the database over the
chosen run days. Bounded by days x labels x latency buckets, never by the runs or their events."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import Sum

from runs.fields import from_column, to_column
from runs.models import CostRollup, MetricRollup, RunRollup, Workspace


@dataclass(frozen=True)
class DashboardFilters:
    """Runs started on the UTC days ``first`` .. ``last``, of one workflow ("" all), and for the
    model charts one model ("" all)."""

    first: date
    last: date
    workflow: str = ""
    model: str = ""


@dataclass
class DashboardData:
    """Plain data for runs.presenters.dashboard (no model instances)."""

    # {day: {"running": n, "completed": n, "failed": n, "cancelled": n}}
    runs_by_day: dict[date, dict[str, int]] = field(default_factory=dict)
    # {(day, workflow): {bucket: n}}: finished runs' durations
    run_latency: dict[tuple[date, str], dict[int, int]] = field(default_factory=dict)
    # {(day, model): {bucket: n}}: model responses' durations
    model_latency: dict[tuple[date, str], dict[int, int]] = field(default_factory=dict)
    # {(day, model): [calls, total tokens, {currency: cost}]}
    usage_by_model: dict[tuple[date, str], list[Any]] = field(default_factory=dict)
    waiting_gates: int = 0  # now, whatever the days
    # {gate step: {bucket: n}}: time from the request to the decision
    decision_latency: dict[str, dict[int, int]] = field(default_factory=dict)
    # {(gate step, reviewer, decision): n}
    decisions: dict[tuple[str, str, str], int] = field(default_factory=dict)
    workflows: list[str] = field(default_factory=list)  # to choose from
    models: list[str] = field(default_factory=list)


def _read(text: str) -> str:
    return from_column(text) if connection.vendor == "postgresql" else text


def _spell(text: str) -> str:
    return to_column(text) if connection.vendor == "postgresql" else text


def dashboard_data(workspace: Workspace, filters: DashboardFilters) -> DashboardData:
    """What the dashboard shows for the workspace and filters (eight grouped reads)."""
    data = DashboardData()
    days = {"run_day__gte": filters.first, "run_day__lte": filters.last}
    counters = RunRollup.objects.filter(workspace=workspace, **days)
    metrics = MetricRollup.objects.filter(workspace=workspace, **days)
    costs = CostRollup.objects.filter(workspace=workspace, **days)
    if filters.workflow:
        counters = counters.filter(workflow_id=_spell(filters.workflow))
        metrics = metrics.filter(workflow_id=_spell(filters.workflow))
        costs = costs.filter(workflow_id=_spell(filters.workflow))

    row: Any  # the rows of several differently shaped queries below
    held: Any
    for row in counters.values("run_day").annotate(
        runs=Sum("runs"), completed=Sum("completed"), failed=Sum("failed"), cancelled=Sum("cancelled")
    ):
        done = row["completed"] + row["failed"] + row["cancelled"]
        data.runs_by_day[row["run_day"]] = {
            "running": row["runs"] - done,
            "completed": row["completed"],
            "failed": row["failed"],
            "cancelled": row["cancelled"],
        }

    latency = metrics.filter(kind="run_latency").values("run_day", "workflow_id", "bucket")
    for row in latency.annotate(n=Sum("count")):
        held = data.run_latency.setdefault((row["run_day"], _read(row["workflow_id"])), {})
        held[row["bucket"]] = held.get(row["bucket"], 0) + row["n"]

    models = metrics.filter(kind="model_latency")
    usage = costs
    if filters.model:
        models = models.filter(label=_spell(filters.model))
        usage = usage.filter(model=_spell(filters.model))
    for row in models.values("run_day", "label", "bucket").annotate(n=Sum("count")):
        held = data.model_latency.setdefault((row["run_day"], _read(row["label"])), {})
        held[row["bucket"]] = held.get(row["bucket"], 0) + row["n"]

    # cost is decimal text (exact): summed here per day, model and currency (few rows)
    for day, model, currency, calls, tokens, cost in usage.values_list(
        "run_day", "model", "currency", "calls", "total_tokens", "cost"
    ).iterator(chunk_size=5000):
        held = data.usage_by_model.setdefault((day, _read(model)), [0, 0, {}])
        held[0] += calls
        held[1] += int(tokens)
        if currency:
            name = _read(currency)
            held[2][name] = held[2].get(name, Decimal(0)) + Decimal(cost)

    waiting = RunRollup.objects.filter(workspace=workspace, waiting_gates__gt=0)
    if filters.workflow:
        waiting = waiting.filter(workflow_id=_spell(filters.workflow))
    data.waiting_gates = int(waiting.aggregate(n=Sum("waiting_gates"))["n"] or 0)

    gates = metrics.filter(kind="decision_latency").values("label", "bucket").annotate(n=Sum("count"))
    for row in gates:
        held = data.decision_latency.setdefault(_read(row["label"]), {})
        held[row["bucket"]] = held.get(row["bucket"], 0) + row["n"]
    decided = metrics.filter(kind="decision").values("label", "reviewer", "decision").annotate(n=Sum("count"))
    for row in decided:
        key = (_read(row["label"]), _read(row["reviewer"]), _read(row["decision"]))
        data.decisions[key] = data.decisions.get(key, 0) + row["n"]

    data.workflows = sorted(
        {
            _read(w)
            for w in RunRollup.objects.filter(workspace=workspace)
            .values_list("workflow_id", flat=True)
            .distinct()
        }
    )
    data.models = sorted(
        {
            _read(m)
            for m in CostRollup.objects.filter(workspace=workspace, **days)
            .values_list("model", flat=True)
            .distinct()
        }
        - {""}
    )
    return data
