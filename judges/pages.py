"""Pages: the workspace's gate judges (list, attach a new one) and one judge (agreement with
people over the rolling window, a chart of kappa over time, its proposals, the owner's policy)."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from judges import actions, presenters, selectors, stats
from judges.models import MIN_FLOOR, MIN_ITEMS, Delegation, GateJudge
from judges.rescore import do_rescore
from runs.actions import ActionError
from runs.actions.permissions import Action
from runs.presenters.dashboard import calendar
from runs.web.request import actor_for, may, require_action


def _judge(request: HttpRequest, judge_id: str, action: Action) -> GateJudge:
    workspace = require_action(request, action).workspace
    try:
        return selectors.get_judge(workspace, judge_id)
    except selectors.JudgeNotFound:
        raise Http404("no such judge") from None


def _config(post: Any) -> tuple[Any, str]:
    """The judge's config from the form; (config, error)."""
    if post.get("kind") == "rule":
        try:
            rules = json.loads(post.get("rules") or "{}")
        except ValueError:
            return None, 'Rules are JSON, e.g. {"errors": true}.'
        return {"rules": rules, "onMatch": post.get("on_match") or "rejected"}, ""
    number = post.get("prompt_version", "")
    return {
        "provider": post.get("provider") or "anthropic",
        "model": post.get("model", ""),
        "prompt": post.get("prompt", ""),
        "promptVersion": int(number) if number.isdigit() else number,
    }, ""


@login_required
@require_http_methods(["GET", "POST"])
def judge_list(request: HttpRequest) -> HttpResponse:
    workspace = require_action(request, Action.VIEW_RUN).workspace
    error = ""
    if request.method == "POST":
        require_action(request, Action.MANAGE_JUDGES)
        config, error = _config(request.POST)
        if not error:
            try:
                judge = actions.do_create_judge(
                    workspace=workspace,
                    name=request.POST.get("name", ""),
                    kind=request.POST.get("kind", ""),
                    workflow_id=request.POST.get("workflow_id", ""),
                    step_id=request.POST.get("step_id", ""),
                    gate=request.POST.get("gate", ""),
                    checkpoint=request.POST.get("checkpoint", ""),
                    config=config,
                    budget=request.POST.get("budget", ""),
                    actor=actor_for(request),
                )
            except ActionError as exc:
                error = f"{exc.message} ({exc.code})"
            else:
                return redirect("judges:judge", judge.judge_id)
    context = {
        "judges": list(selectors.judges_of(workspace)),
        "can_manage": may(request, Action.MANAGE_JUDGES),
        "error": error,
        "form": request.POST if error else {},
        "nav_active": "judges",
    }
    return render(request, "judges/judges.html", context, status=400 if error else 200)


def _detail_context(request: HttpRequest, judge: GateJudge) -> dict[str, Any]:
    now = timezone.now()
    agreement = selectors.agreement_of(judge, now=now)
    earned, why = stats.meets(agreement, floor=judge.kappa_floor, min_items=MIN_ITEMS)
    days = calendar((now - timedelta(days=selectors.CHART_DAYS - 1)).date(), now.date())
    can_manage = may(request, Action.MANAGE_JUDGES)
    pending = selectors.sees_pending(judge, may_manage=can_manage)
    return {
        "nav_active": "judges",
        "judge": judge,
        "agreement": agreement,
        "rows": presenters.agreement_rows(agreement),
        "audit": selectors.agreement_of(judge, now=now, audit_only=True) if judge.delegated_at else None,
        "earned": earned,
        "why": why,
        "chart": presenters.kappa_chart(selectors.kappa_series(judge, now=now), days),
        "proposals": selectors.recent_proposals(judge, pending=pending),
        "withheld": 0 if pending else selectors.withheld_count(judge),
        "counts": selectors.proposal_counts(judge),
        "can_manage": can_manage,
        "delegations": Delegation.choices,
        "min_floor": MIN_FLOOR,
        "min_items": MIN_ITEMS,
    }


@login_required
@require_GET
def judge_detail(request: HttpRequest, judge_id: str) -> HttpResponse:
    judge = _judge(request, judge_id, Action.VIEW_RUN)
    return render(request, "judges/judge.html", _detail_context(request, judge))


@login_required
@require_POST
def judge_policy(request: HttpRequest, judge_id: str) -> HttpResponse:
    judge = _judge(request, judge_id, Action.MANAGE_JUDGES)
    post = request.POST
    try:
        actions.do_set_policy(
            judge,
            delegation=post.get("delegation") or None,
            min_confidence=post.get("min_confidence") or None,
            kappa_floor=post.get("kappa_floor") or None,
            audit_percent=post.get("audit_percent") or None,
            window_days=post.get("window_days") or None,
            online_percent=post.get("online_percent") or None,
            show_to_reviewers=post.get("show_to_reviewers") == "on",
            budget=post.get("budget", ""),
            enabled=post.get("enabled") == "on",
        )
    except ActionError as exc:
        judge.refresh_from_db()
        context = {**_detail_context(request, judge), "policy_error": f"{exc.message} ({exc.code})"}
        return render(request, "judges/judge.html", context, status=400)
    return redirect(reverse("judges:judge", args=[judge.judge_id]) + "#policy")


@login_required
@require_POST
def judge_rescore(request: HttpRequest, judge_id: str) -> HttpResponse:
    """Online evaluation: this version scores the runs its older versions scored (a task)."""
    judge = _judge(request, judge_id, Action.MANAGE_JUDGES)
    try:
        runs = do_rescore(judge)
    except ActionError as exc:
        messages.error(request, f"{exc.message} ({exc.code})")
    else:
        messages.success(
            request, f"Re-scoring {runs} run{'s' if runs != 1 else ''} with {judge.label} in the background."
        )
    return redirect(reverse("judges:judge", args=[judge.judge_id]) + "#online")
