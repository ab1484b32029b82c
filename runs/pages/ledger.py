"""Cost and token ledgers: one run, and the workspace over a date range."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from runs.graph import bar_chart
from runs.pages.access import RunAccess, run_page
from runs.selectors import (
    run_ledger_data,
    workspace_ledger_data,
)
from runs.web import (
    current_workspace,
)

LEDGER_ROLLUPS = [
    ("byProvider", "Provider"),
    ("byModel", "Model"),
    ("byProviderModel", "Provider / model"),
    ("byStep", "Step"),
    ("byUser", "User"),
    ("byTenant", "Tenant"),
    ("byPlan", "Plan"),
]


def _ledger_tables(ledger: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": name, "title": title, "rows": ledger.get(name, [])} for name, title in LEDGER_ROLLUPS]


def _step_chart(ledger: dict[str, Any]):
    rows = []
    for item in ledger.get("byStep", []):
        totals = item["totals"]
        costs = totals.get("costByCurrency") or {}
        currency = next(iter(costs), "")
        rows.append(
            {
                "label": item.get("label") or item.get("key"),
                "cost": float(costs.get(currency, 0) or 0),
                "currency": currency,
                "tokens": totals.get("totalTokens", 0) or 0,
            }
        )
    return bar_chart(rows)


@run_page
@require_GET
def run_ledger(request: HttpRequest, access: RunAccess) -> HttpResponse:
    ledger, exact = run_ledger_data(access.run)
    ctx = {
        "run": access.run,
        "url_id": access.url_id,
        "demo": access.demo,
        "ledger": ledger,
        "exact_costs": exact,
        "tables": _ledger_tables(ledger),
        "chart": _step_chart(ledger),
        "nav_active": "runs",
        "detail_url": reverse("runs:demo")
        if access.demo
        else reverse("runs:detail", args=[access.run.run_id]),
    }
    return render(request, "runs/run_ledger.html", ctx)


def _parse_day(text: str) -> date | None:
    try:
        day = date.fromisoformat(text) if text else None
    except ValueError:
        return None
    # the range ends the day after `to`: the last representable day would overflow
    return None if day is not None and day >= date.max else day


@login_required
@require_GET
def workspace_ledger(request: HttpRequest) -> HttpResponse:
    """Ledger over every run of the workspace started within a date range (default: last 30 days)."""
    workspace = current_workspace(request)
    today = timezone.now().date()
    start = _parse_day(request.GET.get("from", "")) or today - timedelta(days=30)
    end = _parse_day(request.GET.get("to", "")) or today
    if end < start:
        start, end = end, start
    tz = timezone.get_current_timezone()
    lo = datetime.combine(start, time.min, tzinfo=tz)
    hi = datetime.combine(end + timedelta(days=1), time.min, tzinfo=tz)
    acc, run_count = workspace_ledger_data(workspace, lo=lo, hi=hi)
    ledger = acc.result(strict=False)
    ctx = {
        "ledger": ledger,
        "exact_costs": {cur: format(v, "f") for cur, v in acc.exact_cost_by_currency().items()},
        "tables": _ledger_tables(ledger),
        "chart": _step_chart(ledger),
        "start": start,
        "end": end,
        "run_count": run_count,
        "nav_active": "ledger",
    }
    return render(request, "runs/ledger.html", ctx)
