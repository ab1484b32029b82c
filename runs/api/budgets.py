"""Budgets over REST.

``GET /api/budgets``: the workspace's monthly cap, its spend this month, the default run budget,
the per-workflow run budgets and the latest budget records (read scope). ``PUT /api/budgets``:
set them (the providers' admins). ``POST /api/runs/{id}/budget/check``: before a model call (the
SDK's traced clients ask): allowed, or the run pauses at its ``budget`` gate and the answer names
it (write scope). ``POST /api/runs/{id}/budget``: set or raise the run's budget (``{"limit"}``: an
open ``budget`` gate is approved with a decision naming the new limit) or stop it there
(``{"stop": true}``) (reviewers).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema
from pydantic import Field

from runs.actions import budgets
from runs.actions.gatepolicy import do_raise_run_budget, do_stop_at_budget
from runs.actions.permissions import Action
from runs.api.responses import readable_run, require
from runs.api.schemas import ErrorOut
from runs.selectors.budgets import month_spend, records, run_limit, run_spend, settings_of, workflow_limits

router = Router(tags=["budgets"])
runs_router = Router(tags=["budgets"])

ERRORS = {
    400: ErrorOut,
    401: ErrorOut,
    402: ErrorOut,
    403: ErrorOut,
    404: ErrorOut,
    409: ErrorOut,
    429: ErrorOut,
}


class BudgetsIn(Schema):
    monthlyCap: str | float | None = Field(
        default=None, description="Monthly cap (decimal text); null: none."
    )
    runDefault: str | float | None = Field(default=None, description="Default run budget; null: none.")
    currency: str = Field(default="USD", max_length=8)
    workflows: dict[str, str | float | None] = Field(
        default_factory=dict, description="Run budget per workflow id; null removes the workflow's own."
    )


class CheckIn(Schema):
    stepId: str | None = Field(default=None, max_length=200, description="The step the call belongs to.")


class RunBudgetIn(Schema):
    limit: str | float | None = Field(default=None, description="The run's new budget (decimal text).")
    stop: bool = Field(default=False, description="Stop the run at its waiting budget gate instead.")


def budgets_doc(workspace) -> dict[str, Any]:
    budget = settings_of(workspace)
    currency = budget.currency if budget is not None else "USD"
    cap = budget.monthly_cap if budget is not None else None
    spent = month_spend(workspace, currency)
    return {
        "currency": currency,
        "monthlyCap": f"{cap:f}" if cap is not None else None,
        "spentThisMonth": f"{spent:f}",
        "pastCap": cap is not None and spent >= cap,
        "selfReported": budgets.SELF_REPORTED,
        "runDefault": f"{budget.run_default:f}"
        if budget is not None and budget.run_default is not None
        else None,
        "workflows": {w.workflow_id: f"{w.run_limit:f}" for w in workflow_limits(workspace)},
        "records": [
            {
                "at": r.at.isoformat(),
                "kind": r.kind,
                "runId": r.run_id or None,
                "actor": r.actor,
                "message": r.message,
            }
            for r in records(workspace, limit=50)
        ],
    }


@router.get(
    "", response={200: dict[str, Any], **ERRORS}, summary="The workspace's budgets and spend this month"
)
def get_budgets(request: HttpRequest):
    caller = require(request, Action.VIEW_RUN)
    return budgets_doc(caller.workspace)


@router.put("", response={200: dict[str, Any], **ERRORS}, summary="Set the monthly cap and the run budgets")
def put_budgets(request: HttpRequest, payload: BudgetsIn):
    caller = require(request, Action.MANAGE_PROVIDERS)
    budgets.do_set_budgets(
        workspace=caller.workspace,
        monthly_cap=payload.monthlyCap,
        run_default=payload.runDefault,
        currency=payload.currency,
        workflows=payload.workflows,
        actor=caller.actor,
    )
    return budgets_doc(caller.workspace)


@runs_router.get(
    "/{runid:run_id}/budget", response={200: dict[str, Any], **ERRORS}, summary="A run's budget and spend"
)
def get_run_budget(request: HttpRequest, run_id: str):
    caller = require(request, Action.VIEW_RUN)
    run = readable_run(caller, run_id)
    limit = run_limit(run, settings_of(caller.workspace))
    currency = limit.currency if limit is not None else "USD"
    return {
        "runId": run.run_id,
        "limit": f"{limit.amount:f}" if limit is not None else None,
        "source": limit.source if limit is not None else None,
        "currency": currency,
        "spent": f"{run_spend(run, currency):f}",
        "records": [
            {"at": r.at.isoformat(), "kind": r.kind, "actor": r.actor, "message": r.message}
            for r in records(caller.workspace, run_id=run.run_id)
        ],
    }


@runs_router.post(
    "/{runid:run_id}/budget/check",
    response={200: dict[str, Any], **ERRORS},
    summary="Before a model call: allowed, or paused at the run's budget gate",
)
def check_budget(request: HttpRequest, run_id: str, payload: CheckIn):
    caller = require(request, Action.APPEND_EVENTS)
    return budgets.check_run_budget(
        workspace=caller.workspace, run_id=run_id, step_id=payload.stepId, actor=caller.actor
    )


@runs_router.post(
    "/{runid:run_id}/budget",
    response={200: dict[str, Any], **ERRORS},
    summary="Set or raise a run's budget (its budget gate goes on), or stop it there",
)
def set_run_budget(request: HttpRequest, run_id: str, payload: RunBudgetIn):
    caller = require(request, Action.RESOLVE_GATE)
    if payload.stop:
        return do_stop_at_budget(workspace=caller.workspace, run_id=run_id, actor=caller.actor, channel="api")
    return do_raise_run_budget(
        workspace=caller.workspace, run_id=run_id, limit=payload.limit, actor=caller.actor, channel="api"
    )
