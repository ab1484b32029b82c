"""Gate policies kept beside the protocol: the workspace's settings, the votes before a quorum,
and the escalation tiers already told (runs.actions.gatepolicy writes them).

Votes are facts of the run as well: each is also an ``annotation`` event of the trace (tag
``workbench.gate-vote``), so an exported bundle carries them in fields protocol 1.0.0 has. The
rows here are what the server counts and shows; ``docs/users/gate-policies.md`` says more.
"""

from __future__ import annotations

from django.db import models


class GatePolicySetting(models.Model):
    """A workspace's gate policy: ``workflow_id`` "" is the default, any other the policy of the
    runs of that workflow. ``policy`` is the checked JSON of runs.engine.gatepolicy.check."""

    workspace = models.ForeignKey("runs.Workspace", on_delete=models.CASCADE, related_name="gate_policies")
    workflow_id = models.CharField(max_length=200, blank=True, default="")
    policy = models.JSONField(default=dict)
    updated_by = models.CharField(max_length=200, blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "runs"
        ordering = ["workflow_id"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "workflow_id"], name="uniq_gate_policy_workflow")
        ]


class GateVote(models.Model):
    """One member's vote on one waiting gate (one request of it: ``round``), before or at its
    quorum. ``seq`` is the trace event that carries it (an annotation, or for the deciding vote
    the ``human_gate_resolved`` event); ``metadata`` holds ``workbench.channel``."""

    workspace = models.ForeignKey("runs.Workspace", on_delete=models.CASCADE, related_name="+")
    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="gate_votes")
    step_id = models.CharField(max_length=200)
    gate = models.CharField(max_length=20)
    checkpoint = models.CharField(max_length=200, blank=True, default="")
    round = models.CharField(max_length=200)  # the request's event id, or "implied:<seq>"
    voter = models.CharField(max_length=200)  # the actor: "user:<name>" or "token:<key id>"
    decision = models.CharField(max_length=16)
    note = models.TextField(blank=True, default="")
    channel = models.CharField(max_length=16, default="page")
    metadata = models.JSONField(default=dict)
    seq = models.IntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        app_label = "runs"
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "step_id", "gate", "checkpoint", "round", "voter"], name="uniq_gate_vote"
            )
        ]


class GateEscalation(models.Model):
    """An escalation tier told about a waiting gate: at most one row per gate request and tier,
    so a tier is notified once however often (or on however many workers) the sweep runs."""

    workspace = models.ForeignKey("runs.Workspace", on_delete=models.CASCADE, related_name="+")
    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="gate_escalations")
    step_id = models.CharField(max_length=200)
    gate = models.CharField(max_length=20)
    checkpoint = models.CharField(max_length=200, blank=True, default="")
    round = models.CharField(max_length=200)
    tier = models.IntegerField()
    recipients = models.IntegerField(default=0)
    notified_at = models.DateTimeField()

    class Meta:
        app_label = "runs"
        ordering = ["id"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "step_id", "gate", "checkpoint", "round", "tier"], name="uniq_gate_escalation"
            )
        ]
