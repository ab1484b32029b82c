"""Cost and token ledgers: one run, and the workspace over a date range."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET

from runs.pages.access import RunAccess, run_page
from runs.pages.params import int_param
from runs.presenters.graph import bar_chart, day_chart, merged_step_order, workflow_step_order
from runs.presenters.ledger_pages import page_of
from runs.presenters.priced import priced_calls, unpriced_reasons
from runs.protocol.telemetry import LedgerAccumulator
from runs.selectors.ledger import (
    CALLS_PAGE,
    PricedBy,
    calls_after,
    priced_by_notes,
    run_ledger_view,
    workspace_ledger_data,
)
from runs.web.request import (
    HtmxHttpRequest,
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


def _in_step_order(rows: list[dict[str, Any]], order: list[str]) -> list[dict[str, Any]]:
    """Step rows in workflow order; steps no workflow declares follow, as the ledger sorts them."""
    rank = {step: i for i, step in enumerate(order)}
    return sorted(rows, key=lambda r: rank.get(r.get("label") or "", len(rank)))


def _main_currency(exact: dict[str, Decimal]) -> str:
    return max(exact, key=lambda cur: exact[cur]) if exact else ""


def _ledger_context(
    acc: LedgerAccumulator,
    step_order: list[str],
    *,
    first: date | None = None,
    last: date | None = None,
    priced_by: PricedBy | None = None,
    query: QueryDict | None = None,
) -> dict[str, Any]:
    """What _ledger_body.html shows: totals, tables whose rows add up to the totals (an
    "(unattributed)" row for the responses no row of that table covers), charts by step and day;
    the provider / model rows say which sources priced their calls ("Priced by"). A long table
    shows one page of its rows (``?page_<table>=N`` in ``query``) and a row summing the others."""
    ledger = acc.result(strict=False)
    extra = acc.breakdown_result()
    exact = acc.exact_cost_by_currency()
    tables = []
    for name, title in LEDGER_ROLLUPS:
        rows = ledger.get(name, [])
        if name == "byStep":
            rows = _in_step_order(rows, step_order)
        if name == "byProviderModel" and priced_by is not None:
            notes = priced_by_notes(priced_by)
            rows = [{**row, "priced_by": notes.get(row["key"], [])} for row in rows]
        unattributed = extra["unattributed"].get(name)
        if rows or unattributed:
            tables.append(
                {
                    "name": name,
                    "title": title,
                    "rows": rows,
                    "unattributed": unattributed,
                    "priced_by": name == "byProviderModel" and priced_by is not None,
                }
            )
    if extra["byPricing"]:  # who priced the calls (every response falls in exactly one row)
        tables.append(
            {"name": "byPricing", "title": "Price source", "rows": extra["byPricing"], "unattributed": None}
        )
    if extra["byPrompt"]:  # the prompt versions the calls were made with; the rest unattributed
        tables.append(
            {
                "name": "byPrompt",
                "title": "Prompt version",
                "rows": extra["byPrompt"],
                "unattributed": extra["unattributed"].get("byPrompt"),
            }
        )
    for table in tables:
        _paginate(table, query or QueryDict())
    currency = _main_currency(exact)
    days = [
        {
            "day": d["day"],
            "cost": d["totals"]["costByCurrency"].get(currency, 0),
            "tokens": d["totals"]["totalTokens"],
            "totals": d["totals"],
        }
        for d in extra["byDay"]
    ]
    return {
        "ledger": ledger,
        "exact_costs": {cur: format(v, "f") for cur, v in exact.items()},
        "tables": tables,
        "chart": _step_chart(next((t["all_rows"] for t in tables if t["name"] == "byStep"), [])),
        "days": days,
        "day_chart": day_chart(days, currency=currency, first=first, last=last),
        "priced_calls": priced_calls(extra["byPricing"], acc.totals.event_count),
    }


def _paginate(table: dict[str, Any], query: QueryDict) -> None:
    """One page of the table's rows; links to its neighbouring pages keep the rest of the query."""
    key = f"page_{table['name']}"
    paged = page_of(table["rows"], int_param(query, key, 1) or 1)
    table["all_rows"] = table["rows"]
    table.update(paged)
    n = paged["others_count"]
    table["others_label"] = f"{n:,} row{'s' if n != 1 else ''} on other pages"
    for side in ("previous", "next"):
        if paged[side] is not None:
            q = query.copy()
            q[key] = str(paged[side])
            table[f"{side}_url"] = f"?{q.urlencode()}#tbl-{table['name']}"


def _step_chart(step_rows: list[dict[str, Any]]):
    rows = []
    for item in step_rows:
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
def run_ledger(request: HtmxHttpRequest, access: RunAccess) -> HttpResponse:
    """The run's ledger; its model responses one keyset page at a time (``?after=<seq>``: the
    responses after that event; an htmx request for a later page gets the responses' section only)."""
    run = access.run
    after = int_param(request.GET, "after", 0) or 0
    calls, next_after = calls_after(run, after=after, limit=CALLS_PAGE)
    detail_url = reverse("runs:demo") if access.demo else reverse("runs:detail", args=[run.run_id])
    ctx: dict[str, Any] = {
        "run": run,
        "url_id": access.url_id,
        "demo": access.demo,
        "calls": calls,
        "calls_after": after,
        "calls_next": next_after,
        "calls_total": run.model_calls,
        "ledger_url": reverse("runs:run_ledger", args=[access.url_id]),
        "unpriced_reasons": unpriced_reasons(calls),  # of the responses shown
        "nav_active": "runs",
        "detail_url": detail_url,
    }
    if request.htmx and request.GET.get("part") == "calls":
        return render(request, "runs/run_ledger.html#calls", ctx)
    acc, _, priced_by = run_ledger_view(run, calls_shown=0)
    ctx.update(
        _ledger_context(
            acc,
            workflow_step_order(run.run_doc.get("workflowSnapshot")),
            priced_by=priced_by,
            query=request.GET,
        )
    )
    ctx["calls_total"] = acc.totals.event_count
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
    # runs started on those UTC days, read from the rollups the write path keeps
    acc, run_count, workflows, priced_by = workspace_ledger_data(workspace, first=start, last=end)
    ctx = {
        # the chart spans the chosen range (runs started in it may have answered later)
        **_ledger_context(
            acc, merged_step_order(workflows), first=start, last=end, priced_by=priced_by, query=request.GET
        ),
        "start": start,
        "end": end,
        "run_count": run_count,
        "nav_active": "ledger",
    }
    return render(request, "runs/ledger.html", ctx)
