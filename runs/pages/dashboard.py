"""The monitoring dashboard of a workspace: runs, latency, errors, cost and tokens, gates, over a
range of run start days, filtered by workflow and model. Read from the rollups
(runs.selectors.dashboard), drawn as server-side SVG (runs.presenters.dashboard)."""

from __future__ import annotations

from datetime import date, timedelta

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from runs.presenters import dashboard as presenter
from runs.selectors.dashboard import DashboardFilters, dashboard_data
from runs.web.request import current_workspace

DEFAULT_DAYS = 30
MAX_DAYS = 366


def _day(request: HttpRequest, name: str, default: date, errors: list[str]) -> date:
    text = request.GET.get(name, "").strip()
    if not text:
        return default
    try:
        day = date.fromisoformat(text)
    except ValueError:
        errors.append(f"INVALID_DATE: “{name}” must be a day as YYYY-MM-DD, not “{text[:40]}”.")
        return default
    return default if day >= date.max else day


@login_required
@require_GET
def dashboard(request: HttpRequest) -> HttpResponse:
    workspace = current_workspace(request)
    today = timezone.now().date()
    errors: list[str] = []
    last = _day(request, "to", today, errors)
    first = _day(request, "from", last - timedelta(days=DEFAULT_DAYS - 1), errors)
    if last < first:
        first, last = last, first
    if (last - first).days >= MAX_DAYS:
        errors.append(f"RANGE_TOO_LONG: a range holds at most {MAX_DAYS} days; showing the last {MAX_DAYS}.")
        first = last - timedelta(days=MAX_DAYS - 1)
    filters = DashboardFilters(
        first=first,
        last=last,
        workflow=request.GET.get("workflow", "")[:200],
        model=request.GET.get("model", "")[:200],
    )
    data = dashboard_data(workspace, filters)
    ctx = {
        **presenter.build(data, first=first, last=last),
        "filters": filters,
        "workflows": data.workflows,
        "models": data.models,
        "errors": errors,
        "nav_active": "dashboard",
    }
    return render(request, "runs/dashboard.html", ctx, status=400 if errors else 200)
