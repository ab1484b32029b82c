"""The workspace's monitors (runs.actions.monitors): each with its state, its last value, its lines
and its state history; owners create, change and delete them here (one POSTed ``op`` each)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from runs.actions import ActionError
from runs.actions.monitors import UNITS, do_create_monitor, do_delete_monitor, do_update_monitor
from runs.actions.permissions import Action
from runs.models import MonitorMetric
from runs.selectors.monitors import MonitorNotFound, history_of, monitors_of
from runs.web.refusals import refusal
from runs.web.request import actor_for, may, require_action

TEXT = ("name", "workflow", "model", "prompt", "gate", "currency")
NUMBERS = ("warning", "alert", "margin", "minutes", "windowDays")


def _form(post) -> dict[str, Any]:
    """The form's fields as the REST API names them: the whole monitor (an empty number is its
    default, an empty text no filter)."""
    data: dict[str, Any] = {"metric": post.get("metric", "")}
    for key in TEXT:
        data[key] = post.get(key, "").strip()
    for key in NUMBERS:
        data[key] = post.get(key, "").strip() or None
    data["emailOwners"] = post.get("emailOwners") == "on"
    data["enabled"] = post.get("enabled") == "on"
    return data


def _apply(request: HttpRequest, workspace) -> str:
    post = request.POST
    op = post.get("op", "")
    if op == "create":
        monitor = do_create_monitor(workspace=workspace, data=_form(post), actor=actor_for(request))
        return f"Monitor {monitor.name} created."
    if op == "update":
        monitor = do_update_monitor(workspace=workspace, monitor_id=post.get("monitor", ""), data=_form(post))
        return f"Monitor {monitor.name} saved."
    if op == "delete":
        do_delete_monitor(workspace=workspace, monitor_id=post.get("monitor", ""))
        return "Monitor deleted."
    raise ActionError("INVALID_INPUT", "unknown operation")


@login_required
@require_http_methods(["GET", "POST"])
def monitors(request: HttpRequest) -> HttpResponse:
    workspace = require_action(request, Action.VIEW_RUN).workspace
    status = 200
    if request.method == "POST":
        require_action(request, Action.MANAGE_WEBHOOKS)
        try:
            message = _apply(request, workspace)
        except MonitorNotFound:
            raise Http404("no such monitor") from None
        except ActionError as exc:
            messages.error(request, refusal(exc))
            status = 400
        else:
            messages.success(request, message)
            return redirect("runs:monitors")
    listed = list(monitors_of(workspace))
    history = history_of(listed)
    rows = [
        {
            "monitor": m,
            "history": history[m.pk],
            "unit": m.currency
            if UNITS[MonitorMetric(m.metric)] == "currency"
            else UNITS[MonitorMetric(m.metric)],
            "label": MonitorMetric(m.metric).label,
        }
        for m in listed
    ]
    return render(
        request,
        "runs/monitors.html",
        {
            "workspace": workspace,
            "rows": rows,
            "metrics": MonitorMetric.choices,
            "can_manage": may(request, Action.MANAGE_WEBHOOKS),
            "nav_active": "monitors",
        },
        status=status,
    )
