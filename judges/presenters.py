"""What the judge page shows (pure apart from the chart helpers of the dashboard)."""

from __future__ import annotations

from datetime import date
from typing import Any

from runs.presenters.dashboard import Chart, line_chart


def _num(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def kappa_chart(series: dict[date, float | None], days: list[date]) -> Chart:
    chart = line_chart("kappa", "Cohen's kappa of the rolling window", days, [("kappa", series)], _num)
    chart.summary = "Cohen's kappa between the judge and people over the rolling window, a point per day"
    return chart


def agreement_rows(stats: dict[str, Any]) -> list[tuple[str, str]]:
    ci = f"{_num(stats['kappaLow'])} to {_num(stats['kappaHigh'])}" if stats["kappaLow"] is not None else "–"
    return [
        ("Human-decided items (n)", str(stats["n"])),
        ("Cohen's kappa", _num(stats["kappa"])),
        ("95 % confidence interval", ci),
        ("True positive rate (approvals found)", _num(stats["tpr"])),
        ("True negative rate (rejections found)", _num(stats["tnr"])),
        ("Observed agreement", _num(stats["observed"])),
    ]


def agreement_doc(stats: dict[str, Any]) -> dict[str, Any]:
    """The REST shape: the numbers as they are (None where undefined)."""
    return {
        "n": stats["n"],
        "kappa": stats["kappa"],
        "kappaInterval": [stats["kappaLow"], stats["kappaHigh"]],
        "tpr": stats["tpr"],
        "tnr": stats["tnr"],
        "observedAgreement": stats["observed"],
        "confusion": stats["matrix"],
    }
