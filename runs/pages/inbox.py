"""The reviewer's inbox: every pending gate of the workspace."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from runs.selectors import (
    run_state,
    runs_waiting_for_review,
)
from runs.web import (
    current_workspace,
)

INBOX_LIMIT = 200


@login_required
@require_GET
@vary_on_headers("HX-Request")
def review_inbox(request: HttpRequest) -> HttpResponse:
    """Every pending gate across the workspace's runs (the reviewer's inbox)."""
    workspace = current_workspace(request)
    runs = runs_waiting_for_review(workspace, limit=INBOX_LIMIT)
    items = []
    for run in runs:
        for gate in run_state(run).pending_gates():
            items.append({"run": run, "gate": gate})
    return render(
        request,
        "runs/inbox.html#inbox_table" if request.htmx else "runs/inbox.html",
        {"items": items, "runs_count": len(runs), "limit": INBOX_LIMIT, "nav_active": "inbox"},
    )
