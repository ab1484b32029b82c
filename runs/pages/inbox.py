"""The reviewer's inbox: every pending gate of the workspace, decided right in its row."""

from __future__ import annotations

import re
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from runs.actions.budgets import is_budget_gate, money
from runs.actions.permissions import Action, minimum_role
from runs.models import Run
from runs.pages.prompts import promotion_item
from runs.protocol.timestamps import to_datetime
from runs.selectors.budgets import run_limit, run_spend, settings_of
from runs.selectors.gatepolicy import GateStatus, gate_status, workspace_layers
from runs.selectors.gates import recent_decisions
from runs.selectors.prompts import pending_promotions
from runs.selectors.run_list import inbox_page, runs_waiting_for_review
from runs.selectors.runs import BadCursor, run_state
from runs.web.request import (
    HtmxHttpRequest,
    current_membership,
    current_workspace,
    may,
)

INBOX_LIMIT = 50  # runs per keyset page
ROW_KEY = re.compile(r"[0-9-]{1,40}")


def budget_spend(run: Run) -> dict[str, str]:
    """What a run waiting at its ``budget`` gate has spent against its budget, in words."""
    settings = settings_of(run.workspace)
    limit = run_limit(run, settings)
    currency = limit.currency if limit is not None else (settings.currency if settings else "USD")
    spent = money(run_spend(run, currency), currency)
    if limit is None:
        return {"currency": currency, "said": f"Spent {spent}; the run has no budget now."}
    said = f"Spent {spent} of its budget of {money(limit.amount, currency)} ({limit.source} budget)."
    return {"currency": currency, "said": said}


def inbox_row_context(
    run: Run,
    gate: dict[str, Any],
    *,
    key: str,
    can_review: bool,
    decided: str = "",
    policy: GateStatus | None = None,
    username: str = "",
) -> dict[str, Any]:
    """One inbox row: the run, its waiting gate, and (after a decision from the row) what was decided.
    `key` makes the row's field ids unique on the page (digits and dashes only); `policy`: the
    gate's policy status (read here when not given, for `username`). A run's ``budget`` gate says
    what the run spent against its budget (`budget`): it goes on only with a new limit."""
    if policy is None:
        policy = gate_status(run, run_state(run).run, gate, username=username)
    budget = budget_spend(run) if is_budget_gate(gate.get("gate"), gate.get("checkpoint")) else None
    return {
        "item": {
            "run": run,
            "gate": gate,
            "key": key if ROW_KEY.fullmatch(key or "") else "0",
            "since": to_datetime(gate.get("requestedAt")) if gate.get("requestedAt") else None,
            "policy": policy,
            "budget": budget,
        },
        "can_review": can_review,
        "decided": decided,
    }


@login_required
@require_GET
@vary_on_headers("HX-Request")
def review_inbox(request: HtmxHttpRequest) -> HttpResponse:
    """Every pending gate across the workspace's runs (the reviewer's inbox)."""
    workspace = current_workspace(request)
    cursor = request.GET.get("cursor", "")
    try:
        runs, next_cursor = inbox_page(workspace, limit=INBOX_LIMIT, cursor=cursor)
    except BadCursor:
        return HttpResponseBadRequest("bad cursor")
    can_review = may(request, Action.RESOLVE_GATE)
    assigned_only = request.GET.get("assigned") == "me"  # "assigned to me": gates whose policy names me
    membership = current_membership(request)
    role = membership.role if membership else None
    username = request.user.get_username()
    items = []
    layers: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        state = run_state(run)
        if run.workflow_id not in layers:
            layers[run.workflow_id] = workspace_layers(workspace, run.workflow_id)
        for i, gate in enumerate(state.pending_gates()):
            status = gate_status(
                run, state.run, gate, username=username, role=role, layers=layers[run.workflow_id]
            )
            if assigned_only and not status.assigned:
                continue
            item = inbox_row_context(run, gate, key=f"{run.pk}-{i}", can_review=can_review, policy=status)
            items.append(item["item"])
    return render(
        request,
        "runs/inbox.html#inbox_table" if request.htmx else "runs/inbox.html",
        {
            "items": items,
            "runs_count": len(runs),
            "next_cursor": next_cursor,
            "cursor": cursor,
            "limit": INBOX_LIMIT,
            "nav_active": "inbox",
            "can_review": can_review,
            # who may raise a run's budget at its gate (the gate panel's and REST's right)
            "raise_role": minimum_role(Action.RESOLVE_GATE),
            "assigned_only": assigned_only,
            # prompt promotion requests: gates of their own (templates/runs/_promotion_requests.html)
            "promotions": [promotion_item(r, request.user) for r in pending_promotions(workspace)],
            "can_decide_promotions": may(request, Action.DECIDE_PROMOTION),
            # the history: recent decisions, a gate judge's marked as machine decisions
            "recent": [] if request.htmx else recent_decisions(workspace),
        },
    )


@login_required
@require_GET
def next_gate(request: HttpRequest) -> HttpResponse:
    """The gate panel's "Next gate": the run after `?after=<run id>` (in the inbox's order, wrapping
    around) that waits for review, at its gates; the inbox when no other run waits."""
    workspace = current_workspace(request)
    ids = [run.run_id for run in runs_waiting_for_review(workspace, limit=INBOX_LIMIT)]
    after = request.GET.get("after", "")
    if after in ids:
        ids = ids[ids.index(after) + 1 :] + ids[: ids.index(after)]
    if not ids:
        return redirect("runs:inbox")
    return redirect(reverse("runs:detail", args=[ids[0]]) + "#gate-panel")
