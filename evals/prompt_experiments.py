"""Start an experiment whose change is a prompt version: "test support/draft version 2 on a
dataset". The prompt page links here (``?prompt=name@N``: runs only links, it never imports
evals); the form picks the dataset and, optionally, a baseline over the same dataset to compare
with. The experiment runs as a task; its id is what a promotion request attaches.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from evals import actions, selectors
from evals.models import ExperimentStatus
from evals.runner import enqueue
from runs.actions import ActionError
from runs.actions.permissions import Action
from runs.selectors.prompts import find_version, parse_prompt_filter
from runs.web.request import actor_for, may, require_action


@login_required
@require_http_methods(["GET", "POST"])
def new_prompt_experiment(request: HttpRequest) -> HttpResponse:
    workspace = require_action(request, Action.VIEW_DATASET).workspace
    if request.method == "POST":
        require_action(request, Action.RUN_EXPERIMENT)  # before any lookup: a viewer learns nothing
    params = request.POST if request.method == "POST" else request.GET
    ref = parse_prompt_filter(str(params.get("prompt", ""))[:220])
    version = find_version(workspace, ref[0], version=ref[1]) if ref else None
    if version is None:
        raise Http404("no such prompt version (prompt=name@N)")
    error = ""
    if request.method == "POST":
        try:
            experiment = _create(request, workspace, version.prompt.name, version.number)
        except ActionError as exc:
            error = f"{exc.code}: {exc.message}"
        else:
            enqueue(experiment)
            messages.success(
                request,
                f"Experiment {experiment.public_id} started: attach its id when you ask to promote "
                f"{version.prompt.name} version {version.number}.",
            )
            return redirect("evals:experiment", experiment_id=experiment.public_id)
    ctx = {
        "version": version,
        "ref": f"{version.prompt.name}@{version.number}",
        "datasets": list(selectors.datasets_of(workspace)[:500]),
        "baselines": list(
            selectors.experiments_of(workspace)
            .filter(status=ExperimentStatus.COMPLETED)
            .select_related("dataset")[:100]
        ),
        "may_run": may(request, Action.RUN_EXPERIMENT),
        "error": error,
        "nav_active": "prompts",
    }
    return render(request, "evals/new_prompt_experiment.html", ctx, status=400 if error else 200)


def _create(request: HttpRequest, workspace, name: str, number: int):
    try:
        dataset = selectors.get_dataset(workspace, request.POST.get("dataset", "")[:200])
    except selectors.EvalNotFound:
        raise ActionError("INVALID_INPUT", "choose a dataset of this workspace", "dataset") from None
    runnable, total, missing = selectors.unrunnable_workflows(workspace, dataset)
    if runnable == 0:
        because = (
            f"workflow {', '.join(missing)} has no step code in this workbench (its host replays it)"
            if missing
            else "its items have no source run here"
        )
        raise ActionError(
            "NOT_EXECUTABLE",
            f"the prompt cannot run on dataset {dataset.name}: none of its {total} items can, {because}. "
            "Choose a dataset recorded from a workflow the workbench runs",
            "dataset",
        )
    baseline = None
    if request.POST.get("baseline"):
        try:
            baseline = selectors.get_experiment(workspace, request.POST["baseline"][:200])
        except selectors.EvalNotFound:
            raise ActionError("INVALID_INPUT", "no such baseline experiment", "baseline") from None
    return actions.do_create_experiment(
        workspace=workspace,
        dataset=dataset,
        name=request.POST.get("name") or f"{name} version {number}",
        change={"prompt": {"name": name, "version": number}},
        baseline=baseline,
        actor=actor_for(request),
    )
