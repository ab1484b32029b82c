"""Background bundle imports: one row per large import, what the import page and the API poll."""

from __future__ import annotations

from django.db import models


class ImportJobStatus(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class ImportJob(models.Model):
    """A bundle waiting in ``var/imports`` (``file``) to be imported by the ``import_bundle`` task.

    ``events`` and ``bytes_read`` grow while it runs (written beside the import's transaction,
    which holds the rows until the end); ``run_id`` names the run once it is stored; a failed job
    carries the refusal's ``error_code`` and ``error_message`` and stored nothing.
    """

    job_id = models.CharField(max_length=40, unique=True)
    workspace = models.ForeignKey("runs.Workspace", on_delete=models.CASCADE, related_name="import_jobs")
    status = models.CharField(max_length=12, choices=ImportJobStatus.choices, default=ImportJobStatus.QUEUED)
    file = models.CharField(max_length=200)
    size = models.BigIntegerField(default=0)
    bytes_read = models.BigIntegerField(default=0)
    events = models.BigIntegerField(default=0)
    as_new_id = models.BooleanField(default=False)
    run_id = models.CharField(max_length=200, blank=True)
    error_code = models.CharField(max_length=60, blank=True)
    error_message = models.TextField(blank=True)
    created_by = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The django-tasks-db task row importing it (a re-run of the same row after its worker died
    # may take the job over; any other row finds it taken) and how many times one was started.
    task_id = models.CharField(max_length=64, blank=True)
    attempts = models.IntegerField(default=0)

    class Meta:
        app_label = "runs"
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["workspace", "-created_at"], name="importjob_ws_created")]
