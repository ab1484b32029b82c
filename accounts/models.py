"""API tokens (per workspace, stored hashed) and stored responses for idempotent retries."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from runs.models import Workspace


class Scope(models.TextChoices):
    READ = "read", "Read runs, events and bundles"
    WRITE = "write", "Start runs, append events, import, cancel, delete"
    REVIEW = "review", "Resolve gates, edit artifacts, annotate"
    MANAGE = "manage", "Manage workspace settings: webhooks and their deliveries"


ALL_SCOPES: tuple[str, ...] = tuple(Scope.values)


class ApiTokenQuerySet(models.QuerySet):
    def for_workspace(self, workspace: Workspace) -> ApiTokenQuerySet:
        return self.filter(workspace=workspace)

    def active(self) -> ApiTokenQuerySet:
        now = timezone.now()
        return self.filter(revoked_at__isnull=True).filter(
            models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=now)
        )


class ApiToken(models.Model):
    """A machine credential of one workspace. Only the SHA-256 of its secret is stored.

    The full token (``wbt_<key_id>_<secret>``) is shown once, when it is created; ``key_id``
    is public (it names the token in lists, logs and event actors: ``token:<key_id>``).
    """

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="api_tokens")
    key_id = models.CharField(max_length=32, unique=True)
    secret_hash = models.CharField(max_length=64)
    name = models.CharField(max_length=200)
    scopes = models.JSONField(default=list)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    # Requests per rate window for this token; None means the workspace default.
    rate_limit = models.PositiveIntegerField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        # the tokens page: a keyset range of one workspace's tokens, newest first
        indexes = [models.Index(fields=["workspace", "-created_at", "-id"], name="token_ws_created")]

    def __str__(self) -> str:
        return f"{self.name} ({self.key_id})"

    @property
    def actor(self) -> str:
        return f"token:{self.key_id}"

    @property
    def is_revoked(self) -> bool:
        return self.revoked_at is not None

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()

    @property
    def is_active(self) -> bool:
        return not self.is_revoked and not self.is_expired

    @property
    def status(self) -> str:
        if self.is_revoked:
            return "revoked"
        if self.is_expired:
            return "expired"
        return "active"

    def has_scope(self, scope: str) -> bool:
        return scope in self.scopes


class IdempotencyRecord(models.Model):
    """The first response to a write carrying an ``Idempotency-Key``, replayed on retries.

    Keyed by workspace and key. ``status_code`` is None while the first request is still
    being processed; ``fingerprint`` (method, path, body hash) detects a key reused for a
    different request.
    """

    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="idempotency_records")
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64)
    actor = models.CharField(max_length=200, blank=True, default="")
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    content_type = models.CharField(max_length=100, blank=True, default="")
    body = models.BinaryField(default=b"")
    headers = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workspace", "key"], name="uniq_idempotency_key")]


class SpentAuthorizationCode(models.Model):
    """An OAuth authorization code already exchanged, kept as its SHA-256 with the tokens it gave.

    django-oauth-toolkit deletes a grant when its code is exchanged, so a second exchange only
    finds nothing (``invalid_grant``). OAuth 2.1 (section 4.1.3) asks more: a code presented twice
    was stolen or leaked, and the tokens already issued from it are revoked
    (:meth:`accounts.oauth.WorkspaceOAuth2Validator.validate_code`). Ids, not foreign keys: the
    tokens are deleted as they are revoked or refreshed; the refresh chain is followed from
    ``refresh_token_id``.
    """

    code_sha256 = models.CharField(max_length=64, unique=True)
    client_id = models.CharField(max_length=100)
    access_token_id = models.BigIntegerField(null=True)
    refresh_token_id = models.BigIntegerField(null=True)
    spent_at = models.DateTimeField(default=timezone.now, db_index=True)
