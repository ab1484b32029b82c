"""Settings › Gate policies: the workspace's default policy and each workflow's (owners)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from runs.actions import ActionError
from runs.actions.gatepolicy import do_set_gate_policy
from runs.actions.permissions import Action
from runs.models import GatePolicySetting
from runs.web.request import AuthenticatedHttpRequest, actor_for, require_action

MAX_FIELD = 2000


def _names(text: str) -> list[str]:
    return [n.strip() for n in text.replace("\n", ",").split(",") if n.strip()]


def _whole(text: str, label: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ActionError("INVALID_INPUT", f"{label} must be a whole number", label) from None


def policy_from_form(post: QueryDict) -> dict[str, Any]:
    """The policy a form describes (runs.engine.gatepolicy checks it): escalation lines read
    "<minutes>: name, name" (one tier a line)."""
    policy: dict[str, Any] = {}
    if post.get("quorum", "").strip():
        policy["quorum"] = _whole(post.get("quorum", ""), "quorum")
    if post.get("rejections", "").strip():
        policy["rejections"] = _whole(post.get("rejections", ""), "rejections")
    if post.get("separation") == "on":
        policy["separationOfDuties"] = True
    assignees = _names(post.get("assignees", "")[:MAX_FIELD])
    if assignees:
        policy["assignees"] = assignees
    tiers = []
    for n, line in enumerate(post.get("escalation", "")[:MAX_FIELD].splitlines(), start=1):
        if not line.strip():
            continue
        minutes, sep, names = line.partition(":")
        if not sep:
            raise ActionError(
                "INVALID_INPUT", f"escalation line {n}: write “minutes: name, name”", "escalation"
            )
        tiers.append({"afterSeconds": _whole(minutes, "escalation minutes") * 60, "notify": _names(names)})
    if tiers:
        policy["escalation"] = tiers
    return policy


def _form_values(policy: dict[str, Any]) -> dict[str, Any]:
    return {
        "quorum": policy.get("quorum", ""),
        "rejections": policy.get("rejections", ""),
        "separation": policy.get("separationOfDuties", False),
        "assignees": ", ".join(policy.get("assignees", [])),
        "escalation": "\n".join(
            f"{t['afterSeconds'] // 60}: {', '.join(t['notify'])}" for t in policy.get("escalation", [])
        ),
    }


@login_required
@require_http_methods(["GET", "POST"])
def gate_policies(request: AuthenticatedHttpRequest) -> HttpResponse:
    membership = require_action(request, Action.MANAGE_GATE_POLICIES)
    workspace = membership.workspace
    typed: dict[str, Any] | None = None
    if request.method == "POST":
        workflow_id = request.POST.get("workflow_id", "").strip()
        try:
            policy = policy_from_form(request.POST)
            do_set_gate_policy(
                workspace=workspace, policy=policy, workflow_id=workflow_id, actor=actor_for(request)
            )
        except ActionError as exc:
            messages.error(request, f"{exc.message} ({exc.code})")
            typed = {
                "workflow_id": workflow_id,
                **{k: request.POST.get(k, "") for k in ("quorum", "rejections", "assignees", "escalation")},
            }
            typed["separation"] = request.POST.get("separation") == "on"
        else:
            what = f"workflow {workflow_id}" if workflow_id else "the workspace default"
            messages.success(
                request, f"Gate policy of {what} saved." if policy else f"Gate policy of {what} cleared."
            )
            return redirect("runs:gate_policies")
    rows = [
        {
            "workflow_id": r.workflow_id,
            "policy": r.policy,
            "form": _form_values(r.policy),
            "updated_by": r.updated_by,
        }
        for r in GatePolicySetting.objects.filter(workspace=workspace).order_by("workflow_id")
    ]
    return render(
        request,
        "runs/gate_policies.html",
        {"rows": rows, "typed": typed, "nav_active": "gate_policies"},
        status=400 if typed is not None else 200,
    )
