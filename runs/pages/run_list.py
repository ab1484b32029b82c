"""The runs list (filters, keyset pages) and the workspace switcher."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from runs.actions.permissions import Action
from runs.models import RunStatus
from runs.selectors.run_list import (
    DEFAULT_SORT,
    REJECTED_FILTER,
    RUN_SORTS,
    RunListFilters,
    capped_count,
    runs_page,
    sort_problem,
    waiting_steps,
    workflow_ids,
)
from runs.selectors.runs import BadCursor
from runs.web.request import HtmxHttpRequest, current_workspace, may, switch_workspace

RUNS_PER_PAGE = 50
MATCH_COUNT_CAP = 10_000


@login_required
@require_GET
@vary_on_headers("HX-Request")
def run_list(request: HtmxHttpRequest) -> HttpResponse:
    workspace = current_workspace(request)
    problem = sort_problem(request.GET.get("sort", "").strip())
    if problem:
        return HttpResponseBadRequest(problem)
    filters = RunListFilters.from_query(request.GET)
    filters.hide_judge_calls = not may(request, Action.MANAGE_JUDGES)  # a judge's calls: its owners'
    cursor = request.GET.get("cursor", "")
    try:
        runs, next_cursor = runs_page(workspace, filters, cursor=cursor, limit=RUNS_PER_PAGE)
    except BadCursor:
        return HttpResponseBadRequest("INVALID_INPUT: bad cursor")
    waiting = waiting_steps(runs)
    # "Add all N runs matching this filter": counted only when the filter spans several pages, up to
    # MATCH_COUNT_CAP, and only where one index range answers the count (capped_count); a text
    # search, a tag or a combined filter over several pages is not counted and the button then says
    # "all runs matching"
    matching_count: int | None = len(runs)
    if cursor or next_cursor:
        matching_count = capped_count(workspace, filters, MATCH_COUNT_CAP)
    context = {
        "runs": [(run, waiting.get(run.pk, [])) for run in runs],
        "next_cursor": next_cursor,
        "cursor": cursor,
        "statuses": [*RunStatus.values, REJECTED_FILTER],
        "workflows": workflow_ids(workspace),
        "f": {"status": filters.status, "workflow": filters.workflow, "tag": filters.tag, "q": filters.q},
        "nav_active": "runs",
        "workspace": workspace,
        # runs ticked for comparison: a live refresh of the table sends them, and keeps them ticked
        "matching_count": matching_count,
        "compare_picked": set(request.GET.getlist("run")),
        "sort": filters.sort if filters.sort != DEFAULT_SORT else "",
        "sorts": sort_headers(filters.sort),
    }
    template = "runs/run_list.html#run_table" if request.htmx else "runs/run_list.html"
    return render(request, template, context)


def sort_headers(current: str) -> dict[str, dict[str, str]]:
    """Per sortable column: the ``sort`` its header links to (the other direction when it is the
    current one, else largest / newest first) and its ``aria-sort`` ("" when not sorted by it)."""
    out = {}
    for key in RUN_SORTS:
        if current == key:
            out[key] = {"sort": f"-{key}", "aria": "descending"}
        elif current == f"-{key}":
            out[key] = {"sort": key, "aria": "ascending"}
        else:
            out[key] = {"sort": key, "aria": ""}
    return out


@login_required
@require_POST
def switch_workspace_view(request: HttpRequest) -> HttpResponse:
    workspace = switch_workspace(request, request.POST.get("workspace", ""))
    messages.success(request, f"Switched to {workspace.name}.")
    return redirect("runs:list")
