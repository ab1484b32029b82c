"""Prompt pages: the workspace's prompts (owners protect labels here), one prompt's versions with
their labels, a side-by-side diff of any two versions, the runs that used a version, moving a label
(a protected one asks for a promotion), and deciding a promotion request (from the inbox).

Rights come from the permission table (runs.actions.permissions); the actions check again.
Another workspace's prompt or promotion request answers 404 like a missing one.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST

from runs.actions import ActionError
from runs.actions.permissions import ROLE_SCOPES, Action
from runs.actions.prompts import do_decide_promotion, do_move_label, do_protect_label, promotion_concerns
from runs.models import Membership, PromotionRequest
from runs.pages.params import int_param
from runs.presenters.prompts import render_version
from runs.selectors import prompts as sel
from runs.web.refusals import refusal
from runs.web.request import current_workspace, may, require_action


def _scopes(membership: Membership | None) -> frozenset[str]:
    return ROLE_SCOPES.get(membership.role, frozenset()) if membership else frozenset()


# An experiment's public id (evals: new_id("exp")); any other text attached to a request is shown as text.
EXPERIMENT_REF = re.compile(r"exp_[0-9a-f-]{36}")


def promotion_item(request: PromotionRequest, user: Any = None) -> dict[str, Any]:
    """One promotion request as the inbox shows it: the versions, their diff, who asked, and the
    experiment attached to it (its summary is a fragment of the evals pages, fetched by URL name so
    runs never imports evals; that page answers 404 for another workspace's experiment)."""
    ref = request.experiment_ref
    asked = urlencode({"prompt": f"{request.prompt.name}@{request.to_version.number}"})
    return {
        "request": request,
        # separation of duties: whoever asked is not offered Approve (the action refuses it too)
        "self_requested": user is not None and request.requested_by_id == getattr(user, "pk", None),
        # what stands against approving (its experiment failed on every item): an override is asked
        "concerns": promotion_concerns(request.workspace, request),
        "diff": sel.promotion_diff(request.from_version, request.to_version),
        "url": reverse("runs:prompt_detail", args=[request.prompt.name]),
        "experiment_url": (
            f"{reverse('evals:experiment_summary', args=[ref])}?{asked}"
            if EXPERIMENT_REF.fullmatch(ref)
            else ""
        ),
        "experiment_page": reverse("evals:experiment", args=[ref]) if EXPERIMENT_REF.fullmatch(ref) else "",
    }


@login_required
@require_http_methods(["GET", "POST"])
def prompt_list(request: HttpRequest) -> HttpResponse:
    workspace = current_workspace(request)
    status = 200
    if request.method == "POST":
        membership = require_action(request, Action.PROTECT_LABEL)
        op = request.POST.get("op", "")
        try:
            if op not in ("protect", "unprotect"):
                raise ActionError("INVALID_INPUT", "unknown operation")
            label = request.POST.get("label", "").strip()
            do_protect_label(
                workspace,
                label=label,
                protected=op == "protect",
                scopes=_scopes(membership),
                user=request.user,
            )
        except ActionError as exc:
            messages.error(request, refusal(exc))
            status = 400
        else:
            messages.success(request, f"{label} is {'now' if op == 'protect' else 'no longer'} protected.")
            return redirect("runs:prompts")
    context = {
        "nav_active": "prompts",
        "prompts": list(sel.prompts_of(workspace)[:500]),
        "protected": sel.protected_labels(workspace),
        "can_protect": may(request, Action.PROTECT_LABEL),
    }
    return render(request, "runs/prompts.html", context, status=status)


def _pick(versions: list, number: int | None, default):
    return next((v for v in versions if v.number == number), default) if number is not None else default


@login_required
@require_http_methods(["GET", "POST"])
def prompt_detail(request: HttpRequest, prompt_name: str) -> HttpResponse:
    workspace = current_workspace(request)
    prompt = sel.get_prompt(workspace, prompt_name) if len(prompt_name) <= 200 else None
    if prompt is None:
        raise Http404("no such prompt")
    status = 200
    if request.method == "POST":
        membership = require_action(request, Action.MOVE_LABEL)
        try:
            move = do_move_label(
                workspace,
                name=prompt.name,
                label=request.POST.get("label", "").strip(),
                version=int_param(request.POST, "version", default=0),
                note=request.POST.get("note", ""),
                experiment_ref=request.POST.get("experiment", ""),
                scopes=_scopes(membership),
                user=request.user,
            )
        except ActionError as exc:
            messages.error(request, refusal(exc))
            status = 400
        else:
            if move.request is not None:
                messages.success(
                    request,
                    f"{move.request.label} is protected: promotion to version {move.request.to_version.number} "
                    "waits for a reviewer in the inbox.",
                )
            elif move.label is not None:
                messages.success(
                    request, f"{move.label.name} now points at version {move.label.version.number}."
                )
            return redirect("runs:prompt_detail", prompt_name=prompt.name)
    versions = sel.versions_of(prompt)
    latest = versions[0] if versions else None
    new = _pick(versions, int_param(request.GET, "b"), latest)
    old = _pick(versions, int_param(request.GET, "a"), sel.previous_version(new) if new else None)
    runs_of = _pick(versions, int_param(request.GET, "runs"), latest)
    by_version = sel.labels_by_version(prompt)
    context = {
        "nav_active": "prompts",
        "prompt": prompt,
        "versions": [{"v": v, "labels": by_version.get(v.number, [])} for v in versions],
        "labels": sel.labels_of(prompt),
        "protected": sel.protected_labels(workspace),
        "diff": sel.version_diff(old, new) if new else None,
        "old": old,
        "new": new,
        "old_text": "\n".join(render_version(old.body_json, old.config_json)) if old else "",
        "new_text": "\n".join(render_version(new.body_json, new.config_json)) if new else "",
        "runs_version": runs_of,
        "runs": list(sel.runs_using_version(workspace, prompt.name, runs_of.number)) if runs_of else [],
        "promotions": sel.promotion_history(prompt),
        "costs": sel.cost_by_version(workspace, prompt.name),
        "can_move": may(request, Action.MOVE_LABEL),
    }
    return render(request, "runs/prompt_detail.html", context, status=status)


@login_required
@require_POST
def decide_promotion(request: HttpRequest, promotion_id: int) -> HttpResponse:
    """Approve or reject a promotion request (from the inbox or the prompt page)."""
    workspace = current_workspace(request)
    found = sel.get_promotion(workspace, promotion_id)
    if found is None:
        raise Http404("no such promotion request")
    membership = require_action(request, Action.DECIDE_PROMOTION)
    decision = request.POST.get("decision", "")
    try:
        if decision not in ("approved", "rejected"):
            raise ActionError("INVALID_INPUT", "decision is approved or rejected")
        decided = do_decide_promotion(
            workspace,
            request_id=found.pk,
            approve=decision == "approved",
            note=request.POST.get("note", ""),
            scopes=_scopes(membership),
            user=request.user,
            override=request.POST.get("override") == "1",
        )
    except ActionError as exc:
        messages.error(request, refusal(exc))
    else:
        verb = "moved to" if decided.status == "approved" else "stays off"
        messages.success(
            request, f"{decided.prompt.name}: {decided.label} {verb} version {decided.to_version.number}."
        )
    if request.POST.get("return") == "prompt":
        return redirect("runs:prompt_detail", prompt_name=found.prompt.name)
    return redirect("runs:inbox")
