"""Reads of a workspace's webhooks, their deliveries and people's notification choices.

Workspace first: another workspace's hook answers exactly like a missing one (WebhookNotFound).
"""

from __future__ import annotations

from django.db.models import QuerySet

from runs.models import Delivery, NotificationPreference, Webhook, Workspace
from runs.selectors.keyset import newest_first


class WebhookNotFound(Exception):
    """No such webhook (or delivery) in this workspace."""


def webhooks_of(workspace: Workspace) -> QuerySet[Webhook]:
    return Webhook.objects.filter(workspace=workspace)


def get_webhook(workspace: Workspace, webhook_id: object) -> Webhook:
    if not isinstance(webhook_id, str) or len(webhook_id) > 40:
        raise WebhookNotFound("no such webhook")
    hook = Webhook.objects.filter(workspace=workspace, public_id=webhook_id).first()
    if hook is None:
        raise WebhookNotFound("no such webhook")
    return hook


def recent_deliveries(hook: Webhook, *, limit: int = 50) -> list[Delivery]:
    return deliveries_page(hook, limit=limit)[0]


def deliveries_page(hook: Webhook, *, cursor: str = "", limit: int = 50) -> tuple[list[Delivery], str]:
    """One keyset page of the hook's deliveries, newest first (index delivery_hook_recent), and the
    next page's cursor (""); BadCursor for a cursor that does not parse."""
    return newest_first(Delivery.objects.filter(webhook=hook), cursor=cursor, limit=limit)


def recent_deliveries_by_hook(hooks: list[Webhook], *, per_hook: int = 10) -> dict[int, list[Delivery]]:
    """The last ``per_hook`` deliveries of each hook, one query per hook (a page lists <= 50 hooks)."""
    return {hook.pk: recent_deliveries(hook, limit=per_hook) for hook in hooks}


def preferences_of(user, workspace: Workspace) -> NotificationPreference | None:
    return NotificationPreference.objects.filter(user=user, workspace=workspace).first()
