"""The monitoring dashboard's reads: every number comes from the rollups the write path keeps
(runs.actions.rollups: RunRollup, CostRollup, MetricRollup), grouped by the database over the
chosen run days. Bounded by days x labels x latency buckets, never by the runs or their events."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import DecimalField, Func, QuerySet, Sum

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


def _same(text: str) -> str:
    return text


class _Numeric(Func):
    """Decimal text as PostgreSQL's exact ``numeric``."""

    template = "CAST(%(expressions)s AS numeric)"
    output_field = DecimalField()


def _usage_rows(usage: QuerySet[CostRollup]) -> Iterable[tuple[Any, ...]]:
    """(run day, model, currency, calls, total tokens, cost) of the cost rollup rows. On PostgreSQL
    summed by the database over the other labels (steps, subjects, shards, prices: exact ``numeric``,
    as runs.selectors.ledger), so the rows are days x models x currencies; elsewhere every row."""
    if connection.vendor != "postgresql":
        return usage.values_list("run_day", "model", "currency", "calls", "total_tokens", "cost").iterator(
            chunk_size=5000
        )
    summed = usage.values("run_day", "model", "currency").annotate(
        n=Sum("calls"), tokens=Sum("total_tokens"), spent=Sum(_Numeric("cost"))
    )
    return summed.values_list("run_day", "model", "currency", "n", "tokens", "spent")


def dashboard_data(workspace: Workspace, filters: DashboardFilters) -> DashboardData:
    """What the dashboard shows for the workspace and filters (eight grouped reads)."""
    data = DashboardData()
    # labels as runs.fields spells them on PostgreSQL (the vendor looked up once: per row it was
    # half of this function's time at 1M runs)
    postgresql = connection.vendor == "postgresql"
    read = from_column if postgresql else _same
    spell = to_column if postgresql else _same
    days = {"run_day__gte": filters.first, "run_day__lte": filters.last}
    counters = RunRollup.objects.filter(workspace=workspace, **days)
    metrics = MetricRollup.objects.filter(workspace=workspace, **days)
    costs = CostRollup.objects.filter(workspace=workspace, **days)
    if filters.workflow:
        counters = counters.filter(workflow_id=spell(filters.workflow))
        metrics = metrics.filter(workflow_id=spell(filters.workflow))
        costs = costs.filter(workflow_id=spell(filters.workflow))

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
        held = data.run_latency.setdefault((row["run_day"], read(row["workflow_id"])), {})
        held[row["bucket"]] = held.get(row["bucket"], 0) + row["n"]

    models = metrics.filter(kind="model_latency")
    usage = costs
    if filters.model:
        models = models.filter(label=spell(filters.model))
        usage = usage.filter(model=spell(filters.model))
    for row in models.values("run_day", "label", "bucket").annotate(n=Sum("count")):
        held = data.model_latency.setdefault((row["run_day"], read(row["label"])), {})
        held[row["bucket"]] = held.get(row["bucket"], 0) + row["n"]

    # cost is decimal text (exact): summed per day, model and currency
    for day, model, currency, calls, tokens, cost in _usage_rows(usage):
        held = data.usage_by_model.setdefault((day, read(model)), [0, 0, {}])
        held[0] += calls
        held[1] += int(tokens)
        if currency:
            name = read(currency)
            held[2][name] = held[2].get(name, Decimal(0)) + Decimal(cost)

    waiting = RunRollup.objects.filter(workspace=workspace, waiting_gates__gt=0)
    if filters.workflow:
        waiting = waiting.filter(workflow_id=spell(filters.workflow))
    data.waiting_gates = int(waiting.aggregate(n=Sum("waiting_gates"))["n"] or 0)

    gates = metrics.filter(kind="decision_latency").values("label", "bucket").annotate(n=Sum("count"))
    for row in gates:
        held = data.decision_latency.setdefault(read(row["label"]), {})
        held[row["bucket"]] = held.get(row["bucket"], 0) + row["n"]
    decided = metrics.filter(kind="decision").values("label", "reviewer", "decision").annotate(n=Sum("count"))
    for row in decided:
        key = (read(row["label"]), read(row["reviewer"]), read(row["decision"]))
        data.decisions[key] = data.decisions.get(key, 0) + row["n"]

    data.workflows = sorted(
        {
            read(w)
            for w in RunRollup.objects.filter(workspace=workspace)
            .values_list("workflow_id", flat=True)
            .distinct()
        }
    )
    if filters.workflow or filters.model:
        named = {
            read(m)
            for m in CostRollup.objects.filter(workspace=workspace, **days)
            .values_list("model", flat=True)
            .distinct()
        }
    else:  # the usage read above already covers every row of the days: no second scan
        named = {model for _, model in data.usage_by_model}
    data.models = sorted(named - {""})
    return data
