"""Budgets: a workspace's monthly cap, run budgets (a default per workflow, one per run) and the
audit trail of every budget decision and refusal (runs.actions.budgets writes them)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class WorkspaceBudget(models.Model):
    """A workspace's monthly cap on the calls Workbench makes (playground, experiments, judges) and
    its default run budget; None = no limit."""

    workspace = models.OneToOneField("runs.Workspace", on_delete=models.CASCADE, related_name="+")
    monthly_cap = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    run_default = models.DecimalField(max_digits=14, decimal_places=6, null=True, blank=True)
    currency = models.CharField(max_length=8, default="USD")
    updated_at = models.DateTimeField(default=timezone.now)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)


class WorkflowBudget(models.Model):
    """The run budget of every run of one workflow (over the workspace's default)."""

    workspace = models.ForeignKey("runs.Workspace", on_delete=models.CASCADE, related_name="+")
    workflow_id = models.TextField()
    run_limit = models.DecimalField(max_digits=14, decimal_places=6)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "workflow_id"], name="uniq_workflow_budget")
        ]


class RunBudget(models.Model):
    """One run's own budget: set, or raised at its ``budget`` gate by a person."""

    run = models.OneToOneField("runs.Run", on_delete=models.CASCADE, related_name="+")
    run_limit = models.DecimalField(max_digits=14, decimal_places=6)
    updated_at = models.DateTimeField(default=timezone.now)


class BudgetRecord(models.Model):
    """The audit trail: every budget setting, pause, raise, stop, refusal and alert, in words."""

    KINDS = ("settings", "paused", "raised", "stopped", "refused", "alert")

    workspace = models.ForeignKey("runs.Workspace", on_delete=models.CASCADE, related_name="+")
    run_id = models.TextField(default="", blank=True)  # the protocol run id, "" for the workspace
    kind = models.CharField(max_length=16)
    actor = models.TextField(default="", blank=True)
    message = models.TextField()
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        indexes = [models.Index(fields=["workspace", "-at"], name="budget_record_ws_at")]
