"""Slack, interactive: ``POST /integrations/slack/interactions`` (Slack's interactivity request
URL) and each member's Slack links (``/settings/slack/``, and the confirm page of the link the bot
posts, ``/settings/slack/link/``).

The interaction endpoint is CSRF-exempt and signature-required: a request counts only when it
carries the ``X-Slack-Signature`` of the Slack app it names (``slack_sdk.signature.
SignatureVerifier`` with the app's signing secret), a timestamp within 5 minutes, and a signature
not seen before. Until then nothing is read from the database but the app's signing secret, and
nothing is decided. Refusals answer as the REST API does (``{"error": message, "code": CODE}``); a Slack user who may not
decide (unlinked, or a role without review) is told so ephemerally and nothing is decided.
"""

from __future__ import annotations

import json
import logging
import time

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods, require_POST
from slack_sdk.signature import SignatureVerifier

from runs.actions import ActionError
from runs.actions.outbox import site_url
from runs.actions.permissions import Action, role_allows
from runs.actions.slack import (
    app_for_hook,
    do_decide_from_slack,
    do_link_slack_user,
    do_unlink_slack_user,
    link_token,
    member_for_slack_user,
    read_link_token,
    remember_request,
)
from runs.models import Membership, SlackApp, SlackLink
from runs.notifications import slack, slack_blocks
from runs.web.request import AuthenticatedHttpRequest

log = logging.getLogger("workbench.slack")

WINDOW = 5 * 60  # seconds: Slack's timestamp window
MAX_BODY = 64 * 1024


def _obj(value: object) -> dict:
    """``value`` when it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def _error(status: int, code: str, message: str) -> JsonResponse:
    return JsonResponse({"error": message, "code": code}, status=status)


def _payload(request: HttpRequest) -> dict | None:
    if len(request.body) > MAX_BODY:
        return None
    try:
        raw = request.POST.get("payload")
        data = json.loads(raw) if raw else None
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _ref_of(payload: dict) -> str | None:
    """The gate reference the request names (a button's value, or the modal's metadata)."""
    if payload.get("type") == "view_submission":
        view = _obj(payload.get("view"))
        return view.get("private_metadata")
    actions = payload.get("actions")
    if isinstance(actions, list) and actions and isinstance(actions[0], dict):
        return actions[0].get("value")
    return None


def _verify(request: HttpRequest, app: SlackApp | None) -> JsonResponse | None:
    timestamp = request.headers.get("X-Slack-Request-Timestamp", "")
    signature = request.headers.get("X-Slack-Signature", "")
    if not timestamp or not signature:
        return _error(
            401, "SLACK_SIGNATURE_MISSING", "X-Slack-Request-Timestamp and X-Slack-Signature are required"
        )
    if not timestamp.isdigit() or abs(time.time() - int(timestamp)) > WINDOW:
        return _error(401, "SLACK_STALE_REQUEST", "the request's timestamp is not within 5 minutes of now")
    if app is None or not SignatureVerifier(app.signing_secret).is_valid(request.body, timestamp, signature):
        return _error(401, "SLACK_SIGNATURE_INVALID", "the request is not signed by the Slack app it names")
    try:
        remember_request(signature)
    except ActionError as exc:
        return _error(409, exc.code, exc.message)
    return None


@csrf_exempt
@require_POST
def interactions(request: HttpRequest) -> HttpResponse:
    payload = _payload(request) if request.content_type == "application/x-www-form-urlencoded" else None
    raw_ref = _ref_of(payload) if payload is not None else None
    ref = slack_blocks.parse_ref(raw_ref)
    app = app_for_hook(ref["h"]) if ref else None
    refused = _verify(request, app)
    if refused is not None:
        return refused
    if payload is None or ref is None or app is None:  # signed, but not one of our gate buttons
        return _error(400, "INVALID_INPUT", "not an interaction with a Workbench gate")
    if not app.webhook.enabled:
        return _error(403, "WEBHOOK_DISABLED", "this Slack app's hook is disabled in Workbench")
    user_doc = _obj(payload.get("user"))
    team_doc = _obj(payload.get("team"))
    slack_user = str(user_doc.get("id") or "")
    team_id = str(team_doc.get("id") or user_doc.get("team_id") or "")
    channel_doc = _obj(payload.get("channel"))
    channel_id = channel_doc.get("id")
    if payload.get("type") == "view_submission":
        return _note_submitted(app, payload, ref, team_id, slack_user, raw_ref or "")
    actions = payload.get("actions") or [{}]
    action_id = actions[0].get("action_id") if isinstance(actions[0], dict) else None
    if action_id == slack_blocks.OPEN:
        return JsonResponse({"ok": True})  # a link: Slack opens it, nothing to decide
    if action_id not in (*slack_blocks.DECISIONS, slack_blocks.REJECT_NOTE):
        return _error(400, "INVALID_INPUT", "unknown action")
    member = _member(app, team_id, slack_user)
    if member is None:
        return _refuse_unlinked(app, team_id, slack_user, channel_id)
    if action_id == slack_blocks.REJECT_NOTE:
        if not _may_decide(app, member):
            return _refuse(
                app, channel_id, slack_user, "FORBIDDEN", "your role in this workspace may not decide gates"
            )
        slack.open_note_modal(app, trigger_id=str(payload.get("trigger_id") or ""), value=raw_ref or "")
        return JsonResponse({"ok": True})
    try:
        do_decide_from_slack(app=app, user=member, ref=ref, decision=slack_blocks.DECISIONS[action_id])
    except ActionError as exc:
        return _refuse(app, channel_id, slack_user, exc.code, exc.message)
    return JsonResponse({"ok": True})


def _member(app: SlackApp, team_id: str, slack_user: str):
    member = member_for_slack_user(app, team_id, slack_user)
    if member is None and app.email_match:
        member = member_for_slack_user(app, team_id, slack_user, email=slack.slack_email(app, slack_user))
    return member


def _may_decide(app: SlackApp, member) -> bool:
    role = (
        Membership.objects.filter(user=member, workspace_id=app.webhook.workspace_id)
        .values_list("role", flat=True)
        .first()
    )
    return role_allows(role, Action.RESOLVE_GATE)


def _refuse(app: SlackApp, channel_id, slack_user: str, code: str, message: str) -> JsonResponse:
    slack.ephemeral(
        app, channel=channel_id, user=slack_user, text=f"Nothing was decided: {message} ({code})."
    )
    return JsonResponse({"ok": False, "error": message, "code": code})


def _refuse_unlinked(app: SlackApp, team_id: str, slack_user: str, channel_id) -> JsonResponse:
    token = link_token(workspace=app.webhook.workspace, team_id=team_id, slack_user_id=slack_user)
    url = f"{site_url()}{reverse('runs:slack_link')}?t={token}"
    message = (
        "your Slack account is not linked to a member of this Workbench workspace. "
        f"Link it (signed in to Workbench, within 30 minutes): {url}"
    )
    return _refuse(app, channel_id, slack_user, "SLACK_USER_NOT_LINKED", message)


def _note_submitted(app, payload, ref, team_id, slack_user, raw_ref) -> HttpResponse:
    view = payload.get("view") or {}
    values = ((view.get("state") or {}).get("values") or {}) if isinstance(view, dict) else {}
    note = ((values.get(slack_blocks.NOTE_BLOCK) or {}).get(slack_blocks.NOTE_INPUT) or {}).get("value")
    member = _member(app, team_id, slack_user)
    if member is None:
        said = "Your Slack account is not linked to a Workbench member: press Reject again for a link."
        return JsonResponse({"response_action": "errors", "errors": {slack_blocks.NOTE_BLOCK: said}})
    try:
        do_decide_from_slack(
            app=app, user=member, ref=ref, decision="rejected", note=note if isinstance(note, str) else None
        )
    except ActionError as exc:
        said = f"Nothing was decided: {exc.message} ({exc.code})."
        return JsonResponse({"response_action": "errors", "errors": {slack_blocks.NOTE_BLOCK: said[:150]}})
    return HttpResponse(status=200)  # an empty 200 closes the modal


# ---------------------------------------------------------------------------- member settings


@login_required
@require_http_methods(["GET", "POST"])
def slack_links(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The member's Slack links in every workspace, each with Unlink."""
    if request.method == "POST":
        link = (
            SlackLink.objects.filter(user=request.user, pk=_int(request.POST.get("link")))
            .select_related("workspace")
            .first()
        )
        if link is None:
            raise Http404("no such Slack link")
        do_unlink_slack_user(user=request.user, workspace=link.workspace, link_id=link.pk)
        messages.success(
            request, f"Slack user {link.slack_user_id} no longer acts as you in {link.workspace.name}."
        )
        return redirect("runs:slack_links")
    links = (
        SlackLink.objects.filter(user=request.user)
        .select_related("workspace")
        .order_by("workspace__name", "id")
    )
    return render(request, "runs/slack_links.html", {"links": links, "nav_active": "notifications"})


@login_required
@require_http_methods(["GET", "POST"])
def slack_link(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The link the bot posted: opening it shows what would be linked; only the POST links."""
    token = request.POST.get("t") if request.method == "POST" else request.GET.get("t")
    try:
        pending = read_link_token(token)
    except ActionError as exc:
        return render(request, "runs/slack_link.html", {"error": exc.message, "code": exc.code}, status=400)
    membership = (
        Membership.objects.filter(user=request.user, workspace_id=pending.workspace_id)
        .select_related("workspace")
        .first()
    )
    if membership is None:
        raise Http404("no such workspace")
    if request.method == "POST":
        try:
            do_link_slack_user(user=request.user, token=token)
        except ActionError as exc:
            return render(
                request, "runs/slack_link.html", {"error": exc.message, "code": exc.code}, status=400
            )
        messages.success(
            request, f"Slack user {pending.slack_user_id} now acts as you in {membership.workspace.name}."
        )
        return redirect("runs:slack_links")
    context = {"pending": pending, "workspace": membership.workspace, "token": token}
    response = render(request, "runs/slack_link.html", context)
    response["Cache-Control"] = "no-store"
    response["Referrer-Policy"] = "no-referrer"
    return response


def _int(value: object) -> int:
    return int(value) if isinstance(value, str) and value.isdigit() else -1
