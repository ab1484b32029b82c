"""Monitors (runs.actions.monitors): a workspace's watch on a number the rollups keep (cost per
hour or day, latency p95, error rate, gates waiting, time to decision, rejection rate), with a
warning and an alert line, evaluated on a schedule; their state changes, and the cost samples a
per-hour spend is measured between."""

from __future__ import annotations

from django.db import models

from runs.fields import ProtocolCharField


class MonitorMetric(models.TextChoices):
    COST_HOUR = "cost_hour", "Cost per hour"
    COST_DAY = "cost_day", "Cost per day (UTC)"
    LATENCY_P95 = "latency_p95", "Latency p95 (seconds)"
    ERROR_RATE = "error_rate", "Error rate (% of finished runs)"
    GATES_WAITING = "gates_waiting", "Gates waiting longer than N minutes"
    DECISION_P95 = "decision_p95", "Time to decision p95 (seconds)"
    REJECTION_RATE = "rejection_rate", "Rejection rate (% of decisions)"


class MonitorState(models.TextChoices):
    OK = "ok"
    WARNING = "warning"
    ALERT = "alert"


class Monitor(models.Model):
    """One watch of one workspace. ``state`` moves with hysteresis: a line is crossed at its value
    and left only below ``line * (1 - margin)``. Filters (``workflow_id``, ``model``, ``prompt``,
    ``gate``) narrow the rollups read; which apply depends on the metric."""

    public_id = models.CharField(max_length=40, unique=True)
    workspace = models.ForeignKey("runs.Workspace", on_delete=models.CASCADE, related_name="monitors")
    name = ProtocolCharField(max_length=100)
    metric = models.CharField(max_length=20, choices=MonitorMetric.choices)
    workflow_id = ProtocolCharField(max_length=200, blank=True, default="")
    model = ProtocolCharField(max_length=200, blank=True, default="")
    prompt = ProtocolCharField(max_length=200, blank=True, default="")  # "name@N"
    gate = ProtocolCharField(max_length=200, blank=True, default="")  # a gate's step id
    minutes = models.IntegerField(default=30)  # gates_waiting: waiting longer than this
    window_days = models.IntegerField(default=1)  # latency, rates, decisions: run days read
    currency = models.CharField(max_length=8, default="USD")  # cost metrics
    warning = models.FloatField(null=True, blank=True)
    alert = models.FloatField()
    margin = models.FloatField(default=0.1)  # hysteresis: leave a line below line * (1 - margin)
    email_owners = models.BooleanField(default=False)
    enabled = models.BooleanField(default=True)
    state = models.CharField(max_length=10, choices=MonitorState.choices, default=MonitorState.OK)
    value = models.FloatField(null=True, blank=True)  # the last value measured (None: no data)
    evaluated_at = models.DateTimeField(null=True, blank=True)
    changed_at = models.DateTimeField(null=True, blank=True)
    created_by = ProtocolCharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["workspace", "enabled"], name="monitor_ws_enabled")]

    def __str__(self) -> str:
        return f"{self.public_id} ({self.name})"


class MonitorChange(models.Model):
    """One state change of a monitor (its history), with the value and the run days it read."""

    monitor = models.ForeignKey(Monitor, on_delete=models.CASCADE, related_name="changes")
    at = models.DateTimeField()
    from_state = models.CharField(max_length=10)
    to_state = models.CharField(max_length=10)
    value = models.FloatField(null=True, blank=True)
    range_from = models.DateField()
    range_to = models.DateField()
    deliveries = models.IntegerField(default=0)  # outbox rows written for it

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["monitor", "-at", "-id"], name="monitor_change_recent")]


class MonitorSample(models.Model):
    """A cost-per-hour monitor's reading of the cost rollups: ``total`` is the cost of the calls
    made on ``day`` (UTC) as summed at ``at``. The spend over the last hour is what the rollups
    hold now for the days since the sample taken an hour ago, minus that sample's total."""

    monitor = models.ForeignKey(Monitor, on_delete=models.CASCADE, related_name="+")
    at = models.DateTimeField()
    day = models.DateField()
    total = models.TextField(default="0")  # decimal text

    class Meta:
        indexes = [models.Index(fields=["monitor", "at"], name="monitor_sample_at")]
