"""Pages: datasets (list, create, detail with items as of a revision, add from decided gates) and
the experiment compare page (baseline vs candidates per item, worst regressions first, a
regressions-only filter, up to 8 experiments side by side)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers

from evals import actions, presenters, selectors
from runs.actions import ActionError
from runs.actions.permissions import Action
from runs.web.request import actor_for, may, require_action

MAX_COMPARED = 8
MAX_SUMMARY_REGRESSIONS = 5  # per-item regressions the summary lists (the compare page has all)


@login_required
@require_http_methods(["GET", "POST"])
def dataset_list(request: HttpRequest) -> HttpResponse:
    workspace = require_action(request, Action.VIEW_DATASET).workspace
    error = ""
    if request.method == "POST":
        require_action(request, Action.EDIT_DATASET)
        try:
            dataset = actions.do_create_dataset(
                workspace=workspace,
                name=request.POST.get("name", ""),
                description=request.POST.get("description", ""),
                actor=actor_for(request),
            )
        except ActionError as exc:
            error = exc.message
        else:
            return redirect("evals:dataset", dataset_id=dataset.public_id)
    ctx = {
        "datasets": list(selectors.datasets_of(workspace)[:500]),
        "experiments": list(selectors.experiments_of(workspace)[:50]),
        "may_edit": may(request, Action.EDIT_DATASET),
        "error": error,
        "nav_active": "datasets",
    }
    return render(request, "evals/datasets.html", ctx, status=400 if error else 200)


@login_required
@require_http_methods(["GET", "POST"])
def dataset_detail(request: HttpRequest, dataset_id: str) -> HttpResponse:
    workspace = require_action(request, Action.VIEW_DATASET).workspace
    dataset = _found(lambda: selectors.get_dataset(workspace, dataset_id))
    error, notice = "", ""
    if request.method == "POST":
        require_action(request, Action.EDIT_DATASET)
        try:
            upload = request.FILES.get("file")
            if upload is not None:
                is_csv = (upload.name or "").lower().endswith(".csv")
                kind = "text/csv" if is_csv else (upload.content_type or "")
                items = actions.items_from_upload(upload.read(), kind)
            else:
                items = actions.items_from_gates(workspace, request.POST.get("step_id", ""))
            added, revision = actions.do_add_items(dataset=dataset, items=items, actor=actor_for(request))
            notice = f"{added} item{'s' if added != 1 else ''} added (revision {revision})."
        except ActionError as exc:
            error = exc.message
    try:
        revision = actions.resolve_as_of(dataset, request.GET.get("asOf") or None)
    except ActionError as exc:
        error, revision = exc.message, dataset.revision
    ctx = {
        "dataset": dataset,
        "revision": revision,
        "items": selectors.items_at(dataset, revision)[:500],
        "experiments": list(selectors.experiments_of(workspace).filter(dataset=dataset)[:50]),
        "may_edit": may(request, Action.EDIT_DATASET),
        "error": error,
        "notice": notice,
        "nav_active": "datasets",
    }
    return render(request, "evals/dataset.html", ctx, status=400 if error else 200)


def _found(read: Any) -> Any:
    try:
        return read()
    except selectors.EvalNotFound:
        raise Http404("not found") from None


@login_required
@require_GET
@vary_on_headers("HX-Request")
def experiment_compare(request: HttpRequest, experiment_id: str) -> HttpResponse:
    """The candidate against its baseline (or ``?with=`` ids: other experiments of the dataset).
    htmx asks for its status section only (progress, Cancel), every 2 s while it runs."""
    workspace = require_action(request, Action.VIEW_DATASET).workspace
    candidate = _found(lambda: selectors.get_experiment(workspace, experiment_id))
    status = {
        "candidate": candidate,
        "progress": presenters.progress(selectors.experiment_items(candidate)),
        "is_open": candidate.status in ("pending", "running"),
        "can_cancel": may(request, Action.RUN_EXPERIMENT),
        "page_url": reverse("evals:experiment", args=[candidate.public_id]),
    }
    if request.headers.get("HX-Request"):
        return render(request, "evals/compare.html#exp-status", {**status, "was_open": True})
    others = [i for i in request.GET.get("with", "").split(",") if i][: MAX_COMPARED - 1]
    compared = [_found(lambda i=i: selectors.get_experiment(workspace, i)) for i in others]
    if not compared and candidate.baseline_id is not None:
        compared = [candidate.baseline]
    compared = [e for e in compared if e.dataset_id == candidate.dataset_id and e.pk != candidate.pk]
    baseline = compared[0] if compared else None
    columns = [candidate, *compared]
    items = {e.pk: {row.item_key: row for row in selectors.experiment_items(e)} for e in columns}
    expected = {i["id"]: i for i in selectors.items_at(candidate.dataset, candidate.as_of_revision)}
    rows = presenters.compare_rows(candidate, baseline, columns, items, expected)
    only_regressions = request.GET.get("regressions") == "1"
    if only_regressions:
        rows = [r for r in rows if r["regressed"]]
    ctx = {
        "candidate": candidate,
        "baseline": baseline,
        "columns": [presenters.experiment_json(e, []) | {"pk": e.pk} for e in columns],
        "rows": rows,
        "only_regressions": only_regressions,
        "regressions": sum(1 for r in rows if r["regressed"]),
        "with_ids": ",".join(e.public_id for e in compared),
        **status,
        "calibration": presenters.calibration(list(items[candidate.pk].values()), expected),
        "change_rows": presenters.change_rows(candidate.change),
        "nav_active": "experiments",  # the sidebar's Build, Experiments
    }
    return render(request, "evals/compare.html", ctx)


@login_required
@require_POST
def experiment_cancel(request: HttpRequest, experiment_id: str) -> HttpResponse:
    """Cancel a pending or running experiment (its page shows it end)."""
    workspace = require_action(request, Action.RUN_EXPERIMENT).workspace
    experiment = _found(lambda: selectors.get_experiment(workspace, experiment_id))
    try:
        actions.do_cancel_experiment(experiment, actor=actor_for(request))
    except ActionError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, "Experiment cancelled: no item starts and no provider is asked any more.")
    return redirect("evals:experiment", experiment_id=experiment.public_id)


@login_required
@require_GET
def experiment_summary(request: HttpRequest, experiment_id: str) -> HttpResponse:
    """An experiment in a few lines (a fragment): what a prompt promotion in the inbox shows of the
    experiment attached to it. Another workspace's experiment answers 404 like a missing one.
    ``?prompt=name@N`` (the version a promotion asks for): the fragment says whether the experiment
    tested that version (its change is "prompt name version N") or something else."""
    workspace = require_action(request, Action.VIEW_DATASET).workspace
    experiment = _found(lambda: selectors.get_experiment(workspace, experiment_id))
    regressions: list[dict[str, Any]] = []
    if experiment.baseline_id is not None:
        columns = [experiment, experiment.baseline]
        items = {e.pk: {row.item_key: row for row in selectors.experiment_items(e)} for e in columns}
        rows = presenters.compare_rows(experiment, experiment.baseline, columns, items, {})
        regressions = [r for r in rows if r["regressed"]]
    ctx = {
        "experiment": experiment,
        "summary": experiment.summary or {},
        "url": reverse("evals:experiment", args=[experiment.public_id]),
        "regressions": regressions[:MAX_SUMMARY_REGRESSIONS],
        "more_regressions": max(0, len(regressions) - MAX_SUMMARY_REGRESSIONS),
        # every item failed: the fragment says so and why, never "completed on 6 items"
        "failed_all": selectors.failed_experiment_concern(workspace, experiment.public_id),
        **presenters.prompt_match(experiment.change or {}, request.GET.get("prompt", "")[:220]),
    }
    return render(request, "evals/_experiment_summary.html", ctx)
