"""Notifications: webhooks of a workspace (with their circuit breaker), each person's choices, and
the outbox of deliveries (imported back into runs.models)."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

from runs.fields import ProtocolCharField

BREAKER_CLOSED = "closed"
BREAKER_OPEN = "open"
BREAKER_HALF_OPEN = "half-open"


class WebhookKind(models.TextChoices):
    WEBHOOK = "webhook", "Webhook (Standard Webhooks, signed)"
    SLACK = "slack", "Slack incoming webhook"


class Webhook(models.Model):
    """An endpoint of one workspace told about that workspace's events (and no other's).

    ``secret`` (``whsec_<base64>``) signs every message; it is shown once, when the hook is made
    or its secret rotated. During a rotation the previous secret signs too, until
    ``previous_secret_until``. A hook the worker gave up on (410, or a message that failed every
    attempt for about three days) is disabled with the reason; owners re-enable it."""

    public_id = models.CharField(max_length=40, unique=True)
    workspace = models.ForeignKey("runs.Workspace", on_delete=models.CASCADE, related_name="webhooks")
    kind = models.CharField(max_length=16, choices=WebhookKind.choices, default=WebhookKind.WEBHOOK)
    url = models.CharField(max_length=2000)
    description = models.CharField(max_length=200, blank=True)
    events = models.JSONField(default=list)
    secret = models.CharField(max_length=120)
    previous_secret = models.CharField(max_length=120, blank=True)
    previous_secret_until = models.DateTimeField(null=True, blank=True)
    enabled = models.BooleanField(default=True)
    disabled_reason = models.CharField(max_length=500, blank=True)
    disabled_at = models.DateTimeField(null=True, blank=True)
    created_by = ProtocolCharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # The circuit breaker: failed attempts in a row (any delivery of the hook), since when, and
    # why the last one failed. ``backoff_until`` set: open until then (its deliveries wait, none
    # is failed for it), half-open once it has passed (one delivery probes); None: closed.
    # ``backoffs``: openings in a row, each cooldown twice the one before.
    consecutive_failures = models.IntegerField(default=0)
    failing_since = models.DateTimeField(null=True, blank=True)
    last_failure = models.CharField(max_length=500, blank=True)
    backoff_until = models.DateTimeField(null=True, blank=True)
    backoffs = models.IntegerField(default=0)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["workspace", "enabled"], name="webhook_ws_enabled")]

    def __str__(self) -> str:
        return f"{self.public_id} ({self.url})"

    def wants(self, event_type: str) -> bool:
        return self.enabled and event_type in self.events

    def breaker_state(self, now: datetime | None = None) -> str:
        """closed, open (deliveries wait until ``backoff_until``) or half-open (one probes)."""
        if self.backoff_until is None:
            return BREAKER_CLOSED
        return BREAKER_OPEN if self.backoff_until > (now or timezone.now()) else BREAKER_HALF_OPEN

    @property
    def backed_off(self) -> bool:
        return self.breaker_state() == BREAKER_OPEN

    def breaker_succeeded(self) -> None:
        """A delivery got through: the breaker closes and the streak is forgotten."""
        self.consecutive_failures, self.failing_since, self.last_failure = 0, None, ""
        self.backoff_until, self.backoffs = None, 0

    def breaker_failed(
        self,
        error: str,
        *,
        now: datetime | None = None,
        threshold: int | None = None,
        cooldown: float | None = None,
        max_cooldown: float | None = None,
        jitter: float = 0.1,
    ) -> bool:
        """Count a failed attempt; True when the breaker opens (or opens again) because of it.

        Closed: it opens at the ``threshold``-th failure in a row. Half-open: the probe failed, it
        opens again for twice as long. Open: an attempt that was already under way failed too;
        the cooldown stays as it is."""
        now = now or timezone.now()
        threshold = threshold or settings.WORKBENCH_NOTIFY_BREAKER_FAILURES
        self.consecutive_failures += 1
        self.failing_since = self.failing_since or now
        self.last_failure = error[:500]
        state = self.breaker_state(now)
        if state == BREAKER_OPEN or (state == BREAKER_CLOSED and self.consecutive_failures < threshold):
            return False
        self.backoffs += 1
        base = cooldown if cooldown is not None else settings.WORKBENCH_NOTIFY_BREAKER_COOLDOWN
        cap = max_cooldown if max_cooldown is not None else settings.WORKBENCH_NOTIFY_BREAKER_MAX_COOLDOWN
        seconds = min(base * 2 ** min(self.backoffs - 1, 30), cap)
        seconds *= 1 + random.uniform(-jitter, jitter)
        self.backoff_until = now + timedelta(seconds=seconds)
        return True


class NotificationPreference(models.Model):
    """One person's e-mail choices in one workspace (nothing is sent unless they opt in)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    workspace = models.ForeignKey(
        "runs.Workspace", on_delete=models.CASCADE, related_name="notification_preferences"
    )
    gates_to_decide = models.BooleanField(default=False)  # "gates I can decide in this workspace"
    runs_i_started = models.BooleanField(default=False)  # "runs I started": finished, failed, diverged
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "workspace"], name="uniq_notification_preference")
        ]
        indexes = [models.Index(fields=["workspace"], name="notification_pref_ws")]


class DeliveryChannel(models.TextChoices):
    WEBHOOK = "webhook"
    SLACK = "slack"
    EMAIL = "email"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending"  # due at next_attempt_at (a claimed one: when its lease runs out)
    DELIVERED = "delivered"
    FAILED = "failed"  # every attempt failed, or the receiver said 410 Gone
    CANCELLED = "cancelled"  # the hook was disabled or deleted, the person may no longer see it


class DeliveryQuerySet(models.QuerySet):
    def due(self, now) -> DeliveryQuerySet:
        return self.filter(status=DeliveryStatus.PENDING, next_attempt_at__lte=now)


class Delivery(models.Model):
    """The transactional outbox: one message to one destination, written in the same transaction
    as the events that caused it. ``public_id`` is the message's ``webhook-id``: the same on
    every retry, so receivers dedupe on it. ``payload`` is the exact body a webhook receives."""

    public_id = models.CharField(max_length=40, unique=True)
    workspace = models.ForeignKey("runs.Workspace", on_delete=models.CASCADE, related_name="deliveries")
    webhook = models.ForeignKey(
        Webhook, null=True, blank=True, on_delete=models.CASCADE, related_name="deliveries"
    )
    recipient = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    channel = models.CharField(max_length=16, choices=DeliveryChannel.choices)
    event_type = models.CharField(max_length=40)
    payload = models.TextField()
    status = models.CharField(max_length=16, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempts = models.IntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    response_status = models.IntegerField(null=True, blank=True)
    response_excerpt = models.CharField(max_length=500, blank=True)
    error = models.CharField(max_length=500, blank=True)
    # Set while a worker holds the delivery (its attempt is in flight), cleared when the outcome is
    # recorded; a worker killed mid-delivery leaves it set until it passes. What the per-hook and
    # per-host limits count.
    lease_until = models.DateTimeField(null=True, blank=True)

    objects = DeliveryQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["status", "next_attempt_at"], name="delivery_due"),
            models.Index(fields=["webhook", "-created_at", "-id"], name="delivery_hook_recent"),
            models.Index(
                fields=["lease_until"],
                name="delivery_in_flight",
                condition=models.Q(lease_until__isnull=False),
            ),
        ]
