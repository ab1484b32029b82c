"""Playground storage: providers and models per workspace (with the price table), saved prompts,
and executions (the audit trail of every send, each also recorded as a run).

Configuration hierarchy: rows with ``workspace = NULL`` are the global defaults; a workspace adds
its own providers (its own API keys) and models and may choose its default model; a saved
prompt fixes an operation, a model and settings; the page's toggles come last.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q

from playground.compose import ModelSpec
from runs.models import Workspace
from runs.protocol.values import loads
from runs.providers import egress
from runs.providers.base import DEFAULT_BASE_URLS, ProviderSettings
from runs.providers.pricing import Price


class ProviderKind(models.TextChoices):
    ANTHROPIC = "anthropic", "Anthropic Messages"
    OPENAI = "openai", "OpenAI Chat Completions (or compatible)"


class ScopedQuerySet(models.QuerySet):
    def visible_to(self, workspace: Workspace) -> ScopedQuerySet:
        """Global defaults plus the workspace's own rows."""
        return self.filter(Q(workspace__isnull=True) | Q(workspace=workspace))


class ProviderConfig(models.Model):
    workspace = models.ForeignKey(
        Workspace, null=True, blank=True, on_delete=models.CASCADE, related_name="playground_providers"
    )
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=16, choices=ProviderKind.choices)
    base_url = models.URLField(blank=True, help_text="Empty: the provider's own endpoint.")
    api_key_encrypted = models.TextField(blank=True)
    api_key_hint = models.CharField(max_length=16, blank=True)
    api_key_env = models.CharField(
        max_length=100,
        blank=True,
        help_text="Global (operator) providers only: the environment variable holding the key. It is "
        "only sent to the endpoints the operator lists for it (setting PLAYGROUND_OPERATOR_KEYS).",
    )
    key_required = models.BooleanField(default=True)
    timeout_seconds = models.FloatField(default=600.0)
    max_retries = models.IntegerField(default=2)
    is_enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ScopedQuerySet.as_manager()

    class Meta:
        ordering = ["workspace_id", "name"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "name"], name="uniq_provider_name"),
            models.UniqueConstraint(
                fields=["name"], condition=Q(workspace__isnull=True), name="uniq_global_provider_name"
            ),
            # A workspace's provider never reads a server environment variable.
            models.CheckConstraint(
                condition=Q(workspace__isnull=True) | Q(api_key_env=""), name="provider_env_key_operator_only"
            ),
        ]

    def __str__(self) -> str:
        return self.name

    def set_api_key(self, plain: str) -> None:
        # Deferred: keys imports cryptography, which start-up must not pay for (test_startup).
        from playground import keys

        plain = plain.strip()
        self.api_key_encrypted = keys.encrypt(plain) if plain else ""
        self.api_key_hint = keys.hint(plain) if plain else ""

    @property
    def endpoint(self) -> str:
        """Where calls go: the base URL, else the provider kind's own endpoint."""

        return (self.base_url or DEFAULT_BASE_URLS.get(self.kind, "")).rstrip("/")

    def operator_key_allowed(self) -> bool:
        """An operator key applies: a global row naming a variable the operator lists, called at
        one of the endpoints listed for that variable."""
        if self.workspace_id is not None or not self.api_key_env:
            return False
        endpoints = getattr(settings, "PLAYGROUND_OPERATOR_KEYS", {}).get(self.api_key_env, ())
        return self.endpoint in {url.rstrip("/") for url in endpoints}

    def _operator_key(self) -> str | None:
        return (os.environ.get(self.api_key_env) or None) if self.operator_key_allowed() else None

    def api_key(self) -> str | None:
        """The key for a call: the stored one, else the operator's (None if neither)."""
        if self.api_key_encrypted:
            # Deferred: cryptography at start-up (see above).
            from playground import keys

            return keys.decrypt(self.api_key_encrypted)
        return self._operator_key()

    @property
    def key_source(self) -> str:
        """What the settings page says about the key; never the name of an environment variable."""
        if self.api_key_encrypted:
            return f"stored key {self.api_key_hint}"
        if self._operator_key():
            return "operator key"
        return "none"

    def missing(self) -> str | None:
        """What has to be configured before this provider can answer (None when usable)."""
        if not self.is_enabled:
            return f"{self.name} is disabled"
        if self.key_required and not self.api_key_encrypted and not self._operator_key():
            if self.workspace_id is None:
                return f"{self.name} has no key: the operator of this server has not configured one"
            return f"{self.name} needs an API key: add it in Playground settings"
        return None

    def egress_allow(self) -> tuple[str, ...]:
        """What calls to this provider may reach beyond public addresses: the operator's allowance;
        in the embedded profile loopback too when the operator configured it (a global row)."""
        return egress.settings_allowance(settings, operator=self.workspace_id is None)

    def check_destination(self) -> None:
        """Raise egress.EgressRefused when calls may not go to this provider's endpoint now."""

        egress.check_destination(self.endpoint, self.egress_allow())

    def provider_settings(self) -> ProviderSettings:

        return ProviderSettings(
            kind=self.kind,
            api_key=self.api_key(),
            base_url=self.endpoint or None,
            timeout=self.timeout_seconds,
            max_retries=self.max_retries,
            egress_allow=self.egress_allow(),
        )


class ModelEntry(models.Model):
    """A model in the catalogue, with its capabilities and its row of the price table."""

    workspace = models.ForeignKey(
        Workspace, null=True, blank=True, on_delete=models.CASCADE, related_name="playground_models"
    )
    provider = models.ForeignKey(ProviderConfig, on_delete=models.CASCADE, related_name="models")
    model_id = models.CharField(max_length=200, help_text="The name the API knows the model by.")
    display_name = models.CharField(max_length=200)
    context_window = models.IntegerField(null=True, blank=True)
    supports_thinking = models.BooleanField(default=False)
    supports_citations = models.BooleanField(default=False)
    supports_pdf = models.BooleanField(default=False)
    max_tokens_param = models.CharField(max_length=32, default="max_tokens")
    is_default = models.BooleanField(default=False)
    is_active = models.BooleanField(default=True)
    position = models.IntegerField(default=0)
    # Price table, per million tokens. NULL = unknown (the cost is then shown as unknown).
    currency = models.CharField(max_length=8, default="USD")
    input_price = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    output_price = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    cache_read_price = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    cache_write_price = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    # Anthropic's 1 h cache writes (cache_write_price: the 5 min ones); NULL = unknown
    cache_write_1h_price = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)

    objects = ScopedQuerySet.as_manager()

    class Meta:
        ordering = ["position", "display_name"]

    def __str__(self) -> str:
        return self.display_name

    @property
    def kind(self) -> str:
        return self.provider.kind

    def spec(self) -> ModelSpec:

        return ModelSpec(
            provider=self.provider.kind,
            model=self.model_id,
            context_window=self.context_window,
            supports_thinking=self.supports_thinking,
            supports_citations=self.supports_citations,
            supports_pdf=self.supports_pdf,
            max_tokens_param=self.max_tokens_param,
        )

    def price(self) -> Price:

        return Price(
            input=self.input_price,
            output=self.output_price,
            cache_read=self.cache_read_price,
            cache_write=self.cache_write_price,
            currency=self.currency,
            cache_write_1h=self.cache_write_1h_price,
        )


class WorkspacePlayground(models.Model):
    """A workspace's own choices on top of the global defaults."""

    workspace = models.OneToOneField(Workspace, on_delete=models.CASCADE, related_name="playground")
    default_model = models.ForeignKey(
        ModelEntry, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    hidden_models = models.ManyToManyField(ModelEntry, blank=True, related_name="+")


class UserPlayground(models.Model):
    """One user's own choices in one workspace's playground (the model they last sent to)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    last_model = models.ForeignKey(
        ModelEntry, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "workspace"], name="uniq_user_playground")]


class OperationDefaults(models.Model):
    """Defaults per operation type (seed-004 item 31): temperature, thinking and citations for every
    send of that type. ``workspace = NULL``: global; a workspace's row wins over the global one.
    Levels, lowest first: global, workspace, prompt, operation type, session (the page)."""

    workspace = models.ForeignKey(
        Workspace,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="playground_operation_defaults",
    )
    operation_type = models.CharField(max_length=32)
    temperature = models.FloatField(null=True, blank=True)  # None: not set at this level
    thinking = models.BooleanField(null=True, blank=True)
    citations = models.BooleanField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ScopedQuerySet.as_manager()

    class Meta:
        ordering = ["operation_type"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "operation_type"], name="uniq_operation_defaults"),
            models.UniqueConstraint(
                fields=["operation_type"],
                condition=Q(workspace__isnull=True),
                name="uniq_global_operation_defaults",
            ),
        ]

    def values(self) -> dict:
        return {
            k: getattr(self, k)
            for k in ("temperature", "thinking", "citations")
            if getattr(self, k) is not None
        }


class SavedPrompt(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="playground_prompts")
    name = models.CharField(max_length=200)
    operation_type = models.CharField(max_length=32, default="generic")
    model = models.ForeignKey(ModelEntry, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    system_prompt = models.TextField(blank=True)
    prompt = models.TextField(blank=True)
    options = models.JSONField(
        default=dict, blank=True
    )  # toggles and advanced settings (session JSON subset)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["workspace", "name"], name="uniq_saved_prompt")]

    def __str__(self) -> str:
        return self.name


class ExecutionStatus(models.TextChoices):
    PENDING = "pending"
    PROCESSING = "processing"
    COMPLETED = "completed"
    FAILED = "failed"
    INCOMPLETE = "incomplete"  # the stream ended without its final event (STREAM_CUT)
    CANCELLED = "cancelled"


ACTIVE_STATUSES = ("pending", "processing")  # everything else is final


class ExecutionQuerySet(models.QuerySet):
    def for_workspace(self, workspace: Workspace) -> ExecutionQuerySet:
        return self.filter(workspace=workspace)


class Execution(models.Model):
    """One send: pending -> processing -> completed | failed | incomplete (a cut stream) |
    cancelled (Stop). Also recorded
    as run ``run_id``."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="playground_executions")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    model = models.ForeignKey(ModelEntry, null=True, on_delete=models.SET_NULL, related_name="executions")
    provider_kind = models.CharField(max_length=16, choices=ProviderKind.choices)
    model_name = models.CharField(max_length=200)
    status = models.CharField(
        max_length=16, choices=ExecutionStatus.choices, default=ExecutionStatus.PENDING, db_index=True
    )
    operation_type = models.CharField(max_length=32, default="generic")
    compare_group = models.CharField(max_length=64, blank=True, db_index=True)
    # The conversation this send belongs to (its runs are linked: tag conversation:<id>, and each
    # turn's run names the run of the answer it continues as its parent).
    conversation_id = models.CharField(max_length=32, blank=True, db_index=True)
    parent_run_id = models.CharField(max_length=200, blank=True)
    label = models.CharField(max_length=40, blank=True)
    run_id = models.CharField(max_length=200, blank=True)
    correlation_id = models.CharField(max_length=200, blank=True)
    # What was composed (JSON text, kept exact): request body, the new user content, flags, notes.
    request = models.TextField()
    user_content = models.TextField()
    flags = models.JSONField(default=dict)
    notes = models.JSONField(default=list)
    output_tool = models.CharField(max_length=100, blank=True)
    cache_keys = models.JSONField(default=list)
    # Streaming progress, then the result.
    partial_text = models.TextField(blank=True)
    partial_thinking = models.TextField(blank=True)
    content = models.TextField(blank=True)  # assistant content blocks (JSON text), exact
    response_text = models.TextField(blank=True)
    thinking = models.TextField(blank=True)
    citations = models.JSONField(default=list)
    tool_calls = models.JSONField(default=list)
    structured_output = models.JSONField(null=True, blank=True)
    structured_error = models.TextField(blank=True)
    usage = models.JSONField(default=dict)
    cost = models.DecimalField(max_digits=18, decimal_places=9, null=True, blank=True)
    currency = models.CharField(max_length=8, blank=True)
    stop_reason = models.CharField(max_length=40, blank=True)
    error_code = models.CharField(max_length=40, blank=True)
    error_message = models.TextField(blank=True)
    error_status = models.IntegerField(null=True, blank=True)
    provider_error_type = models.CharField(max_length=100, blank=True)
    duration_ms = models.IntegerField(null=True, blank=True)
    worker_id = models.CharField(max_length=100, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = ExecutionQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["status", "heartbeat_at"], name="exec_status_heartbeat")]

    @property
    def request_json(self) -> dict:
        return loads(self.request)

    @property
    def content_json(self) -> Any:
        return loads(self.content)

    @property
    def user_content_json(self) -> Any:
        return loads(self.user_content)

    @property
    def is_finished(self) -> bool:
        return self.status not in ACTIVE_STATUSES
