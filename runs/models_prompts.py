"""Prompts: a workspace's prompts, their immutable versions, labels, protected labels and
promotion requests (imported back into runs.models)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from runs.protocol.values import loads


def _person() -> models.ForeignKey:  # prompts below: immutable versions, labels, promotion requests
    return models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")


class PromptType(models.TextChoices):
    TEXT = "text", "Text"
    CHAT = "chat", "Chat messages"


class Prompt(models.Model):
    workspace = models.ForeignKey("runs.Workspace", on_delete=models.CASCADE, related_name="prompts")
    name = models.CharField(max_length=200)
    type = models.CharField(max_length=8, choices=PromptType.choices, default=PromptType.TEXT)
    tags = models.JSONField(default=list, blank=True)
    created_by = _person()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["workspace", "name"], name="uniq_prompt_name")]


class PromptVersion(models.Model):
    prompt = models.ForeignKey(Prompt, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    body = models.TextField()
    config = models.TextField(default="{}")
    message = models.CharField(max_length=500, blank=True)
    created_by = _person()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["prompt_id", "number"]
        constraints = [models.UniqueConstraint(fields=["prompt", "number"], name="uniq_prompt_version")]

    def save(self, *args, **kwargs) -> None:
        if not self._state.adding:
            raise ValueError("a prompt version is immutable: save a new version instead")
        super().save(*args, **kwargs)

    @property
    def body_json(self):
        return loads(self.body)

    @property
    def config_json(self) -> dict:
        return loads(self.config) if self.config.startswith("{") else {}


class PromptLabel(models.Model):
    prompt = models.ForeignKey(Prompt, on_delete=models.CASCADE, related_name="labels")
    name = models.CharField(max_length=40)
    version = models.ForeignKey(PromptVersion, on_delete=models.CASCADE, related_name="labels")
    updated_by = _person()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["prompt", "name"], name="uniq_prompt_label")]


class ProtectedLabel(models.Model):
    workspace = models.ForeignKey("runs.Workspace", on_delete=models.CASCADE, related_name="protected_labels")
    name = models.CharField(max_length=40)
    created_by = _person()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["workspace", "name"], name="uniq_protected_label")]


class PromotionStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"


class PromotionRequest(models.Model):
    workspace = models.ForeignKey(
        "runs.Workspace", on_delete=models.CASCADE, related_name="promotion_requests"
    )
    prompt = models.ForeignKey(Prompt, on_delete=models.CASCADE, related_name="promotions")
    label = models.CharField(max_length=40)
    from_version = models.ForeignKey(
        PromptVersion, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    to_version = models.ForeignKey(PromptVersion, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(
        max_length=10, default=PromotionStatus.PENDING, db_index=True
    )  # PromotionStatus
    note = models.CharField(max_length=1000, blank=True)
    experiment_ref = models.CharField(max_length=200, blank=True)
    requested_by = _person()
    requested_at = models.DateTimeField(auto_now_add=True)
    decided_by = _person()
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_note = models.CharField(max_length=1000, blank=True)

    class Meta:
        ordering = ["-requested_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["prompt", "label"],
                condition=models.Q(status="pending"),
                name="uniq_pending_promotion",
            )
        ]
