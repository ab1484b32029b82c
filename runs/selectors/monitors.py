"""What a monitor measures, read from the rollups the write path keeps (runs.actions.rollups:
CostRollup, RunRollup, MetricRollup), never from a scan of events. Bounded by run days x labels
x latency buckets, like the dashboard's reads (runs.selectors.dashboard).

Gates waiting longer than N minutes is the one exception: the rollups count waiting gates but not
since when, so it reads the projections of the runs that wait (the inbox's partial index
``run_ws_waiting``: bounded by the waiting runs, not by all runs or their events).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal, InvalidOperation

from django.db import connection
from django.db.models import QuerySet, Sum

from runs.engine.state import RunState
from runs.fields import to_column
from runs.models import (
    CostRollup,
    MetricRollup,
    Monitor,
    MonitorMetric,
    MonitorSample,
    Run,
    RunRollup,
    RunStatus,
)
from runs.presenters import histogram
from runs.protocol.timestamps import to_datetime
from runs.protocol.values import loads

# Cost monitors read the calls of runs started at most this many days before the call's day:
# the cost rollups are keyed by the run's start day, so the read is a range of their index.
COST_LOOKBACK_DAYS = 31
REJECTED = "rejected"
WAITING_RUNS_READ = 10_000  # gates_waiting: the waiting runs read at most (the oldest first)


class MonitorNotFound(Exception):
    """No such monitor in this workspace."""


@dataclass(frozen=True)
class Reading:
    """A monitor's value now (None: nothing to measure yet) and the run days it read (the
    dashboard range its notification links to)."""

    value: float | None
    first: date
    last: date


def monitors_of(workspace) -> QuerySet[Monitor]:
    return Monitor.objects.filter(workspace=workspace)


def get_monitor(workspace, monitor_id: object) -> Monitor:
    if not isinstance(monitor_id, str) or len(monitor_id) > 40:
        raise MonitorNotFound("no such monitor")
    monitor = Monitor.objects.filter(workspace=workspace, public_id=monitor_id).first()
    if monitor is None:
        raise MonitorNotFound("no such monitor")
    return monitor


def history_of(monitors: list[Monitor], *, per_monitor: int = 10) -> dict[int, list]:
    """The last state changes of each monitor (one query per monitor; a page lists few)."""
    return {m.pk: list(m.changes.all()[:per_monitor]) for m in monitors}


def _spell(text: str) -> str:
    return to_column(text) if connection.vendor == "postgresql" else text


def _window(monitor: Monitor, today: date) -> tuple[date, date]:
    span = max(1, min(monitor.window_days, 366))
    return today - timedelta(days=span - 1), today


def _decimal(text: str) -> Decimal:
    try:
        return Decimal(text)
    except (InvalidOperation, TypeError):
        return Decimal(0)


# ------------------------------------------------------------------------------------------
# cost


def _cost_rows(monitor: Monitor, first_call_day: date, today: date) -> QuerySet[CostRollup]:
    rows = CostRollup.objects.filter(
        workspace_id=monitor.workspace_id,
        run_day__gte=first_call_day - timedelta(days=COST_LOOKBACK_DAYS),
        run_day__lte=today,
        call_day__gte=first_call_day.isoformat(),
        call_day__lte=today.isoformat(),
        currency=_spell(monitor.currency),
    )
    if monitor.workflow_id:
        rows = rows.filter(workflow_id=_spell(monitor.workflow_id))
    if monitor.model:
        rows = rows.filter(model=_spell(monitor.model))
    if monitor.prompt:
        rows = rows.filter(prompt=_spell(monitor.prompt))
    return rows


def cost_by_day(monitor: Monitor, first: date, today: date) -> dict[date, Decimal]:
    """The cost of the calls made on each day ``first`` .. ``today`` in the monitor's currency
    (decimal text summed exactly, as the dashboard does)."""
    return _cost_read(monitor, first, today)[0]


def _cost_read(monitor: Monitor, first: date, today: date) -> tuple[dict[date, Decimal], date]:
    """:func:`cost_by_day` and the first day the link's range must start on: the start day of
    the earliest run that made those calls (the dashboard counts runs by the day they started),
    else ``first`` (no call: the days measured)."""
    out: dict[date, Decimal] = {}
    earliest = first
    for run_day, call_day, cost in (
        _cost_rows(monitor, first, today).values_list("run_day", "call_day", "cost").iterator(chunk_size=5000)
    ):
        day = date.fromisoformat(call_day)
        out[day] = out.get(day, Decimal(0)) + _decimal(cost)
        earliest = min(earliest, run_day)
    return out, earliest


def cost_today(monitor: Monitor, now: datetime) -> Reading:
    """Today's spend; its range: today, back to the start day of the earliest run that spent."""
    today = now.date()
    by_day, earliest = _cost_read(monitor, today, today)
    return Reading(float(by_day.get(today, Decimal(0))), earliest, today)


def cost_last_hour(monitor: Monitor, now: datetime) -> tuple[Reading, Decimal]:
    """The spend over the last hour: the cost the rollups hold now for the days since the sample
    taken an hour ago (the newest at least an hour old, else the oldest kept), minus that
    sample's total. Answers the reading (None when there is no sample yet) and today's total (the
    next sample). Its range: the days measured, back to the start day of the earliest run that
    spent in them."""
    today = now.date()
    samples = MonitorSample.objects.filter(monitor=monitor)
    base = samples.filter(at__lte=now - timedelta(hours=1)).order_by("-at", "-id").first()
    if base is None:
        base = samples.filter(at__lte=now).order_by("at", "id").first()
    first = min(base.day, today) if base is not None else today
    by_day, earliest = _cost_read(monitor, first, today)
    total_today = by_day.get(today, Decimal(0))
    if base is None:
        return Reading(None, earliest, today), total_today
    spent = sum(by_day.values(), Decimal(0)) - _decimal(base.total)
    return Reading(float(max(spent, Decimal(0))), earliest, today), total_today


# ------------------------------------------------------------------------------------------
# latency, errors, decisions


def _metrics(monitor: Monitor, first: date, last: date, kind: str) -> QuerySet[MetricRollup]:
    rows = MetricRollup.objects.filter(
        workspace_id=monitor.workspace_id, kind=kind, run_day__gte=first, run_day__lte=last
    )
    if monitor.workflow_id:
        rows = rows.filter(workflow_id=_spell(monitor.workflow_id))
    return rows


def _p95_seconds(rows: QuerySet[MetricRollup]) -> float | None:
    merged = {row["bucket"]: row["n"] for row in rows.values("bucket").annotate(n=Sum("count"))}
    ms = histogram.percentile(merged, 95)
    return None if ms is None else ms / 1000


def latency_p95(monitor: Monitor, now: datetime) -> Reading:
    """Run durations p95 (of a workflow), or model latency p95 when the monitor names a model."""
    first, last = _window(monitor, now.date())
    if monitor.model:
        rows = _metrics(monitor, first, last, "model_latency").filter(label=_spell(monitor.model))
    else:
        rows = _metrics(monitor, first, last, "run_latency")
    return Reading(_p95_seconds(rows), first, last)


def decision_p95(monitor: Monitor, now: datetime) -> Reading:
    first, last = _window(monitor, now.date())
    rows = _metrics(monitor, first, last, "decision_latency")
    if monitor.gate:
        rows = rows.filter(label=_spell(monitor.gate))
    return Reading(_p95_seconds(rows), first, last)


def rejection_rate(monitor: Monitor, now: datetime) -> Reading:
    first, last = _window(monitor, now.date())
    rows = _metrics(monitor, first, last, "decision")
    if monitor.gate:
        rows = rows.filter(label=_spell(monitor.gate))
    total = rejected = 0
    for decision, n in rows.values_list("decision").annotate(n=Sum("count")):
        total += n
        if decision == REJECTED:
            rejected += n
    return Reading(100 * rejected / total if total else None, first, last)


def error_rate(monitor: Monitor, now: datetime) -> Reading:
    first, last = _window(monitor, now.date())
    rows = RunRollup.objects.filter(workspace_id=monitor.workspace_id, run_day__gte=first, run_day__lte=last)
    if monitor.workflow_id:
        rows = rows.filter(workflow_id=_spell(monitor.workflow_id))
    sums = rows.aggregate(completed=Sum("completed"), failed=Sum("failed"), cancelled=Sum("cancelled"))
    failed = int(sums["failed"] or 0)
    finished = failed + int(sums["completed"] or 0) + int(sums["cancelled"] or 0)
    return Reading(100 * failed / finished if finished else None, first, last)


def gates_waiting(monitor: Monitor, now: datetime) -> Reading:
    """Pending gates waiting more than ``minutes`` (of a workflow, of one gate step): since their
    request, or for a gate implied by the policy since the run last changed (a lower bound)."""
    waiting = Run.objects.filter(
        workspace_id=monitor.workspace_id, pending_gates__gt=0, status=RunStatus.RUNNING
    )
    if monitor.workflow_id:
        waiting = waiting.filter(workflow_id=monitor.workflow_id)
    before = now - timedelta(minutes=max(0, monitor.minutes))
    count = 0
    oldest = now.date()
    rows = waiting.order_by("started_at").values_list("started_at", "updated_at", "state")
    for started, changed, state in rows[:WAITING_RUNS_READ]:
        for gate in RunState.from_json(loads(state)).pending_gates():
            if monitor.gate and gate.get("stepId") != monitor.gate:
                continue
            # a gate implied by the step's policy has no request: it waits at least since the
            # run last changed (the change that made it decidable, or a later one)
            since = (to_datetime(gate["requestedAt"]) if gate.get("requestedAt") else None) or changed
            if since <= before:
                count += 1
                oldest = min(oldest, started.date())
    return Reading(float(count), oldest, now.date())


MEASURES = {
    MonitorMetric.COST_DAY: cost_today,
    MonitorMetric.LATENCY_P95: latency_p95,
    MonitorMetric.ERROR_RATE: error_rate,
    MonitorMetric.GATES_WAITING: gates_waiting,
    MonitorMetric.DECISION_P95: decision_p95,
    MonitorMetric.REJECTION_RATE: rejection_rate,
}
