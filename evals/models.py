"""Datasets (append-only item revisions) and experiments (forks of each item's source run, scored).

A dataset's items are never updated in place: every change is a :class:`DatasetItemRevision` row
(``put`` or ``delete`` of one item key) stamped with the dataset revision it belongs to, who made
it and when. The items "as of" a revision or a time are the last ``put`` of each key at or before
it, so a given ``asOf`` answers the same bytes forever. Writes go through ``evals.actions``.
"""

from __future__ import annotations

from django.db import models

from runs.models import Run, Workspace


class Dataset(models.Model):
    public_id = models.CharField(max_length=40, unique=True)  # "ds_..."
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="datasets")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    input_schema = models.JSONField(null=True, blank=True)  # JSON Schema the items' input must meet
    expected_schema = models.JSONField(null=True, blank=True)  # ... and their expected output
    revision = models.IntegerField(default=0)  # the last revision written (0: empty)
    created_by = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [models.UniqueConstraint(fields=["workspace", "name"], name="uniq_dataset_name")]

    def __str__(self) -> str:
        return self.name


class ItemOp(models.TextChoices):
    PUT = "put"
    DELETE = "delete"


class DatasetItemRevision(models.Model):
    """One change of one item: appended, never updated."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="item_revisions")
    revision = models.IntegerField()  # the dataset revision this change belongs to
    item_key = models.CharField(max_length=200)  # the item's id, stable across its revisions
    op = models.CharField(max_length=8, choices=ItemOp.choices)
    body = models.TextField(blank=True)  # canonical JSON: {input, expected, label?, note?, metadata?}
    # Where the item came from (empty for uploads and the API): the link back, and the dedupe key.
    source_run_id = models.CharField(max_length=200, blank=True)
    source_event_id = models.CharField(max_length=200, blank=True)
    source_seq = models.IntegerField(null=True, blank=True)
    source_key = models.CharField(max_length=500, blank=True)
    actor = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["revision", "item_key"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "item_key", "revision"], name="uniq_item_revision")
        ]
        indexes = [
            models.Index(fields=["dataset", "revision"], name="dsitem_rev"),
            models.Index(fields=["dataset", "source_key"], name="dsitem_source"),
        ]


class ExperimentStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"


class Experiment(models.Model):
    public_id = models.CharField(max_length=40, unique=True)  # "exp_..."
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="experiments")
    dataset = models.ForeignKey(Dataset, on_delete=models.RESTRICT, related_name="experiments")
    as_of_revision = models.IntegerField()  # the dataset revision the items were read at
    name = models.CharField(max_length=200)
    change = models.JSONField(default=dict, blank=True)  # {} (replay) or {"configurable": {...}}
    from_step_id = models.CharField(max_length=200, blank=True)  # the first step the change affects
    evaluator = models.JSONField(default=dict, blank=True)  # {"kind": "exact"|"jsonpath"|"function", ...}
    baseline = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    status = models.CharField(
        max_length=16, choices=ExperimentStatus.choices, default=ExperimentStatus.PENDING
    )
    summary = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    rescored = models.IntegerField(default=0)  # how many times it was scored again
    created_by = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    # The django-tasks-db task row running it (a re-run of that row after its worker died takes
    # it over; any other row finds it taken) and how many times one was started.
    task_id = models.CharField(max_length=64, blank=True)
    attempts = models.IntegerField(default=0)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return self.name


class ItemStatus(models.TextChoices):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    WAITING = "waiting"  # its fork stopped at a gate nobody decided
    FAILED = "failed"


class ExperimentItem(models.Model):
    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="items")
    item_key = models.CharField(max_length=200)
    source_run_id = models.CharField(max_length=200, blank=True)
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    run_id_text = models.CharField(max_length=200, blank=True)  # the fork's run id (kept if deleted)
    status = models.CharField(max_length=16, choices=ItemStatus.choices, default=ItemStatus.PENDING)
    output = models.TextField(blank=True)  # canonical JSON of the fork's output artifact (or null)
    score = models.FloatField(null=True, blank=True)
    score_detail = models.JSONField(default=dict, blank=True)
    provider_calls = models.IntegerField(default=0)
    cache_hits = models.IntegerField(default=0)
    tokens = models.BigIntegerField(default=0)
    cost = models.DecimalField(max_digits=18, decimal_places=8, default=0)
    source_cost = models.DecimalField(max_digits=18, decimal_places=8, default=0)
    latency_ms = models.IntegerField(null=True, blank=True)
    first_divergence_seq = models.IntegerField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["item_key"]
        constraints = [
            models.UniqueConstraint(fields=["experiment", "item_key"], name="uniq_experiment_item")
        ]
