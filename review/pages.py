"""Annotation queue pages: the list (owners create queues), a queue (progress, agreement, start
reviewing), reviewing one item (the run's timeline partial beside the score form, keyboard flow in
static/workbench/review.js), and adding runs from the run page or the filtered runs list.

Rights: viewing needs VIEW_RUN, reviewing REVIEW_QUEUE_ITEMS, managing MANAGE_QUEUES (the one
table in runs.actions.permissions). Another workspace's queue or item is a 404, as a missing one.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from review import actions as review_actions
from review.models import Item, ItemKind, Queue
from review.selectors import (
    QueueNotFound,
    agreement_by_config,
    get_item,
    get_queue,
    progress,
    queues_with_counts,
    visible_scores,
)
from runs.actions import ActionError
from runs.actions.permissions import Action
from runs.selectors.run_list import RunListFilters, runs_page
from runs.selectors.runs import TimelineFilters
from runs.web.partials import timeline_context
from runs.web.request import actor_for, current_workspace, get_run_for_user, may, require_action

ADD_FILTERED_MAX = 5000  # runs added from one filtered list


def queue_for(request: HttpRequest, queue_id: str) -> Queue:
    try:
        return get_queue(current_workspace(request), queue_id)
    except QueueNotFound:
        raise Http404("no such queue") from None


def parse_configs(text: str) -> list[dict[str, Any]]:
    """One score config per line: ``name: 1-5`` (numeric), ``name: yes/no`` (boolean),
    ``name: good | fair | bad`` (categorical); `` -- description`` after any of them."""
    configs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        head, _, description = line.partition(" -- ")
        name, _, spec = head.partition(":")
        spec = spec.strip()
        config: dict[str, Any] = {"name": name.strip(), "description": description.strip()}
        low, dash, high = spec.partition("-")
        if spec.lower() in ("yes/no", "boolean", "bool"):
            config["dataType"] = "BOOLEAN"
        elif dash and low.strip().lstrip("-").replace(".", "", 1).isdigit():
            config.update(
                dataType="NUMERIC", minValue=float(low), maxValue=float(high) if high.strip() else None
            )
        elif "|" in spec:
            labels = [s.strip() for s in spec.split("|") if s.strip()]
            config.update(
                dataType="CATEGORICAL", categories=[{"label": s, "value": i} for i, s in enumerate(labels)]
            )
        else:
            config["dataType"] = "NUMERIC"
        configs.append(config)
    return configs


def rules_from_form(post: Any) -> dict[str, Any]:
    """The new-queue form's rule fields as review.rules (checked by the action)."""
    rules: dict[str, Any] = {}
    if post.get("rule_rejected") == "on":
        rules["rejectedGates"] = True
    if post.get("rule_errors") == "on":
        rules["errors"] = True
    if post.get("rule_cost", "").strip():
        rules["costAbove"] = {"USD": post["rule_cost"].strip()}
    if post.get("rule_sample", "").strip():
        rules["samplePercent"] = float(post["rule_sample"])
    if post.get("rule_workflow", "").strip():
        rules["workflowId"] = post["rule_workflow"].strip()
    return rules


@login_required
@require_http_methods(["GET", "POST"])
def queues(request: HttpRequest) -> HttpResponse:
    workspace = current_workspace(request)
    require_action(request, Action.VIEW_RUN)
    errors: dict[str, str] = {}
    if request.method == "POST":
        require_action(request, Action.MANAGE_QUEUES)
        post = request.POST
        try:
            queue = review_actions.do_create_queue(
                workspace=workspace,
                name=post.get("name", ""),
                instructions=post.get("instructions", ""),
                score_configs=parse_configs(post.get("configs", "")),
                reviews_per_item=int(post.get("reviews_per_item") or 1),
                reservation_seconds=int(post.get("reservation_minutes") or 10) * 60,
                blind=post.get("blind") == "on",
                rules=rules_from_form(post),
                default_dataset=post.get("default_dataset", "").strip(),
                reviewers=[n.strip() for n in post.get("reviewers", "").split(",") if n.strip()],
                actor=actor_for(request),
            )
        except (ValueError, ActionError) as exc:
            field = (getattr(exc, "path", "") or "configs").split(".")[0].split("[")[0]
            field = {
                "scoreConfigs": "configs",
                "reviewsPerItem": "reviews_per_item",
                "defaultDataset": "default_dataset",
            }.get(field, field)
            errors[field if field in ("name", "configs", "reviews_per_item", "rules") else "configs"] = (
                f"{exc.message[:1].upper()}{exc.message[1:]}."
                if isinstance(exc, ActionError)
                else "Enter whole numbers."
            )
        else:
            messages.success(request, f"Queue “{queue.name}” created.")
            return redirect("review:queue", queue_id=queue.queue_id)
    context = {
        "queues": queues_with_counts(workspace),
        "can_manage": may(request, Action.MANAGE_QUEUES),
        "errors": errors,
        "form": request.POST if request.method == "POST" else {},
        "nav_active": "review",
    }
    return render(request, "review/queues.html", context, status=422 if errors else 200)


@login_required
@require_http_methods(["GET"])
def queue_detail(request: HttpRequest, queue_id: str) -> HttpResponse:
    queue = queue_for(request, queue_id)
    context = {
        "queue": queue,
        "configs": list(queue.score_configs.all()),
        "progress": progress(queue),
        "agreement": agreement_by_config(queue),
        "can_review": may(request, Action.REVIEW_QUEUE_ITEMS),
        "can_manage": may(request, Action.MANAGE_QUEUES),
        "nav_active": "review",
    }
    return render(request, "review/queue.html", context)


@login_required
@require_POST
def claim_next(request: HttpRequest, queue_id: str) -> HttpResponse:
    queue = queue_for(request, queue_id)
    require_action(request, Action.REVIEW_QUEUE_ITEMS)
    item = review_actions.do_claim_next(queue=queue, user=request.user)
    if item is None:
        messages.info(request, "Nothing left for you in this queue.")
        return redirect("review:queue", queue_id=queue.queue_id)
    return redirect("review:item", queue_id=queue.queue_id, item_id=item.item_id)


def item_timeline(item: Item) -> dict[str, Any]:
    """The run page's timeline partial, narrowed to the item (its step, or the page of its event)."""
    if item.kind == ItemKind.STEP:
        return timeline_context(item.run, filters=TimelineFilters(step=item.step_id), limit=30)
    if item.kind == ItemKind.EVENT:
        return timeline_context(item.run, after=max(0, item.seq - 5), limit=11)
    return timeline_context(item.run, after=max(0, item.run.last_seq - 30), limit=30)


@login_required
@require_http_methods(["GET", "POST"])
def review_item(request: HttpRequest, queue_id: str, item_id: str) -> HttpResponse:
    queue = queue_for(request, queue_id)
    try:
        item = get_item(queue, item_id)
    except QueueNotFound:
        raise Http404("no such item") from None
    error, error_field = "", ""
    if request.method == "POST":
        require_action(request, Action.REVIEW_QUEUE_ITEMS)
        post = request.POST
        try:
            if post.get("op") == "skip":
                review_actions.do_skip(item=item, user=request.user)
                messages.info(request, "Skipped.")
            else:
                answers = {
                    c.name: post.get(f"score-{c.name}", "")
                    for c in queue.score_configs.filter(is_archived=False)
                }
                review_actions.do_submit_review(
                    item=item,
                    user=request.user,
                    answers=answers,
                    comment=post.get("comment", ""),
                    actor=actor_for(request),
                )
                messages.success(request, "Review saved.")
            return claim_next(request, queue_id)
        except ActionError as exc:
            error = exc.message[:1].upper() + exc.message[1:] + "."
            error_field = exc.path.removeprefix("scores.") if exc.path.startswith("scores.") else ""
    configs = list(queue.score_configs.filter(is_archived=False))
    for c in configs:
        c.posted = request.POST.get(f"score-{c.name}", "") if request.method == "POST" else ""  # type: ignore[attr-defined]
        c.error = error if error_field == c.name else ""  # type: ignore[attr-defined]
    context = {
        "queue": queue,
        "item": item,
        "run": item.run,
        "configs": configs,
        "error": "" if error_field else error,
        "others": visible_scores(item, request.user),
        "can_review": may(request, Action.REVIEW_QUEUE_ITEMS),
        "nav_active": "review",
    }
    context = {**item_timeline(item), **context}  # the run page's timeline partial reads these
    return render(request, "review/item.html", context, status=422 if error else 200)


@login_required
@require_POST
def delete_queue(request: HttpRequest, queue_id: str) -> HttpResponse:
    queue = queue_for(request, queue_id)
    require_action(request, Action.MANAGE_QUEUES)
    review_actions.do_delete_queue(queue=queue)
    messages.success(request, f"Queue “{queue.name}” deleted; its reviews stay on their runs.")
    return redirect("review:queues")


def pick_queue(request: HttpRequest, *, title: str, hidden: dict[str, str]) -> HttpResponse:
    """The small form that chooses a queue (GET of the two "add" views)."""
    context = {
        "queues": queues_with_counts(current_workspace(request)),
        "title": title,
        "hidden": hidden,
        "nav_active": "review",
    }
    return render(request, "review/add.html", context)


@login_required
@require_http_methods(["GET", "POST"])
def add_run(request: HttpRequest, run_id: str) -> HttpResponse:
    """From a run page: the run (or one of its steps) into a queue."""
    run = get_run_for_user(request, run_id)
    require_action(request, Action.MANAGE_QUEUES)
    step = request.POST.get("step", "") or request.GET.get("step", "")
    if request.method == "GET":
        what = f"step {step} of " if step else ""
        return pick_queue(
            request, title=f"Add {what}“{run.title or run.run_id}” to a review queue", hidden={"step": step}
        )
    queue = queue_for(request, request.POST.get("queue", ""))
    target = {"runId": run.run_id, **({"kind": "step", "stepId": step} if step else {})}
    try:
        added = review_actions.do_add_items(queue=queue, items=[target], actor=actor_for(request))
    except ActionError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(
            request, f"Added to “{queue.name}”." if added.added else f"Already in “{queue.name}”."
        )
    return redirect(reverse("runs:detail", args=[run.run_id]))


@login_required
@require_http_methods(["GET", "POST"])
def add_filtered_runs(request: HttpRequest) -> HttpResponse:
    """From the runs list: every run the list's filters select, across all its pages."""
    require_action(request, Action.MANAGE_QUEUES)
    params = request.POST if request.method == "POST" else request.GET
    filters = RunListFilters.from_query(params)
    if request.method == "GET":
        said = ", ".join(f"{k} {v}" for k, v in vars(filters).items() if v) or "no filter: every run"
        hidden = {k: v for k, v in vars(filters).items() if v}
        return pick_queue(request, title=f"Add the runs listed ({said}) to a review queue", hidden=hidden)
    queue = queue_for(request, params.get("queue", ""))
    # as the runs list: a gate judge's own calls only for those who may manage judges
    filters.hide_judge_calls = not may(request, Action.MANAGE_JUDGES)
    run_ids: list[str] = []
    cursor = ""
    while len(run_ids) < ADD_FILTERED_MAX:
        page, cursor = runs_page(queue.workspace, filters, cursor=cursor, limit=500)
        run_ids += [r.run_id for r in page]
        if not cursor:
            break
    added = review_actions.AddedItems(0, 0)
    run_ids = run_ids[:ADD_FILTERED_MAX]
    for start in range(0, len(run_ids), review_actions.ITEMS_MAX):
        chunk = run_ids[start : start + review_actions.ITEMS_MAX]
        got = review_actions.do_add_items(
            queue=queue, items=[{"runId": r} for r in chunk], actor=actor_for(request)
        )
        added = review_actions.AddedItems(added.added + got.added, added.already + got.already)
    messages.success(
        request,
        f"{added.added} run{'s' if added.added != 1 else ''} added to “{queue.name}” ({added.already} already there).",
    )
    return redirect("review:queue", queue_id=queue.queue_id)
