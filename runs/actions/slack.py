"""Interactive Slack gates, every change: Slack-app hooks (create, change), members linked to
Slack users (one-time signed link, unlink), interaction requests remembered (a replay is
refused), gate messages remembered, and a decision from Slack.

A decision from Slack is the page's decision: the ``ResolveGate`` command through
``do_decide_gate`` (the gate policy, then the one write path) with the linked member as the actor and ``channel="slack"`` (the outbox's
``gate.resolved`` names it, a :class:`runs.models.GateDecisionMeta` row keeps it beside the event).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core import signing
from django.db import IntegrityError, transaction
from django.utils import timezone

from runs.actions.core import ActionError, AppendResult
from runs.actions.gatepolicy import do_decide_gate
from runs.actions.outbox import EVENT_TYPES, GATE_REQUESTED, GATE_RESOLVED
from runs.actions.permissions import Action, role_allows
from runs.actions.webhooks import CreatedWebhook, check_events, do_create_webhook
from runs.models import (
    Membership,
    SlackApp,
    SlackGateMessage,
    SlackLink,
    SlackSeenRequest,
    WebhookKind,
    Workspace,
)
from runs.protocol.errors import ErrorCode

SLACK_APP_NOT_FOUND = "WEBHOOK_NOT_FOUND"
SLACK_USER_NOT_LINKED = "SLACK_USER_NOT_LINKED"
SLACK_NOT_ALLOWED = "FORBIDDEN"
SLACK_REPLAYED = "SLACK_REPLAYED"
LINK_INVALID = "SLACK_LINK_INVALID"
LINK_SALT = "workbench.slack-link"
LINK_MAX_AGE = 30 * 60  # seconds a link the bot posted may be used in
SEEN_KEEP = timedelta(minutes=10)  # twice Slack's 5-minute window: older requests are refused anyway
CHANNEL = "slack"


def _text(value: object, field: str, *, limit: int, required: bool = True) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()) or len(value) > limit:
        raise ActionError(ErrorCode.INVALID_INPUT, f"{field} must be text of 1 to {limit} characters", field)
    return value.strip()


def do_create_slack_app(
    *,
    workspace: Workspace,
    bot_token: object,
    signing_secret: object,
    channel: object,
    events: object = None,
    description: object = "",
    email_match: object = False,
    actor: str = "",
) -> CreatedWebhook:
    """A Slack hook that posts through the app's bot token (gate messages with buttons). It always
    hears ``gate.resolved`` (that updates the gate message in place)."""
    token = _text(bot_token, "botToken", limit=300)
    secret = _text(signing_secret, "signingSecret", limit=200)
    channel_id = _text(channel, "channel", limit=80)
    chosen = list(EVENT_TYPES) if events is None else events
    if isinstance(chosen, list) and GATE_REQUESTED in chosen and GATE_RESOLVED not in chosen:
        chosen = [*chosen, GATE_RESOLVED]
    with transaction.atomic():
        created = do_create_webhook(
            workspace=workspace,
            url=settings.WORKBENCH_SLACK_API_URL,
            events=chosen,
            description=description,
            kind=WebhookKind.SLACK,
            actor=actor,
        )
        SlackApp.objects.create(
            webhook=created.webhook,
            bot_token=token,
            signing_secret=secret,
            channel_id=channel_id,
            email_match=bool(email_match),
        )
    return created


def slack_app_of(workspace: Workspace, webhook_id: object, *, lock: bool = False) -> SlackApp:
    if not isinstance(webhook_id, str) or len(webhook_id) > 40:
        raise ActionError(SLACK_APP_NOT_FOUND, "no such Slack app")
    query = SlackApp.objects.filter(webhook__workspace=workspace, webhook__public_id=webhook_id)
    app = (query.select_for_update() if lock else query).select_related("webhook").first()
    if app is None:
        raise ActionError(SLACK_APP_NOT_FOUND, "no such Slack app")
    return app


def do_update_slack_app(*, workspace: Workspace, webhook_id: str, changes: dict) -> SlackApp:
    """Change a Slack app hook: channel, botToken, signingSecret, emailMatch, enabled, events."""
    with transaction.atomic():
        app = slack_app_of(workspace, webhook_id, lock=True)
        hook = app.webhook
        if "channel" in changes:
            app.channel_id = _text(changes["channel"], "channel", limit=80)
        if "botToken" in changes:
            app.bot_token = _text(changes["botToken"], "botToken", limit=300)
        if "signingSecret" in changes:
            app.signing_secret = _text(changes["signingSecret"], "signingSecret", limit=200)
        if "emailMatch" in changes:
            if not isinstance(changes["emailMatch"], bool):
                raise ActionError(ErrorCode.INVALID_INPUT, "emailMatch must be true or false", "emailMatch")
            app.email_match = changes["emailMatch"]
        if "events" in changes:
            hook.events = check_events(changes["events"])
        if "enabled" in changes:
            if not isinstance(changes["enabled"], bool):
                raise ActionError(ErrorCode.INVALID_INPUT, "enabled must be true or false", "enabled")
            hook.enabled = changes["enabled"]
            hook.disabled_reason, hook.disabled_at = (
                ("", None) if hook.enabled else ("disabled by an owner", timezone.now())
            )
        app.save()
        hook.save(update_fields=["events", "enabled", "disabled_reason", "disabled_at"])
    return app


# ------------------------------------------------------------------------------------ requests


def remember_request(signature: str) -> None:
    """A verified interaction request, seen once: the same signature again is SLACK_REPLAYED."""
    now = timezone.now()
    digest = hashlib.sha256(f"req:{signature}".encode()).hexdigest()
    try:
        with transaction.atomic():
            SlackSeenRequest.objects.create(digest=digest, seen_at=now)
    except IntegrityError:
        raise ActionError(SLACK_REPLAYED, "this request was already received (a replay)") from None
    SlackSeenRequest.objects.filter(seen_at__lt=now - SEEN_KEEP).delete()


def remember_gate_message(*, hook_pk: int, ref: dict, channel_id: str, ts: str) -> SlackGateMessage:
    return SlackGateMessage.objects.create(
        webhook_id=hook_pk,
        run_id=str(ref.get("r") or ""),
        step_id=str(ref.get("s") or ""),
        gate=str(ref.get("g") or ""),
        checkpoint=str(ref.get("c") or ""),
        channel_id=channel_id,
        ts=ts,
    )


# ------------------------------------------------------------------------------------- linking


def link_token(*, workspace: Workspace, team_id: str, slack_user_id: str) -> str:
    """A signed, one-time link the bot posts (ephemerally) to an unlinked Slack user."""
    return signing.dumps(
        {"w": workspace.pk, "t": team_id, "u": slack_user_id, "n": secrets.token_hex(8)}, salt=LINK_SALT
    )


@dataclass(frozen=True)
class LinkRequest:
    workspace_id: int
    team_id: str
    slack_user_id: str
    nonce: str


def read_link_token(token: object) -> LinkRequest:
    if not isinstance(token, str) or len(token) > 500:
        raise ActionError(LINK_INVALID, "this link is not one Workbench made")
    try:
        data = signing.loads(token, salt=LINK_SALT, max_age=LINK_MAX_AGE)
    except signing.SignatureExpired:
        raise ActionError(
            LINK_INVALID, "this link has expired: press a button in Slack again for a new one"
        ) from None
    except signing.BadSignature:
        raise ActionError(LINK_INVALID, "this link is not one Workbench made") from None
    return LinkRequest(int(data["w"]), str(data["t"]), str(data["u"]), str(data["n"]))


def do_link_slack_user(*, user, token: object) -> SlackLink:
    """The signed-in member confirms the link the bot posted: that Slack user acts as them in the
    link's workspace from now on. Single use; a member of that workspace only."""
    request = read_link_token(token)
    with transaction.atomic():
        if not Membership.objects.filter(user=user, workspace_id=request.workspace_id).exists():
            raise ActionError(LINK_INVALID, "this link is for a workspace you are not a member of")
        digest = hashlib.sha256(f"link:{request.nonce}".encode()).hexdigest()
        try:
            with transaction.atomic():
                SlackSeenRequest.objects.create(digest=digest, seen_at=timezone.now())
        except IntegrityError:
            raise ActionError(LINK_INVALID, "this link was already used") from None
        link, _ = SlackLink.objects.update_or_create(
            workspace_id=request.workspace_id,
            team_id=request.team_id,
            slack_user_id=request.slack_user_id,
            defaults={"user": user},
        )
    return link


def do_unlink_slack_user(*, user, workspace: Workspace, link_id: object) -> None:
    deleted, _ = SlackLink.objects.filter(
        user=user, workspace=workspace, pk=link_id if isinstance(link_id, int) else -1
    ).delete()
    if not deleted:
        raise ActionError("SLACK_LINK_NOT_FOUND", "no such Slack link")


def member_for_slack_user(app: SlackApp, team_id: str, slack_user_id: str, email: str | None = None):
    """The workspace member a Slack user acts as (linked, or by e-mail when the owner allows it),
    or None."""
    workspace_id = app.webhook.workspace_id
    link = (
        SlackLink.objects.filter(workspace_id=workspace_id, team_id=team_id, slack_user_id=slack_user_id)
        .select_related("user")
        .first()
    )
    if link is not None:
        return link.user if link.user.is_active else None
    if app.email_match and email:
        users = list(
            get_user_model().objects.filter(
                email__iexact=email, is_active=True, memberships__workspace_id=workspace_id
            )[:2]
        )
        if len(users) == 1:
            return users[0]
    return None


# ------------------------------------------------------------------------------------ deciding


def do_decide_from_slack(
    *, app: SlackApp, user, ref: dict, decision: str, note: str | None = None
) -> AppendResult:
    """The member's decision, as a page decision is made (``ResolveGate`` through the one write
    path), refused when their role may not resolve gates."""
    workspace = app.webhook.workspace
    role = Membership.objects.filter(user=user, workspace=workspace).values_list("role", flat=True).first()
    if not role_allows(role, Action.RESOLVE_GATE):
        raise ActionError(SLACK_NOT_ALLOWED, "your role in this workspace may not decide gates")
    return do_decide_gate(  # under the gate's policy: quorum, separation of duties
        workspace=workspace,
        run_id=str(ref["r"]),
        step_id=str(ref["s"]),
        gate=str(ref["g"]),
        decision=decision,
        note=(note or "").strip()[:4000] or None,
        checkpoint=ref.get("c") or None,
        actor=f"user:{user.get_username()}",
        channel=CHANNEL,
    ).result


def app_for_hook(webhook_id: object) -> SlackApp | None:
    """The Slack app of a hook named by an (unverified) request: only its signing secret is used
    until the request is verified."""
    if not isinstance(webhook_id, str) or len(webhook_id) > 40:
        return None
    return SlackApp.objects.filter(webhook__public_id=webhook_id).select_related("webhook__workspace").first()
