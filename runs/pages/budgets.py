"""Settings, Budgets: the workspace's monthly cap and spend this month, run budgets (the default,
per workflow, one run's), and the budget trail. Members see them; the providers' admins set the
cap and the budgets; reviewers raise a run's budget (its waiting ``budget`` gate goes on)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from runs.actions import ActionError, budgets
from runs.actions.gatepolicy import do_raise_run_budget
from runs.actions.permissions import Action
from runs.selectors.budgets import month_spend, records, settings_of, workflow_limits
from runs.web.request import AuthenticatedHttpRequest, actor_for, may, require_action


def _save(request: AuthenticatedHttpRequest) -> None:
    membership = require_action(request, Action.MANAGE_PROVIDERS)
    post = request.POST
    workflows = {}
    for workflow_id, limit in zip(post.getlist("workflow_id"), post.getlist("workflow_limit"), strict=False):
        if workflow_id.strip():
            workflows[workflow_id.strip()] = limit
    budgets.do_set_budgets(
        workspace=membership.workspace,
        monthly_cap=post.get("monthly_cap", ""),
        run_default=post.get("run_default", ""),
        currency=post.get("currency", "USD"),
        workflows=workflows,
        user=request.user,
        actor=actor_for(request),
    )
    messages.success(request, "Budgets saved.")


def still_waiting(raised: dict[str, Any]) -> str:
    """What a raise that is one approval of a quorum leaves to do (runs.actions.gatepolicy.
    do_raise_run_budget); nothing for a raise that let the run go on or met no gate."""
    if raised.get("resumed", True) or "quorum" not in raised:
        return ""
    return f" The run goes on once {raised['quorum']} approve ({raised['approvals']} of {raised['quorum']} so far)."


def _raise(request: AuthenticatedHttpRequest) -> None:
    membership = require_action(request, Action.RESOLVE_GATE)
    result = do_raise_run_budget(
        workspace=membership.workspace,
        run_id=request.POST.get("run_id", "").strip(),
        limit=request.POST.get("limit", ""),
        actor=actor_for(request),
    )
    said = " The run goes on." if result["resumed"] else still_waiting(result)
    messages.success(request, f"{result['note']}.{said}")


@login_required
@require_http_methods(["GET", "POST"])
def budgets_page(request: AuthenticatedHttpRequest) -> HttpResponse:
    membership = require_action(request, Action.VIEW_RUN)
    workspace = membership.workspace
    if request.method == "POST":
        op = request.POST.get("op")
        # raising a run's budget is a gate decision (reviewers); every other write sets the budgets
        require_action(request, Action.RESOLVE_GATE if op == "raise" else Action.MANAGE_PROVIDERS)
        try:
            if op == "save":
                _save(request)
            elif op == "raise":
                _raise(request)
            else:
                messages.error(request, "INVALID_INPUT: unknown operation")
        except ActionError as exc:
            messages.error(request, f"{exc.code}: {exc.message} Nothing was changed.")
        return redirect("runs:budgets")
    budget = settings_of(workspace)
    currency = budget.currency if budget is not None else "USD"
    cap = budget.monthly_cap if budget is not None else None
    spent = month_spend(workspace, currency)
    return render(
        request,
        "runs/budgets.html",
        {
            "budget": budget,
            "currency": currency,
            "cap": cap,
            "spent": spent,
            "past_cap": cap is not None and spent >= cap,
            "self_reported": budgets.SELF_REPORTED,
            "workflows": workflow_limits(workspace),
            "records": records(workspace, limit=50),
            "may_set": may(request, Action.MANAGE_PROVIDERS),
            "may_raise": may(request, Action.RESOLVE_GATE),
            "nav_active": "budgets",
        },
    )
