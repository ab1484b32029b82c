"""Slack apps of the caller's workspace (a Slack hook that posts through the app's bot token,
with interactive gate buttons): create, list, read, change, delete. Owners (session) or tokens
with the ``manage`` scope (``Action.MANAGE_WEBHOOKS``); another workspace's answers 404 like a
missing one. The bot token and signing secret are written, never answered back. Deliveries,
retries and test events are the webhook routes' (``/api/webhooks/{id}/...``)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from ninja import Router, Schema
from ninja.responses import Status
from pydantic import Field

from runs.actions.permissions import Action
from runs.actions.slack import do_create_slack_app, do_update_slack_app, slack_app_of
from runs.actions.webhooks import do_delete_webhook
from runs.api.errors import ApiError
from runs.api.responses import require
from runs.api.schemas import ErrorOut
from runs.models import SlackApp
from runs.protocol.canonical import parse_json
from runs.protocol.errors import ErrorCode

router = Router(tags=["slack"])

ERRORS = {400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 413: ErrorOut, 429: ErrorOut}
CREATE_FIELDS = frozenset({"botToken", "signingSecret", "channel", "events", "description", "emailMatch"})
CHANGE_FIELDS = frozenset({"botToken", "signingSecret", "channel", "events", "emailMatch", "enabled"})


class SlackAppIn(Schema):
    botToken: str = Field(
        description="The app's bot token (xoxb-...), with chat:write (and users:read.email for emailMatch)."
    )
    signingSecret: str = Field(
        description="The app's signing secret: interaction requests are verified with it."
    )
    channel: str = Field(description="The channel gate messages go to (its id, C...).")
    events: list[str] | None = Field(
        default=None,
        description="Any of gate.requested, gate.resolved, run.completed, run.failed, run.cancelled, run.diverged "
        "(default: all). gate.resolved is added whenever gate.requested is chosen: it updates the gate message.",
    )
    description: str | None = Field(default=None, max_length=200)
    emailMatch: bool = Field(
        default=False,
        description="A Slack user whose Slack e-mail is a member's e-mail acts as that member without linking.",
    )


class SlackAppChange(Schema):
    botToken: str | None = None
    signingSecret: str | None = None
    channel: str | None = None
    events: list[str] | None = None
    emailMatch: bool | None = None
    enabled: bool | None = None


class SlackAppOut(Schema):
    id: str = Field(description="The hook's id: its deliveries are under /api/webhooks/{id}/deliveries.")
    channel: str
    events: list[str]
    description: str
    emailMatch: bool
    enabled: bool
    disabledReason: str
    createdAt: str
    interactionsPath: str = Field(
        description="Slack's interactivity request URL: this server's origin and this path."
    )


def _json(app: SlackApp) -> dict:
    hook = app.webhook
    return {
        "id": hook.public_id,
        "channel": app.channel_id,
        "events": list(hook.events),
        "description": hook.description,
        "emailMatch": app.email_match,
        "enabled": hook.enabled,
        "disabledReason": hook.disabled_reason,
        "createdAt": hook.created_at.isoformat(),
        "interactionsPath": "/integrations/slack/interactions",
    }


def _body(request: HttpRequest, allowed: frozenset[str]) -> dict:
    data = parse_json(request.body) if request.body else None
    if not isinstance(data, dict):
        raise ApiError(ErrorCode.INVALID_INPUT, "the body must be a JSON object")
    unknown = set(data) - allowed
    if unknown:
        raise ApiError(ErrorCode.INVALID_INPUT, f"unknown field(s): {', '.join(sorted(unknown))}")
    return data


@router.post(
    "",
    response={201: SlackAppOut, **ERRORS},
    summary="Connect a Slack app (interactive gate messages)",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/SlackAppIn"}}},
        }
    },
)
def create_slack_app(request: HttpRequest):
    caller = require(request, Action.MANAGE_WEBHOOKS)
    data = _body(request, CREATE_FIELDS)
    created = do_create_slack_app(
        workspace=caller.workspace,
        bot_token=data.get("botToken"),
        signing_secret=data.get("signingSecret"),
        channel=data.get("channel"),
        events=data.get("events"),
        description=data.get("description") or "",
        email_match=data.get("emailMatch") is True,
        actor=caller.actor,
    )
    return Status(201, _json(slack_app_of(caller.workspace, created.webhook.public_id)))


@router.get("", response={200: list[SlackAppOut], **ERRORS}, summary="List the workspace's Slack apps")
def list_slack_apps(request: HttpRequest):
    caller = require(request, Action.MANAGE_WEBHOOKS)
    apps = (
        SlackApp.objects.filter(webhook__workspace=caller.workspace)
        .select_related("webhook")
        .order_by("webhook__created_at", "id")
    )
    return [_json(app) for app in apps]


@router.get("/{webhook_id}", response={200: SlackAppOut, **ERRORS}, summary="One Slack app")
def get_slack_app(request: HttpRequest, webhook_id: str):
    caller = require(request, Action.MANAGE_WEBHOOKS)
    return _json(slack_app_of(caller.workspace, webhook_id))


@router.patch(
    "/{webhook_id}",
    response={200: SlackAppOut, **ERRORS},
    summary="Change a Slack app (channel, token, secret, events, emailMatch, enabled)",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/SlackAppChange"}}},
        }
    },
)
def change_slack_app(request: HttpRequest, webhook_id: str):
    caller = require(request, Action.MANAGE_WEBHOOKS)
    slack_app_of(caller.workspace, webhook_id)  # another workspace's: 404 before the body is read
    data = _body(request, CHANGE_FIELDS)
    do_update_slack_app(workspace=caller.workspace, webhook_id=webhook_id, changes=data)
    return _json(slack_app_of(caller.workspace, webhook_id))


@router.delete("/{webhook_id}", response={204: None, **ERRORS}, summary="Disconnect a Slack app")
def delete_slack_app(request: HttpRequest, webhook_id: str):
    caller = require(request, Action.MANAGE_WEBHOOKS)
    slack_app_of(caller.workspace, webhook_id)
    do_delete_webhook(workspace=caller.workspace, webhook_id=webhook_id)
    return HttpResponse(status=204)
