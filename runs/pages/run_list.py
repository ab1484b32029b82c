"""The runs list (filters, keyset pages) and the workspace switcher."""

from __future__ import annotations

import json
from datetime import datetime

import orjson
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Q, TextField
from django.db.models.functions import Cast
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers

from runs.models import Run, RunStatus
from runs.web import (
    current_workspace,
    switch_workspace,
)

RUNS_PER_PAGE = 50


def _tag_filter(tag: str) -> Q:
    needles = {orjson.dumps(tag).decode(), json.dumps(tag)}
    q = Q()
    for needle in needles:
        q |= Q(tags_text__contains=needle)
    return q


@login_required
@require_GET
@vary_on_headers("HX-Request")
def run_list(request: HttpRequest) -> HttpResponse:
    workspace = current_workspace(request)
    qs = Run.objects.for_workspace(workspace)
    status = request.GET.get("status", "").strip()
    workflow = request.GET.get("workflow", "").strip()
    tag = request.GET.get("tag", "").strip()
    text = request.GET.get("q", "").strip()[:200]
    if status in RunStatus.values:
        qs = qs.filter(status=status)
    if workflow:
        qs = qs.filter(workflow_id=workflow)
    if tag:
        qs = qs.annotate(tags_text=Cast("tags", TextField())).filter(_tag_filter(tag))
    if text:
        qs = qs.filter(
            Q(id__icontains=text)
            | Q(title__icontains=text)
            | Q(workflow_id__icontains=text)
            | Q(doc__icontains=text)
        )
    cursor = request.GET.get("cursor", "")
    if cursor:
        try:
            ts_text, run_id = cursor.split("|", 1)
            ts = datetime.fromisoformat(ts_text)
            qs = qs.filter(Q(started_at__lt=ts) | Q(started_at=ts, pk__lt=run_id))
        except ValueError:
            return HttpResponseBadRequest("bad cursor")
    runs = list(
        qs.order_by("-started_at", "-pk").only(
            "id",
            "workflow_id",
            "title",
            "status",
            "started_at",
            "ended_at",
            "tags",
            "pending_gates",
            "event_count",
            "model_calls",
            "total_tokens",
            "cost_totals",
        )[: RUNS_PER_PAGE + 1]
    )
    next_cursor = ""
    if len(runs) > RUNS_PER_PAGE:
        runs = runs[:RUNS_PER_PAGE]
        last = runs[-1]
        next_cursor = f"{last.started_at.isoformat()}|{last.pk}"
    workflows = list(
        Run.objects.for_workspace(workspace)
        .order_by("workflow_id")
        .values_list("workflow_id", flat=True)
        .distinct()[:200]
    )
    context = {
        "runs": runs,
        "next_cursor": next_cursor,
        "cursor": cursor,
        "statuses": RunStatus.values,
        "workflows": workflows,
        "f": {"status": status, "workflow": workflow, "tag": tag, "q": text},
        "nav_active": "runs",
        "workspace": workspace,
    }
    template = "runs/run_list.html#run_table" if request.htmx else "runs/run_list.html"
    return render(request, template, context)


@login_required
@require_POST
def switch_workspace_view(request: HttpRequest) -> HttpResponse:
    workspace = switch_workspace(request, request.POST.get("workspace", ""))
    messages.success(request, f"Switched to {workspace.name}.")
    return redirect("runs:list")
