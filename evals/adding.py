"""Pages that add runs and events to a dataset from the runs side: the runs list's "Add to
dataset" (the runs ticked on a page, or every run matching the list's filter across all its pages)
and a timeline event's "Add to dataset". runs only links here (runs never imports evals).

"All matching" is not a list of ids the browser sends: the filter travels in the form, and the
POST evaluates it again with the runs list's own parsing and query, so the added set is exactly
what the list shows for that filter (not the whole workspace, not only its first page).
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from evals import actions, selectors
from evals.models import Dataset
from runs.actions import ActionError
from runs.actions.permissions import Action
from runs.models import Workspace
from runs.protocol.errors import ErrorCode
from runs.web.request import actor_for, may, require_action

FILTER_FIELDS = ("q", "status", "workflow", "tag")


def _dataset(workspace: Workspace, params: Any, actor: str) -> Dataset:
    """The dataset the form chose, or a new one it names."""
    new_name = (params.get("new_name") or "").strip()
    if new_name:
        return actions.do_create_dataset(workspace=workspace, name=new_name, actor=actor)
    try:
        return selectors.get_dataset(workspace, params.get("dataset", ""))
    except selectors.EvalNotFound:
        raise ActionError(
            ErrorCode.INVALID_INPUT, "choose a dataset (or name a new one)", "dataset"
        ) from None


def _added(request: HttpRequest, dataset: Dataset, added: int, revision: int) -> HttpResponse:
    messages.success(
        request, f"{added} item{'s' if added != 1 else ''} added to {dataset.name} (revision {revision})."
    )
    return redirect("evals:dataset", dataset_id=dataset.public_id)


def _run_ids(workspace: Workspace, params: Any, *, hide_judge_calls: bool) -> tuple[list[str], int | None]:
    """The runs the form names: every run matching its filter (``all=1``; as the runs list, less
    a gate judge's own calls for those who may not manage judges), else the ticked ones. The
    second value is the count matching the filter (None for ticked runs)."""
    if params.get("all") == "1":
        filters = selectors.filter_of(params)
        filters.hide_judge_calls = hide_judge_calls
        total = selectors.count_matching(workspace, filters)
        return selectors.run_ids_matching(workspace, filters, limit=actions.MAX_ITEMS_PER_REQUEST + 1), total
    return list(dict.fromkeys(r for r in params.getlist("run") if r))[
        : actions.MAX_ITEMS_PER_REQUEST + 1
    ], None


@login_required
@require_http_methods(["GET", "POST"])
def add_runs(request: HttpRequest) -> HttpResponse:
    """``?run=<id>&run=<id>`` (ticked) or ``?all=1&q=&status=&workflow=&tag=`` (the filter)."""
    workspace = require_action(request, Action.EDIT_DATASET).workspace
    params = request.POST if request.method == "POST" else request.GET
    run_ids, total = _run_ids(workspace, params, hide_judge_calls=not may(request, Action.MANAGE_JUDGES))
    error = ""
    if not run_ids:
        error = "No runs match this filter." if total is not None else "Tick at least one run to add."
    elif len(run_ids) > actions.MAX_ITEMS_PER_REQUEST:
        error = (
            f"{total if total is not None else 'More than ' + str(actions.MAX_ITEMS_PER_REQUEST)} runs: "
            f"at most {actions.MAX_ITEMS_PER_REQUEST} are added at once; narrow the filter."
        )
    if request.method == "POST" and not error:
        try:
            with transaction.atomic():  # a new dataset is not left behind when adding fails
                dataset = _dataset(workspace, request.POST, actor_for(request))
                items = actions.items_from_runs(workspace, run_ids, request.POST.get("step_id") or None)
                added, revision = actions.do_add_items(dataset=dataset, items=items, actor=actor_for(request))
        except ActionError as exc:
            error = exc.message
        else:
            return _added(request, dataset, added, revision)
    ctx = {
        "all": params.get("all") == "1",
        "filters": {f: (params.get(f) or "").strip() for f in FILTER_FIELDS},
        "run_ids": run_ids if params.get("all") != "1" else [],
        "count": total if total is not None else len(run_ids),
        "datasets": list(selectors.datasets_of(workspace).order_by("name")[:500]),
        "chosen": params.get("dataset", ""),
        "step_id": params.get("step_id", ""),
        "error": error,
        "nav_active": "datasets",
    }
    return render(request, "evals/add_runs.html", ctx, status=400 if error else 200)


@login_required
@require_http_methods(["GET", "POST"])
def add_event(request: HttpRequest) -> HttpResponse:
    """``?run=<run id>&seq=<n>``: one timeline event as an item (404: no such run or event here)."""
    workspace = require_action(request, Action.EDIT_DATASET).workspace
    params = request.POST if request.method == "POST" else request.GET
    run = selectors.find_source_run(workspace, (params.get("run") or "")[:200])
    if run is None:
        raise Http404("no such run")
    seq_text = params.get("seq") or ""
    seq = int(seq_text) if seq_text.isdigit() and len(seq_text) < 12 else 0
    found = selectors.event_of(run, seq=seq) if seq >= 1 else None
    if found is None:
        raise Http404("no such event")
    error = ""
    if request.method == "POST":
        try:
            with transaction.atomic():  # a new dataset is not left behind when adding fails
                dataset = _dataset(workspace, request.POST, actor_for(request))
                item = actions.item_from_event(workspace, run.run_id, seq)
                added, revision = actions.do_add_items(
                    dataset=dataset, items=[item], actor=actor_for(request)
                )
        except ActionError as exc:
            error = exc.message
        else:
            return _added(request, dataset, added, revision)
    ctx = {
        "run": run,
        "seq": seq,
        "event": found[1],
        "datasets": list(selectors.datasets_of(workspace).order_by("name")[:500]),
        "chosen": params.get("dataset", ""),
        "error": error,
        "nav_active": "datasets",
    }
    return render(request, "evals/add_event.html", ctx, status=400 if error else 200)
