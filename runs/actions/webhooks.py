"""Webhooks, people's notification choices, and the delivery bookkeeping: every change is here.

Managing hooks (owners, or tokens with the ``manage`` scope: ``Action.MANAGE_WEBHOOKS``):
``do_create_webhook`` (the secret is returned once), ``do_delete_webhook``,
``do_set_webhook_enabled``, ``do_rotate_webhook_secret`` (both secrets sign during the overlap),
``do_retry_delivery`` and ``do_send_test_event``. Each person chooses their own e-mails with
``do_set_notification_preferences``.

The sender (``runs.notifications``) changes deliveries only through ``claim_due`` (rows due now,
``SELECT ... FOR UPDATE SKIP LOCKED`` on PostgreSQL, one claimer at a time on SQLite, whose
transactions take the write lock when they begin) and ``record_attempt``.
"""

from __future__ import annotations

import base64
import ipaddress
import secrets
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from runs.actions.core import ActionError
from runs.actions.notify import schedule_deliveries
from runs.actions.outbox import EVENT_TYPES, HOOK_DISABLED, TEST_EVENT, envelope, new_message_id, site_url
from runs.models import (
    Delivery,
    DeliveryChannel,
    DeliveryStatus,
    Membership,
    NotificationPreference,
    Role,
    Webhook,
    WebhookKind,
    Workspace,
)
from runs.protocol.errors import ErrorCode
from runs.providers import egress

WEBHOOK_NOT_FOUND = "WEBHOOK_NOT_FOUND"
DELIVERY_NOT_FOUND = "DELIVERY_NOT_FOUND"
MAX_HOOKS_PER_WORKSPACE = 50
ROTATION_OVERLAP = timedelta(hours=24)


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def _hook_id() -> str:
    return "wh_" + secrets.token_hex(12)


def _allow() -> tuple[str, ...]:
    # A hook's URL is typed by a workspace owner: the operator's allowance only (never the
    # embedded profile's loopback for the operator's own destinations).
    return egress.settings_allowance(settings, operator=False)


def check_hook_url(url: object) -> str:
    """A URL a hook may have: http(s), no credentials, and, when its host is an IP address, one
    the egress guard allows. Host names are not resolved here (no DNS lookup on a request, and no
    answer that tells an owner what the server's resolver knows): every connection checks the
    addresses it resolves to, redirects included."""
    if not isinstance(url, str):
        raise ActionError(ErrorCode.INVALID_INPUT, "url must be a string", "url")
    url = url.strip()
    try:
        _, host, port = egress.check_url(url)
        if _is_ip(host):
            egress.check_address(host, _allow(), port)  # an allowance may name one port
    except egress.EgressRefused as exc:
        raise ActionError(exc.code, egress_message(exc), "url") from None
    return url


def egress_message(exc: egress.EgressRefused) -> str:
    """The guard's words, about a webhook and its setting rather than a provider's."""
    return exc.message.replace("provider's", "webhook's").replace(
        "PLAYGROUND_EGRESS_ALLOW", "WORKBENCH_EGRESS_ALLOW"
    )


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


def check_events(events: object) -> list[str]:
    if not isinstance(events, list | tuple) or not events:
        raise ActionError(
            ErrorCode.INVALID_INPUT,
            f"events must be a non-empty list out of {', '.join(EVENT_TYPES)}",
            "events",
        )
    unknown = [e for e in events if e not in EVENT_TYPES]
    if unknown:
        raise ActionError(
            ErrorCode.INVALID_INPUT,
            f"unknown event type(s) {', '.join(map(repr, unknown))}: choose from {', '.join(EVENT_TYPES)}",
            "events",
        )
    return [e for e in EVENT_TYPES if e in events]


@dataclass(frozen=True)
class CreatedWebhook:
    webhook: Webhook
    secret: str  # shown once


def do_create_webhook(
    *,
    workspace: Workspace,
    url: object,
    events: object,
    description: object = "",
    kind: str = WebhookKind.WEBHOOK,
    actor: str = "",
) -> CreatedWebhook:
    url = check_hook_url(url)
    chosen = check_events(events)
    if description is None:
        description = ""
    if not isinstance(description, str) or len(description) > 200:
        raise ActionError(
            ErrorCode.INVALID_INPUT, "description must be text of at most 200 characters", "description"
        )
    if kind not in WebhookKind.values:
        raise ActionError(
            ErrorCode.INVALID_INPUT, f"kind must be one of {', '.join(WebhookKind.values)}", "kind"
        )
    with transaction.atomic():
        if Webhook.objects.filter(workspace=workspace).count() >= MAX_HOOKS_PER_WORKSPACE:
            raise ActionError(
                ErrorCode.INVALID_INPUT, f"a workspace has at most {MAX_HOOKS_PER_WORKSPACE} webhooks"
            )
        secret = new_secret()
        hook = Webhook.objects.create(
            public_id=_hook_id(),
            workspace=workspace,
            kind=kind,
            url=url,
            description=description.strip(),
            events=chosen,
            secret=secret,
            created_by=actor[:200],
        )
    return CreatedWebhook(hook, secret)


def _hook(workspace: Workspace, webhook_id: object, *, lock: bool = False) -> Webhook:
    """A hook of this workspace; another workspace's answers exactly like a missing one."""
    if not isinstance(webhook_id, str) or len(webhook_id) > 40:
        raise ActionError(WEBHOOK_NOT_FOUND, "no such webhook")
    query = Webhook.objects.filter(workspace=workspace, public_id=webhook_id)
    hook = (query.select_for_update() if lock else query).first()
    if hook is None:
        raise ActionError(WEBHOOK_NOT_FOUND, "no such webhook")
    return hook


def do_delete_webhook(*, workspace: Workspace, webhook_id: str) -> None:
    with transaction.atomic():
        _hook(workspace, webhook_id, lock=True).delete()  # its deliveries go with it


def do_set_webhook_enabled(*, workspace: Workspace, webhook_id: str, enabled: bool) -> Webhook:
    with transaction.atomic():
        hook = _hook(workspace, webhook_id, lock=True)
        hook.enabled = bool(enabled)
        if hook.enabled:
            hook.disabled_reason, hook.disabled_at = "", None
            hook.breaker_succeeded()  # a fresh start: the owner says the receiver is fixed
        else:
            hook.disabled_reason, hook.disabled_at = "disabled by an owner", timezone.now()
            _cancel_pending(hook, "the webhook was disabled")
        hook.save(update_fields=["enabled", "disabled_reason", "disabled_at", *BREAKER_FIELDS])
    return hook


def do_rotate_webhook_secret(*, workspace: Workspace, webhook_id: str) -> CreatedWebhook:
    """A new secret (returned once); the old one keeps signing beside it for ROTATION_OVERLAP."""
    with transaction.atomic():
        hook = _hook(workspace, webhook_id, lock=True)
        hook.previous_secret = hook.secret
        hook.previous_secret_until = timezone.now() + ROTATION_OVERLAP
        hook.secret = new_secret()
        hook.save(update_fields=["secret", "previous_secret", "previous_secret_until"])
    return CreatedWebhook(hook, hook.secret)


def do_retry_delivery(*, workspace: Workspace, webhook_id: str, delivery_id: object) -> Delivery:
    """Send a failed (or cancelled) delivery again, now, with its own webhook-id and body."""
    with transaction.atomic():
        hook = _hook(workspace, webhook_id, lock=True)
        delivery = (
            Delivery.objects.select_for_update()
            .filter(webhook=hook, public_id=delivery_id if isinstance(delivery_id, str) else "")
            .first()
        )
        if delivery is None:
            raise ActionError(DELIVERY_NOT_FOUND, "no such delivery")
        if not hook.enabled:
            raise ActionError("WEBHOOK_DISABLED", "enable the webhook before retrying its deliveries")
        if delivery.status == DeliveryStatus.PENDING:
            return delivery  # already on its way
        delivery.status = DeliveryStatus.PENDING
        delivery.attempts = 0
        delivery.next_attempt_at = timezone.now()
        delivery.error = ""
        delivery.save(update_fields=["status", "attempts", "next_attempt_at", "error"])
        _end_backoff(hook)
        schedule_deliveries()
    return delivery


def do_send_test_event(*, workspace: Workspace, webhook_id: str, actor: str = "") -> Delivery:
    with transaction.atomic():
        hook = _hook(workspace, webhook_id, lock=True)
        if not hook.enabled:
            raise ActionError("WEBHOOK_DISABLED", "enable the webhook before sending it a test event")
        body = envelope(
            TEST_EVENT,
            {
                "workspace": workspace.slug,
                "webhookId": hook.public_id,
                "sentBy": actor or None,
                "site": site_url(),
            },
        )
        channel = DeliveryChannel.SLACK if hook.kind == WebhookKind.SLACK else DeliveryChannel.WEBHOOK
        delivery = Delivery.objects.create(
            public_id=new_message_id(),
            workspace=workspace,
            webhook=hook,
            channel=channel,
            event_type=TEST_EVENT,
            payload=body,
            next_attempt_at=timezone.now(),
        )
        _end_backoff(hook)
        schedule_deliveries()
    return delivery


def do_set_notification_preferences(
    *, user, workspace: Workspace, gates_to_decide: bool, runs_i_started: bool
) -> NotificationPreference:
    """A member's own e-mail choices in one of their workspaces (404-like refusal otherwise)."""
    if not Membership.objects.filter(user=user, workspace=workspace).exists():
        raise ActionError("NOT_A_MEMBER", "not a member of this workspace")
    pref, _ = NotificationPreference.objects.update_or_create(
        user=user,
        workspace=workspace,
        defaults={"gates_to_decide": bool(gates_to_decide), "runs_i_started": bool(runs_i_started)},
    )
    return pref


# --------------------------------------------------------------------------------------------
# The sender's bookkeeping


CLAIM_LOCK = 0x77625F6E6F7469  # pg_advisory_xact_lock key: claimers take turns (PostgreSQL)
EMAIL = "email"  # the destination of e-mails: the SMTP server, one host


def _host(url: str) -> str:
    parts = urlsplit(url)
    return (parts.netloc.rsplit("@", 1)[-1] or parts.path).lower()


def _destinations(pairs) -> tuple[Counter, Counter]:
    """How many deliveries are in flight per hook (None: e-mail) and per host."""
    per_hook: Counter = Counter()
    per_host: Counter = Counter()
    for webhook_id, url in pairs:
        per_hook[webhook_id] += 1
        per_host[_host(url) if webhook_id is not None else EMAIL] += 1
    return per_hook, per_host


def claim_due(
    *,
    limit: int = 20,
    lease_seconds: int | None = None,
    per_hook: int | None = None,
    per_host: int | None = None,
) -> list[Delivery]:
    """Take up to ``limit`` due deliveries for this worker. Each is leased: until the lease runs
    out no other worker takes it, and if this one dies mid-delivery it is due again then (with
    the same webhook-id). A follow-up look at the outbox is scheduled for that moment in the
    same transaction.

    Across every worker, at most ``per_hook`` deliveries of one hook (one while its breaker is
    half-open, none while it is open) and ``per_host`` to one receiving host (e-mails: to the
    SMTP server) are in flight at once; within those limits the oldest due come first, each hook
    taking its turn (a hook with a thousand due rows does not hold up the next hook's one)."""
    lease = timedelta(seconds=lease_seconds or settings.WORKBENCH_NOTIFY_LEASE_SECONDS)
    per_hook = per_hook or settings.WORKBENCH_NOTIFY_PER_HOOK
    per_host = per_host or settings.WORKBENCH_NOTIFY_PER_HOST
    now = timezone.now()
    with transaction.atomic():
        if connection.vendor == "postgresql":
            # the limits count what is in flight: two claimers counting at once would both see room
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [CLAIM_LOCK])
        # SQLite: the transaction holds the write lock from BEGIN (transaction_mode IMMEDIATE),
        # so claimers take turns and never see each other's half-claimed rows.
        hooks_busy, hosts_busy = _destinations(
            Delivery.objects.filter(status=DeliveryStatus.PENDING, lease_until__gt=now).values_list(
                "webhook_id", "webhook__url"
            )
        )
        full = [h for h, n in hooks_busy.items() if h is not None and n >= per_hook]
        ranked = (
            Delivery.objects.due(now)
            .filter(
                Q(webhook__isnull=True)
                | Q(webhook__backoff_until__isnull=True)
                | Q(webhook__backoff_until__lte=now)
            )
            .exclude(webhook_id__in=full)
            .annotate(
                turn=Window(
                    RowNumber(),
                    partition_by=[F("webhook_id")],
                    order_by=[F("next_attempt_at").asc(), F("id").asc()],
                )
            )
            .filter(turn__lte=max(per_hook, per_host))
            .order_by("next_attempt_at", "id")
            .values_list("pk", "webhook_id", "webhook__url", "webhook__backoff_until")
        )
        chosen: list[int] = []
        for pk, webhook_id, url, backoff_until in ranked[: limit * 4 + len(hooks_busy) * per_host]:
            host = _host(url) if webhook_id is not None else EMAIL
            hook_cap = per_host if webhook_id is None else (1 if backoff_until is not None else per_hook)
            if hooks_busy[webhook_id] >= hook_cap or hosts_busy[host] >= per_host:
                continue
            hooks_busy[webhook_id] += 1
            hosts_busy[host] += 1
            chosen.append(pk)
            if len(chosen) >= limit:
                break
        if not chosen:
            return []
        query = Delivery.objects.due(now).filter(pk__in=chosen).order_by("next_attempt_at", "id")
        if connection.features.has_select_for_update_skip_locked:
            query = query.select_for_update(skip_locked=True, of=("self",))
        rows = list(query.select_related("webhook", "recipient", "workspace"))
        if not rows:
            return []
        until = now + lease
        Delivery.objects.filter(pk__in=[r.pk for r in rows]).update(
            next_attempt_at=until, lease_until=until, attempts=F("attempts") + 1, last_attempt_at=now
        )
        schedule_deliveries(until)
    for row in rows:
        row.attempts += 1
        row.next_attempt_at, row.lease_until, row.last_attempt_at = until, until, now
    return rows


@dataclass(frozen=True)
class Outcome:
    delivered: bool
    response_status: int | None = None
    excerpt: str = ""
    error: str = ""
    retry_at: datetime | None = None  # None and not delivered: given up
    disable_hook: str = ""  # why the hook is disabled ("" keeps it)
    cancelled: bool = False
    # Bookkeeping of a delivered attempt, run in record_attempt's transaction (a Slack app's
    # posted message remembered: runs.actions.slack.remember_gate_message).
    after: Callable[[], object] | None = None


def record_attempt(delivery: Delivery, outcome: Outcome) -> None:
    """Store what one attempt gave, and what it says of its hook: a success closes the hook's
    breaker, a failure counts towards opening it (the hook's other deliveries then wait until
    the cooldown ends; none is failed for it). Disable the hook (and tell its owners) when asked.
    Only the worker that holds the lease records (a retry pressed meanwhile starts afresh)."""
    now = timezone.now()
    with transaction.atomic():
        hook = None
        if delivery.webhook_id is not None:  # the hook first, then the row (do_retry_delivery's order)
            hook = Webhook.objects.select_for_update().filter(pk=delivery.webhook_id).first()
        fields: dict[str, object] = {
            "response_status": outcome.response_status,
            "response_excerpt": outcome.excerpt[:500],
            "error": outcome.error[:500],
            "lease_until": None,
        }
        if outcome.delivered:
            fields |= {"status": DeliveryStatus.DELIVERED, "delivered_at": now}
        elif outcome.cancelled:
            fields |= {"status": DeliveryStatus.CANCELLED}
        elif outcome.retry_at is not None and not outcome.disable_hook:
            fields |= {"status": DeliveryStatus.PENDING, "next_attempt_at": outcome.retry_at}
        else:
            fields |= {"status": DeliveryStatus.FAILED}
        mine = Delivery.objects.filter(pk=delivery.pk, attempts=delivery.attempts).update(**fields)
        if mine and outcome.delivered and outcome.after is not None:
            outcome.after()
        if mine and fields["status"] == DeliveryStatus.PENDING and outcome.retry_at is not None:
            schedule_deliveries(outcome.retry_at)
        if hook is not None and hook.enabled and mine and not outcome.cancelled and not outcome.disable_hook:
            _breaker_after(hook, outcome, now)
        if outcome.disable_hook and hook is not None:
            _disable(hook, outcome.disable_hook)


BREAKER_FIELDS = ["consecutive_failures", "failing_since", "last_failure", "backoff_until", "backoffs"]


def _breaker_after(hook: Webhook, outcome: Outcome, now: datetime) -> None:
    if outcome.delivered:
        if hook.consecutive_failures or hook.backoff_until is not None:
            hook.breaker_succeeded()
            hook.save(update_fields=BREAKER_FIELDS)
        return
    opened = hook.breaker_failed(outcome.error or "failed", now=now)
    hook.save(update_fields=BREAKER_FIELDS)
    until = hook.backoff_until
    if until is not None and until > now:
        # open: the hook's waiting deliveries (this one too) wait for the cooldown, no attempt spent
        Delivery.objects.filter(
            webhook=hook, status=DeliveryStatus.PENDING, next_attempt_at__lt=until
        ).filter(Q(lease_until__isnull=True) | Q(lease_until__lte=now)).update(next_attempt_at=until)
    if opened:
        schedule_deliveries(until)


def _end_backoff(hook: Webhook) -> None:
    """An owner asked for a delivery now (a retry, a test event): an open breaker turns half-open,
    so that delivery is the probe (the others still wait for the cooldown)."""
    now = timezone.now()
    if hook.backoff_until is not None and hook.backoff_until > now:
        hook.backoff_until = now
        hook.save(update_fields=["backoff_until"])


def _cancel_pending(hook: Webhook, why: str) -> None:
    Delivery.objects.filter(webhook=hook, status=DeliveryStatus.PENDING).update(
        status=DeliveryStatus.CANCELLED, error=why
    )


def _disable(hook: Webhook, reason: str) -> None:
    """(The caller holds the hook's row lock.)"""
    if not hook.enabled:
        return
    hook.enabled = False
    hook.disabled_reason = reason[:500]
    hook.disabled_at = timezone.now()
    hook.save(update_fields=["enabled", "disabled_reason", "disabled_at"])
    _cancel_pending(hook, "the webhook was disabled")
    _tell_owners(hook, reason)


def _tell_owners(hook: Webhook, reason: str) -> None:
    """E-mail the workspace's owners (through the outbox, so it is not lost either)."""
    owners = [
        m.user
        for m in Membership.objects.filter(workspace_id=hook.workspace_id, role=Role.OWNER).select_related(
            "user"
        )
        if m.user.email and m.user.is_active
    ]
    if not owners:
        return
    body = envelope(
        HOOK_DISABLED,
        {
            "webhookId": hook.public_id,
            "url": hook.url,
            "reason": reason,
            "settingsUrl": f"{site_url()}/settings/webhooks/",
        },
    )
    now = timezone.now()
    Delivery.objects.bulk_create(
        Delivery(
            public_id=new_message_id(),
            workspace_id=hook.workspace_id,
            recipient=user,
            channel=DeliveryChannel.EMAIL,
            event_type=HOOK_DISABLED,
            payload=body,
            next_attempt_at=now,
        )
        for user in owners
    )
    schedule_deliveries()


def pending_count() -> int:
    return Delivery.objects.filter(status=DeliveryStatus.PENDING).count()


def next_due() -> datetime | None:
    return (
        Delivery.objects.filter(status=DeliveryStatus.PENDING)
        .order_by("next_attempt_at")
        .values_list("next_attempt_at", flat=True)
        .first()
    )
