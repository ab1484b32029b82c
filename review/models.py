"""Annotation queues. Scores keep their run, reviewer, config name and queue name, so deleting a
queue (its configs, items and claims) keeps every review (scores and the run's annotation events)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from runs.models import Run, Workspace


class DataType(models.TextChoices):
    # Langfuse's score config data types (so configs and scores move between the tools)
    NUMERIC = "NUMERIC"
    CATEGORICAL = "CATEGORICAL"
    BOOLEAN = "BOOLEAN"


class ItemKind(models.TextChoices):
    RUN = "run"
    EVENT = "event"
    STEP = "step"


class QueueQuerySet(models.QuerySet):
    def for_workspace(self, workspace: Workspace) -> QueueQuerySet:
        return self.filter(workspace=workspace)


class Queue(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="review_queues")
    queue_id = models.CharField(max_length=40, unique=True)  # public id (URLs, REST, MCP)
    name = models.CharField(max_length=200)
    instructions = models.TextField(blank=True, default="")
    reviews_per_item = models.PositiveSmallIntegerField(default=1)
    reservation_seconds = models.PositiveIntegerField(default=600)
    blind = models.BooleanField(default=True)  # a reviewer sees others' scores only after their own
    rules = models.JSONField(default=dict, blank=True)  # review.rules: runs added by themselves
    # "Add to dataset" from an item preselects this evals dataset (its public id; review never
    # imports evals, so it is a reference the evals page resolves in the workspace, or refuses)
    default_dataset = models.CharField(max_length=60, blank=True, default="")
    reviewers = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="+")
    created_by = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = QueueQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["workspace", "name"], name="review_queue_name_unique")]

    def __str__(self) -> str:
        return self.name


class ScoreConfig(models.Model):
    """One score a reviewer gives (Langfuse's ScoreConfig: name, dataType, min/max, categories,
    description, isArchived)."""

    queue = models.ForeignKey(Queue, on_delete=models.CASCADE, related_name="score_configs")
    name = models.CharField(max_length=100)
    data_type = models.CharField(max_length=12, choices=DataType.choices)
    min_value = models.FloatField(null=True, blank=True)
    max_value = models.FloatField(null=True, blank=True)
    categories = models.JSONField(default=list, blank=True)  # [{"label": str, "value": number}]
    description = models.TextField(blank=True, default="")
    is_archived = models.BooleanField(default=False)
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["position", "pk"]
        constraints = [models.UniqueConstraint(fields=["queue", "name"], name="review_config_name_unique")]


class Item(models.Model):
    queue = models.ForeignKey(Queue, on_delete=models.CASCADE, related_name="items")
    item_id = models.CharField(max_length=40, unique=True)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=8, choices=ItemKind.choices, default=ItemKind.RUN)
    seq = models.PositiveIntegerField(default=0)  # the event (kind "event"), else 0
    step_id = models.CharField(max_length=200, blank=True, default="")  # the step (kind "step")
    added_by = models.CharField(max_length=200, blank=True, default="")
    added_at = models.DateTimeField(auto_now_add=True)
    completed_reviews = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["queue", "run", "kind", "seq", "step_id"], name="review_item_unique"
            )
        ]


class Claim(models.Model):
    """A reviewer's reservation of an item (until ``expires_at``), then their completed or skipped review."""

    item = models.ForeignKey(Item, on_delete=models.CASCADE, related_name="claims")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    claimed_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    completed_at = models.DateTimeField(null=True, blank=True)
    skipped = models.BooleanField(default=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["item", "reviewer"], name="review_claim_unique")]
        indexes = [models.Index(fields=["item", "expires_at"], name="review_claim_item_exp")]


class Score(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    queue = models.ForeignKey(Queue, null=True, blank=True, on_delete=models.SET_NULL, related_name="scores")
    item = models.ForeignKey(Item, null=True, blank=True, on_delete=models.SET_NULL, related_name="scores")
    config = models.ForeignKey(
        ScoreConfig, null=True, blank=True, on_delete=models.SET_NULL, related_name="scores"
    )
    queue_name = models.CharField(max_length=200)
    name = models.CharField(max_length=100)
    data_type = models.CharField(max_length=12, choices=DataType.choices)
    value = models.FloatField(null=True, blank=True)  # numeric; categorical's value; boolean 1/0
    string_value = models.CharField(max_length=200, blank=True, default="")  # the label, "True"/"False"
    comment = models.TextField(blank=True, default="")
    kind = models.CharField(max_length=8, choices=ItemKind.choices, default=ItemKind.RUN)
    seq = models.PositiveIntegerField(default=0)
    step_id = models.CharField(max_length=200, blank=True, default="")
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewer_name = models.CharField(max_length=200)
    created_at = models.DateTimeField()
    annotation_seq = models.PositiveIntegerField(null=True, blank=True)  # the run's annotation event

    class Meta:
        ordering = ["pk"]
        indexes = [models.Index(fields=["queue", "name"], name="review_score_queue_name")]
