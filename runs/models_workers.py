"""Task workers' leases: one row per running ``manage.py worker`` process.

A worker writes ``heartbeat_at`` every few seconds. A task row (django-tasks-db's
``DBTaskResult``) that is ``RUNNING`` under a worker whose lease expired (no heartbeat for
``WORKBENCH_WORKER_LEASE_SECONDS``) is put back to ``READY`` by any live worker and runs again.
"""

from __future__ import annotations

from django.db import models


class WorkerLease(models.Model):
    worker_id = models.CharField(max_length=64, primary_key=True)
    hostname = models.CharField(max_length=200, blank=True)
    pid = models.IntegerField(default=0)
    queues = models.CharField(max_length=400, blank=True)
    threads = models.IntegerField(default=1)
    started_at = models.DateTimeField(auto_now_add=True)
    heartbeat_at = models.DateTimeField(db_index=True)

    class Meta:
        app_label = "runs"
        ordering = ["started_at"]

    def __str__(self) -> str:
        return f"{self.worker_id} ({self.hostname}:{self.pid})"
