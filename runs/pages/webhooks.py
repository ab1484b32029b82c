"""Workspace notification settings (owners): webhooks and Slack hooks, their last deliveries,
"Send test event", "Retry" on a failed delivery, enable/disable, secret rotation. And each
person's own e-mail choices (``notifications``), in every workspace they belong to."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from runs.actions import ActionError
from runs.actions.gatelinks import do_set_email_link_sign_in, workspace_requires_sign_in
from runs.actions.outbox import EVENT_TYPES
from runs.actions.permissions import Action, role_allows
from runs.actions.webhooks import (
    do_create_webhook,
    do_delete_webhook,
    do_retry_delivery,
    do_rotate_webhook_secret,
    do_send_test_event,
    do_set_notification_preferences,
    do_set_webhook_enabled,
)
from runs.models import Membership, WebhookKind
from runs.selectors.webhooks import preferences_of, recent_deliveries_by_hook, webhooks_of
from runs.web.refusals import refusal
from runs.web.request import AuthenticatedHttpRequest, actor_for, require_action


def _apply(request: HttpRequest, workspace) -> tuple[str, object | None]:
    """One POSTed operation: (message, a secret to show once or None). Raises ActionError."""
    post = request.POST
    op = post.get("op", "")
    hook_id = post.get("webhook", "")
    if op == "create":
        created = do_create_webhook(
            workspace=workspace,
            url=post.get("url", ""),
            events=post.getlist("events"),
            description=post.get("description", ""),
            kind=post.get("kind", WebhookKind.WEBHOOK),
            actor=actor_for(request),
        )
        return f"Webhook {created.webhook.public_id} created.", created
    if op == "delete":
        do_delete_webhook(workspace=workspace, webhook_id=hook_id)
        return "Webhook deleted.", None
    if op in ("enable", "disable"):
        do_set_webhook_enabled(workspace=workspace, webhook_id=hook_id, enabled=op == "enable")
        return f"Webhook {op}d.", None
    if op == "test":
        delivery = do_send_test_event(workspace=workspace, webhook_id=hook_id, actor=actor_for(request))
        return f"Test event {delivery.public_id} queued.", None
    if op == "retry":
        delivery = do_retry_delivery(
            workspace=workspace, webhook_id=hook_id, delivery_id=post.get("delivery")
        )
        return f"Delivery {delivery.public_id} queued again.", None
    if op == "rotate":
        rotated = do_rotate_webhook_secret(workspace=workspace, webhook_id=hook_id)
        return "New secret made; the old one signs too for 24 hours.", rotated
    if op == "email_links":
        required = post.get("require_sign_in") == "on"
        do_set_email_link_sign_in(workspace=workspace, required=required)
        return "E-mailed decision links " + (
            "need a signed-in session." if required else "work without signing in."
        ), None
    raise ActionError("INVALID_INPUT", "unknown operation")


@login_required
@require_http_methods(["GET", "POST"])
def webhooks(request: HttpRequest) -> HttpResponse:
    workspace = require_action(request, Action.MANAGE_WEBHOOKS).workspace
    shown = None
    status = 200
    if request.method == "POST":
        try:
            message, shown = _apply(request, workspace)
        except ActionError as exc:
            messages.error(request, refusal(exc))
            status = 400
        else:
            if shown is None:
                messages.success(request, message)
                return redirect("runs:webhooks")
            status = 201
    hooks = list(webhooks_of(workspace))
    recent = recent_deliveries_by_hook(hooks)
    for hook in hooks:
        hook.recent = recent[hook.pk]  # type: ignore[attr-defined]  # read by the template only
        hook.state = hook.breaker_state()  # type: ignore[attr-defined]  # read by the template only
    response = render(
        request,
        "runs/webhooks.html",
        {
            "workspace": workspace,
            "hooks": hooks,
            "event_types": EVENT_TYPES,
            "kinds": WebhookKind.choices,
            "shown": shown,
            "nav_active": "webhooks",
            "email_links_sign_in": workspace_requires_sign_in(workspace.pk),
        },
        status=status,
    )
    if shown is not None:
        response["Cache-Control"] = "no-store"  # the page shows a secret, once
    return response


@login_required
@require_http_methods(["GET", "POST"])
def notifications(request: AuthenticatedHttpRequest) -> HttpResponse:
    memberships = list(
        Membership.objects.filter(user=request.user).select_related("workspace").order_by("workspace__name")
    )
    if request.method == "POST":
        if request.POST.get("op") != "save":
            messages.error(request, "INVALID_INPUT: unknown operation")
            return redirect("runs:notifications")
        slug = request.POST.get("workspace", "")
        membership = next((m for m in memberships if m.workspace.slug == slug), None)
        if membership is None:
            raise Http404("no such workspace")
        do_set_notification_preferences(
            user=request.user,
            workspace=membership.workspace,
            gates_to_decide=request.POST.get("gates_to_decide") == "on"
            and role_allows(membership.role, Action.RESOLVE_GATE),
            runs_i_started=request.POST.get("runs_i_started") == "on",
        )
        messages.success(request, f"Notification choices for {membership.workspace.name} saved.")
        return redirect("runs:notifications")
    rows = [
        {
            "membership": m,
            "may_decide": role_allows(m.role, Action.RESOLVE_GATE),
            "pref": preferences_of(request.user, m.workspace),
        }
        for m in memberships
    ]
    return render(
        request,
        "runs/notifications.html",
        {"rows": rows, "email": request.user.email, "nav_active": "notifications"},
    )
