"""The dashboard presenter (runs.presenters.dashboard): pure chart geometry and tables from
plain rollup data."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from types import SimpleNamespace

from runs.presenters import dashboard, histogram

D1, D2, D3 = date(2026, 3, 1), date(2026, 3, 2), date(2026, 3, 3)


def _data(**overrides):
    values = {
        "runs_by_day": {
            D1: {"running": 1, "completed": 3, "failed": 1, "cancelled": 0},
            D3: {"running": 0, "completed": 1, "failed": 1, "cancelled": 0},
        },
        "run_latency": {(D1, "wf"): {histogram.bucket_of(1000): 4}, (D3, "wf"): {histogram.bucket_of(10): 2}},
        "model_latency": {
            (D1, "m-a"): {histogram.bucket_of(200): 5},
            (D2, "m-b"): {histogram.bucket_of(900): 1},
        },
        "usage_by_model": {
            (D1, "m-a"): [5, 1000, {"USD": Decimal("0.50")}],
            (D2, "m-b"): [1, 10, {"USD": Decimal("0.01")}],
        },
        "waiting_gates": 2,
        "decision_latency": {"review": {histogram.bucket_of(60_000): 3}},
        "decisions": {("review", "user:alice", "approved"): 2, ("review", "user:bob", "rejected"): 1},
    }
    values.update(overrides)
    return SimpleNamespace(**values)


def _chart(view, key):
    return next(c for c in view["charts"] if c.key == key)


def test_runs_per_day_stack_by_status_with_their_numbers():
    view = dashboard.build(_data(), first=D1, last=D3)
    runs = _chart(view, "runs")
    day1 = [m for m in runs.marks if m.text.startswith("2026-03-01")]
    assert [m.text for m in day1] == [
        "2026-03-01 · completed: 3",
        "2026-03-01 · failed: 1",
        "2026-03-01 · running: 1",
    ]
    # stacked from the base upward, each segment on top of the one below
    assert day1[0].y + day1[0].h == runs.base and abs(day1[1].y + day1[1].h - day1[0].y) < 0.02
    assert runs.tables[0].rows[0] == ["2026-03-01", "3", "1", "0", "1", "5"]
    assert len(runs.tables[0].rows) == 2  # days without runs are left out of the table
    assert view["totals"]["runs"] == "7" and view["totals"]["error_rate"] == "33.3%"


def test_error_rate_is_failed_over_finished_per_day():
    errors = _chart(dashboard.build(_data(), first=D1, last=D3), "errors")
    assert [m.text for m in errors.marks] == ["2026-03-01 · error rate: 25%", "2026-03-03 · error rate: 50%"]
    assert len(errors.lines) == 1


def test_latency_percentiles_per_label_from_histograms():
    view = dashboard.build(_data(), first=D1, last=D3)
    latency = _chart(view, "run-latency")
    per_workflow = latency.tables[1]
    assert per_workflow.columns == ["Workflow", "Count", "p50", "p95", "p99"]
    assert per_workflow.rows[0][:2] == ["wf", "6"]
    assert {m.text.split(" · ")[1].split(":")[0] for m in latency.marks} == {"p50", "p95", "p99"}
    models = _chart(view, "model-latency").tables[1]
    assert [row[0] for row in models.rows] == ["m-a", "m-b"]


def test_cost_and_tokens_by_model_in_the_main_currency():
    view = dashboard.build(_data(), first=D1, last=D3)
    cost = _chart(view, "cost")
    assert cost.title == "Cost by model (USD)"
    assert "2026-03-01 · m-a: 0.50" in [m.text for m in cost.marks]
    tokens = _chart(view, "tokens")
    assert tokens.tables[0].columns == ["Day (UTC)", "m-a", "m-b", "Total"]


def test_gate_charts_rejection_rate_and_reviewers():
    view = dashboard.build(_data(), first=D1, last=D3)
    rejections = _chart(view, "rejections")
    assert [m.text for m in rejections.marks] == ["review · rejected: 33.3%"]
    reviewers = _chart(view, "reviewers")
    assert sorted(m.text for m in reviewers.marks) == ["user:alice · approved: 2", "user:bob · rejected: 1"]
    assert _chart(view, "decision-time").tables[0].rows[0][0] == "review"
    assert view["waiting_gates"] == 2


def test_nothing_recorded_gives_empty_charts_not_errors():
    empty = _data(
        runs_by_day={}, run_latency={}, model_latency={}, usage_by_model={}, decision_latency={}, decisions={}
    )
    view = dashboard.build(empty, first=D1, last=D3)
    assert all(chart.empty for chart in view["charts"])
    assert view["totals"]["error_rate"] == "–"


def test_many_models_fold_into_other_and_long_ranges_keep_the_newest_days():
    usage = {(D1, f"m{i}"): [1, 10 + i, {}] for i in range(9)}
    tokens = _chart(dashboard.build(_data(usage_by_model=usage), first=D1, last=D3), "tokens")
    assert [name for _, name in tokens.legend][-1] == "other" and len(
        tokens.legend
    ) == dashboard.MAX_SERIES + 1
    days = dashboard.calendar(date(2025, 1, 1), date(2026, 1, 1))
    assert len(days) == dashboard.MAX_DAYS and days[-1] == date(2026, 1, 1)
