"""The monitoring dashboard as pure view data: chart geometry for server-rendered SVG, and each
chart's numbers as a table (templates/runs/dashboard.html draws both).

Why SVG drawn on the server rather than a charting library: the pages' CSP is strict (nonces, no
CDN, no inline style), so a library would have to be vendored with its own stylesheet and run
after load; the page would need JavaScript to show numbers the server already has. SVG from the
server is a few kB, shows at once with no script, takes its colours from CSS custom properties
(dark mode for free), carries a ``<title>`` per bar or point (hover) and a focusable element per
mark (keyboard), and is testable here without a browser.

Input is the selector's plain data (runs.selectors.dashboard.DashboardData, duck-typed: this
package imports nothing above it). Latency percentiles come from merged histograms
(runs.presenters.histogram), never from the events.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from runs.presenters import histogram, numbers

STATUSES = ("completed", "failed", "cancelled", "running")
PERCENTILES = (50, 95, 99)
MAX_SERIES = 6  # series drawn per chart; the rest are summed as "other" (every one is in the table)
MAX_DAYS = 92  # days drawn; a longer range keeps its newest days in the chart, all in the table

WIDTH = 720
LEFT = 64
RIGHT = 16
TOP = 12
PLOT_H = 160
BOTTOM = 28


@dataclass
class Mark:
    """A bar (w, h > 0) or a point (w = h = 0) of a series, with its hover text."""

    x: float
    y: float
    w: float
    h: float
    series: int
    text: str


@dataclass
class Line:
    series: int
    points: str  # "x,y x,y ..." for a polyline


@dataclass
class Table:
    caption: str
    columns: list[str]
    rows: list[list[str]]


@dataclass
class Chart:
    key: str
    title: str
    summary: str  # what the chart shows, for screen readers
    width: int = WIDTH
    height: int = TOP + PLOT_H + BOTTOM
    marks: list[Mark] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)
    x_ticks: list[tuple[float, str]] = field(default_factory=list)
    y_ticks: list[tuple[float, str]] = field(default_factory=list)
    labels: list[tuple[float, str]] = field(default_factory=list)  # horizontal bars: (y, label)
    legend: list[tuple[int, str]] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    base: float = TOP + PLOT_H
    note: str = ""

    @property
    def empty(self) -> bool:
        return not self.marks


def calendar(first: date, last: date) -> list[date]:
    """The days drawn: ``first`` .. ``last``, at most the newest MAX_DAYS."""
    span = max(0, (last - first).days) + 1
    start = first + timedelta(days=max(0, span - MAX_DAYS))
    return [start + timedelta(days=i) for i in range((last - start).days + 1)]


def _nice_max(value: float) -> float:
    """A round axis top at or above ``value`` (1, 2, 2.5, 5 x 10^n)."""
    if value <= 0:
        return 1.0
    magnitude = 10.0 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * magnitude >= value * (1 - 1e-12):
            return float(step * magnitude)
    return float(10 * magnitude)  # pragma: no cover


def _day_axis(chart: Chart, days: list[date]) -> tuple[float, float]:
    """Slot width and bar width for the days; x ticks (at most 8 labels)."""
    plot_w = chart.width - LEFT - RIGHT
    slot = plot_w / max(1, len(days))
    every = max(1, -(-len(days) // 8))
    chart.x_ticks = [
        (LEFT + i * slot + slot / 2, d.isoformat()[5:]) for i, d in enumerate(days) if i % every == 0
    ]
    return slot, max(1.0, slot * 0.75)


def _y_axis(chart: Chart, top: float, fmt: Any) -> None:
    chart.y_ticks = [(TOP + PLOT_H * (1 - f), fmt(top * f)) for f in (0, 0.5, 1)]


def _y(value: float, top: float) -> float:
    return round(TOP + PLOT_H * (1 - value / top), 2) if top > 0 else TOP + PLOT_H


def stacked_bars(
    key: str,
    title: str,
    days: list[date],
    series: list[tuple[str, dict[date, float]]],
    fmt: Any,
    *,
    unit: str = "",
) -> Chart:
    """One stacked bar per day, a segment per series (in ``series`` order from the base)."""
    chart = Chart(key=key, title=title, summary=f"{title}, one stacked bar per day")
    slot, bar_w = _day_axis(chart, days)
    totals = [sum(values.get(d, 0) for _, values in series) for d in days]
    top = _nice_max(max(totals, default=0))
    _y_axis(chart, top, fmt)
    chart.legend = [(i, name) for i, (name, _) in enumerate(series)]
    for di, d in enumerate(days):
        under = 0.0
        for si, (name, values) in enumerate(series):
            value = values.get(d, 0)
            if not value:
                continue
            y_top, y_base = _y(under + value, top), _y(under, top)
            chart.marks.append(
                Mark(
                    x=round(LEFT + di * slot + (slot - bar_w) / 2, 2),
                    y=y_top,
                    w=round(bar_w, 2),
                    h=round(max(1.0, y_base - y_top), 2),
                    series=si,
                    text=f"{d.isoformat()} · {name}: {fmt(value)}{unit}",
                )
            )
            under += value
    chart.tables.append(
        Table(
            caption=f"{title} per day",
            columns=["Day (UTC)", *(name for name, _ in series), "Total"],
            rows=[
                [d.isoformat(), *(fmt(values.get(d, 0)) for _, values in series), fmt(total)]
                for d, total in zip(days, totals, strict=True)
                if total
            ],
        )
    )
    return chart


def line_chart(
    key: str, title: str, days: list[date], series: list[tuple[str, dict[date, float | None]]], fmt: Any
) -> Chart:
    """One line per series over the days (a day without a value breaks nothing: it is skipped)."""
    chart = Chart(key=key, title=title, summary=f"{title}, one line per series, a point per day")
    slot, _ = _day_axis(chart, days)
    values = [v for _, by_day in series for v in by_day.values() if v is not None]
    top = _nice_max(max(values, default=0))
    _y_axis(chart, top, fmt)
    chart.legend = [(i, name) for i, (name, _) in enumerate(series)]
    for si, (name, by_day) in enumerate(series):
        points = []
        for di, d in enumerate(days):
            value = by_day.get(d)
            if value is None:
                continue
            x, y = round(LEFT + di * slot + slot / 2, 2), _y(value, top)
            points.append(f"{x},{y}")
            chart.marks.append(
                Mark(x=x, y=y, w=0, h=0, series=si, text=f"{d.isoformat()} · {name}: {fmt(value)}")
            )
        if len(points) > 1:
            chart.lines.append(Line(series=si, points=" ".join(points)))
    chart.tables.append(
        Table(
            caption=f"{title} per day",
            columns=["Day (UTC)", *(name for name, _ in series)],
            rows=[
                [d.isoformat(), *("–" if by_day.get(d) is None else fmt(by_day[d]) for _, by_day in series)]
                for d in days
                if any(by_day.get(d) is not None for _, by_day in series)
            ],
        )
    )
    return chart


ROW_H = 22


def horizontal_bars(
    key: str, title: str, rows: list[tuple[str, list[tuple[str, float]]]], fmt: Any, *, stacked: bool = False
) -> Chart:
    """A group of bars per row label (``[(series name, value)]``), side by side or ``stacked``."""
    names: list[str] = []
    for _, parts in rows:
        for name, _ in parts:
            if name not in names:
                names.append(name)
    per_row = 1 if stacked else max(1, len(names))
    chart = Chart(key=key, title=title, summary=f"{title}, a bar per row")
    chart.height = TOP + len(rows) * (ROW_H * per_row + 8) + BOTTOM
    chart.base = chart.height - BOTTOM
    left = 160
    plot_w = chart.width - left - RIGHT - 60
    sums = [
        sum(v for _, v in parts) if stacked else max((v for _, v in parts), default=0) for _, parts in rows
    ]
    top = _nice_max(max(sums, default=0))
    chart.x_ticks = [(left + plot_w * f, fmt(top * f)) for f in (0, 0.5, 1)]
    chart.legend = [(i, name) for i, name in enumerate(names)]
    y = TOP
    for label, parts in rows:
        chart.labels.append((y + (ROW_H * per_row) / 2 + 4, label))
        x = float(left)
        for name, value in parts:
            si = names.index(name)
            w = round(plot_w * value / top, 2) if top else 0
            bar_y = y if stacked else y + si * ROW_H
            if value or not stacked:  # a zero side by side shows as a stub (its value on hover)
                chart.marks.append(
                    Mark(
                        x=round(x, 2),
                        y=bar_y + 2,
                        w=max(1.0, w),
                        h=ROW_H - 4,
                        series=si,
                        text=f"{label} · {name}: {fmt(value)}",
                    )
                )
            if stacked:
                x += w
        y += ROW_H * per_row + 8
    chart.tables.append(
        Table(
            caption=title,
            columns=["Label", *names],
            rows=[[label, *(fmt(dict(parts).get(name, 0)) for name in names)] for label, parts in rows],
        )
    )
    return chart


def _ms(value: float | None) -> str:
    return "–" if value is None else numbers.duration_ms(round(value, 1)) or "0 ms"


def _count(value: float) -> str:
    return numbers.count(round(value))


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}%".replace(".0%", "%")


def _top(totals: dict[str, float]) -> list[str]:
    """The MAX_SERIES labels with the largest totals (ties by name)."""
    return [name for name, _ in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_SERIES]]


def _fold_others(by_label: dict[str, dict[date, float]]) -> list[tuple[str, dict[date, float]]]:
    totals = {name: sum(values.values()) for name, values in by_label.items()}
    keep = _top(totals)
    out = [(name or "(none)", by_label[name]) for name in keep]
    rest: dict[date, float] = {}
    for name, values in by_label.items():
        if name not in keep:
            for d, v in values.items():
                rest[d] = rest.get(d, 0) + v
    if rest:
        out.append(("other", rest))
    return out


def _percentile_table(caption: str, first_column: str, histograms: dict[str, dict[int, int]]) -> Table:
    rows = []
    for label in sorted(histograms, key=lambda name: (-histogram.total(histograms[name]), name)):
        merged = histograms[label]
        ps = histogram.percentiles(merged, PERCENTILES)
        rows.append([label or "(none)", _count(histogram.total(merged)), *(_ms(ps[q]) for q in PERCENTILES)])
    return Table(caption=caption, columns=[first_column, "Count", "p50", "p95", "p99"], rows=rows)


def _latency_over_time(
    key: str, title: str, days: list[date], by_day_label: dict[tuple[date, str], dict[int, int]], what: str
) -> Chart:
    """p50 / p95 / p99 per day of every label merged (the chart), then per label over the period
    and per label and day (the tables)."""
    per_day: dict[date, list[dict[int, int]]] = {}
    per_label: dict[str, list[dict[int, int]]] = {}
    for (d, label), buckets in by_day_label.items():
        per_day.setdefault(d, []).append(buckets)
        per_label.setdefault(label, []).append(buckets)
    merged_days = {d: histogram.merge(hs) for d, hs in per_day.items()}
    series = [
        (f"p{q}", {d: histogram.percentile(merged_days[d], q) for d in days if d in merged_days})
        for q in PERCENTILES
    ]
    chart = line_chart(key, title, days, series, _ms)
    labels = {label: histogram.merge(hs) for label, hs in per_label.items()}
    chart.tables.append(_percentile_table(f"{title}: per {what} over the period", what.capitalize(), labels))
    detail = Table(
        caption=f"{title}: per {what} and day",
        columns=[what.capitalize(), "Day (UTC)", "Count", "p50", "p95", "p99"],
        rows=[],
    )
    for (d, label), buckets in sorted(by_day_label.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        ps = histogram.percentiles(buckets, PERCENTILES)
        detail.rows.append(
            [
                label or "(none)",
                d.isoformat(),
                _count(histogram.total(buckets)),
                *(_ms(ps[q]) for q in PERCENTILES),
            ]
        )
    chart.tables.append(detail)
    return chart


def _main_currency(usage: dict[tuple[date, str], list[Any]]) -> str:
    totals: dict[str, Decimal] = {}
    for _, _, costs in usage.values():
        for currency, amount in costs.items():
            totals[currency] = totals.get(currency, Decimal(0)) + amount
    return max(sorted(totals), key=lambda c: totals[c]) if totals else ""


def build(data: Any, *, first: date, last: date) -> dict[str, Any]:
    """The dashboard's view data: ``charts`` (every chart, in page order), ``waiting_gates`` and
    ``totals`` (runs, finished, failed, error rate, calls, tokens, cost by currency)."""
    days = calendar(first, last)
    return {
        "charts": [*_run_charts(data, days), *_model_charts(data, days), *_gate_charts(data)],
        "waiting_gates": data.waiting_gates,
        "totals": _totals(data),
    }


def _run_charts(data: Any, days: list[date]) -> list[Chart]:
    charts: list[Chart] = []
    by_status = {s: {d: float(c.get(s, 0)) for d, c in data.runs_by_day.items()} for s in STATUSES}
    charts.append(
        stacked_bars("runs", "Runs per day by status", days, [(s, by_status[s]) for s in STATUSES], _count)
    )

    rates: dict[date, float | None] = {}
    for d, c in data.runs_by_day.items():
        finished = c["completed"] + c["failed"] + c["cancelled"]
        rates[d] = 100 * c["failed"] / finished if finished else None
    charts.append(
        line_chart("errors", "Error rate (failed / finished runs)", days, [("error rate", rates)], _percent)
    )

    charts.append(_latency_over_time("run-latency", "Run duration", days, data.run_latency, "workflow"))
    return charts


def _model_charts(data: Any, days: list[date]) -> list[Chart]:
    charts = [_latency_over_time("model-latency", "Model latency", days, data.model_latency, "model")]

    p95_by_model: dict[str, dict[date, float | None]] = {}
    for (d, model), buckets in data.model_latency.items():
        value = histogram.percentile(buckets, 95)
        if value is not None:
            p95_by_model.setdefault(model, {})[d] = value
    counts = {
        m: float(sum(histogram.total(b) for (_, mm), b in data.model_latency.items() if mm == m))
        for m in p95_by_model
    }
    charts.append(
        line_chart(
            "model-p95",
            "Model latency p95 by model",
            days,
            [(m or "(none)", p95_by_model[m]) for m in _top(counts)],
            _ms,
        )
    )

    currency = _main_currency(data.usage_by_model)
    cost_by_model: dict[str, dict[date, float]] = {}
    tokens_by_model: dict[str, dict[date, float]] = {}
    for (d, model), (_, tokens, costs) in data.usage_by_model.items():
        if currency and costs.get(currency):
            held = cost_by_model.setdefault(model, {})
            held[d] = held.get(d, 0) + float(costs[currency])
        if tokens:
            held = tokens_by_model.setdefault(model, {})
            held[d] = held.get(d, 0) + tokens
    charts.append(
        stacked_bars(
            "cost",
            f"Cost by model ({currency or 'no cost recorded'})",
            days,
            _fold_others(cost_by_model),
            lambda v: numbers.money(v, currency or "USD"),
        )
    )
    charts.append(stacked_bars("tokens", "Tokens by model", days, _fold_others(tokens_by_model), _count))
    return charts


def _gate_charts(data: Any) -> list[Chart]:
    charts: list[Chart] = []

    gates = sorted(data.decision_latency)
    decision_rows = []
    for gate in gates:
        ps = histogram.percentiles(data.decision_latency[gate], (50, 95))
        decision_rows.append((gate, [("p50", ps[50] or 0.0), ("p95", ps[95] or 0.0)]))
    charts.append(horizontal_bars("decision-time", "Time to decision by gate", decision_rows, _ms))

    per_gate: dict[str, dict[str, int]] = {}
    per_reviewer: dict[str, dict[str, int]] = {}
    for (gate, reviewer, decision), n in data.decisions.items():
        outcome = per_gate.setdefault(gate, {})
        outcome[decision] = outcome.get(decision, 0) + n
        mine = per_reviewer.setdefault(reviewer or "(unknown)", {})
        mine[decision] = mine.get(decision, 0) + n
    rejection_rows = [
        (gate, [("rejected", 100 * outcome.get("rejected", 0) / sum(outcome.values()))])
        for gate, outcome in sorted(per_gate.items())
        if sum(outcome.values())
    ]
    rejection = horizontal_bars("rejections", "Rejection rate by gate", rejection_rows, _percent)
    rejection.tables.append(
        Table(
            caption="Decisions by gate",
            columns=["Gate", "Decisions", "Rejected", "Rejection rate"],
            rows=[
                [
                    gate,
                    _count(sum(o.values())),
                    _count(o.get("rejected", 0)),
                    _percent(100 * o.get("rejected", 0) / sum(o.values())),
                ]
                for gate, o in sorted(per_gate.items())
            ],
        )
    )
    charts.append(rejection)
    decisions = sorted({d for o in per_reviewer.values() for d in o})
    reviewer_rows = [
        (reviewer, [(d, float(outcome.get(d, 0))) for d in decisions])
        for reviewer, outcome in sorted(per_reviewer.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
    ]
    charts.append(horizontal_bars("reviewers", "Decisions by reviewer", reviewer_rows, _count, stacked=True))
    return charts


def _totals(data: Any) -> dict[str, Any]:

    runs = sum(sum(c.values()) for c in data.runs_by_day.values())
    failed = sum(c["failed"] for c in data.runs_by_day.values())
    finished = sum(c["completed"] + c["failed"] + c["cancelled"] for c in data.runs_by_day.values())
    calls = sum(u[0] for u in data.usage_by_model.values())
    tokens = sum(u[1] for u in data.usage_by_model.values())
    cost: dict[str, Decimal] = {}
    for _, _, costs in data.usage_by_model.values():
        for cur, amount in costs.items():
            cost[cur] = cost.get(cur, Decimal(0)) + amount
    all_runs = histogram.merge(data.run_latency.values())
    all_decisions = histogram.merge(data.decision_latency.values())
    return {
        "runs": _count(runs),
        "finished": _count(finished),
        "failed": _count(failed),
        "error_rate": _percent(100 * failed / finished if finished else None),
        "run_p50": _ms(histogram.percentile(all_runs, 50)),
        "run_p95": _ms(histogram.percentile(all_runs, 95)),
        "decision_p50": _ms(histogram.percentile(all_decisions, 50)),
        "decision_p95": _ms(histogram.percentile(all_decisions, 95)),
        "decisions": _count(sum(data.decisions.values())),
        "calls": _count(calls),
        "tokens": _count(tokens),
        "cost": ", ".join(numbers.money(v, cur) + f" {cur}" for cur, v in sorted(cost.items())) or "–",
    }
