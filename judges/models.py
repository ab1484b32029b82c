"""Gate judges and their proposals.

A :class:`GateJudge` is one version of an evaluator attached to one gate (workflow + step + gate
kind, or a checkpoint name): an LLM judge (a prompt version of the registry and a model) or a
code rule. Each gate request it sees becomes one :class:`Proposal` (approve or reject, a
rationale, a confidence), later joined with the decision that closed the gate (a person's, or
the judge's own when the owner delegated the gate to it).
"""

from __future__ import annotations

from decimal import Decimal

from django.db import models

from runs.models import Run, Workspace

DEFAULT_FLOOR = 0.8
MIN_FLOOR = 0.6
MIN_ITEMS = 50  # human-decided items of the gate in the window before delegation is possible
DEFAULT_AUDIT_PERCENT = 10.0
DEFAULT_WINDOW_DAYS = 30


class JudgeKind(models.TextChoices):
    LLM = "llm", "LLM judge"
    RULE = "rule", "Code rule"


class Delegation(models.TextChoices):
    OFF = "off", "Off (shadow only)"
    APPROVE = "approve", "May approve"
    BOTH = "both", "May approve and reject"


class GateJudge(models.Model):
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    judge_id = models.CharField(max_length=40, unique=True)  # public id (URLs, REST)
    name = models.CharField(max_length=100)
    version = models.PositiveIntegerField(default=1)
    kind = models.CharField(max_length=8, choices=JudgeKind.choices)
    # the gate: workflow + step + gate kind, or a checkpoint name (gate CHECKPOINT)
    workflow_id = models.CharField(max_length=200)
    step_id = models.CharField(max_length=200)
    gate = models.CharField(max_length=20)
    checkpoint = models.CharField(max_length=200, blank=True, default="")
    # llm: {"provider", "model", "prompt", "promptVersion"}; rule: {"rules": review.rules, "onMatch"}
    config = models.JSONField(default=dict)
    enabled = models.BooleanField(default=True)
    show_to_reviewers = models.BooleanField(default=False)  # off: human labels stay independent
    budget = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)  # USD; None: none
    spent = models.DecimalField(max_digits=12, decimal_places=6, default=Decimal(0))
    budget_said = models.BooleanField(default=False)
    # delegation policy
    delegation = models.CharField(max_length=8, choices=Delegation.choices, default=Delegation.OFF)
    min_confidence = models.FloatField(default=0.9)
    kappa_floor = models.FloatField(default=DEFAULT_FLOOR)
    audit_percent = models.FloatField(default=DEFAULT_AUDIT_PERCENT)
    window_days = models.PositiveIntegerField(default=DEFAULT_WINDOW_DAYS)
    # online evaluation: the share (percent) of the gate's workflow's finished runs it scores; 0: off
    online_percent = models.FloatField(default=0.0)
    delegated_at = models.DateTimeField(null=True, blank=True)
    suspended_at = models.DateTimeField(null=True, blank=True)
    suspended_reason = models.CharField(max_length=500, blank=True, default="")
    created_by = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "name", "version"], name="judge_name_version")
        ]
        indexes = [models.Index(fields=["workspace", "workflow_id", "enabled"], name="judge_ws_wf")]

    @property
    def label(self) -> str:
        return f"{self.name}@{self.version}"

    @property
    def actor(self) -> str:
        return f"judge:{self.label}"

    @property
    def gate_label(self) -> str:
        where = f"CHECKPOINT “{self.checkpoint}”" if self.checkpoint else self.gate
        return f"{self.workflow_id} / {self.step_id} / {where}"


class ProposalStatus(models.TextChoices):
    PENDING = "pending"  # being judged
    PROPOSED = "proposed"
    OVER_BUDGET = "over_budget"
    FAILED = "failed"


class Proposal(models.Model):
    judge = models.ForeignKey(GateJudge, on_delete=models.CASCADE, related_name="proposals")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    gate_key = models.CharField(max_length=500)  # step|gate|checkpoint|request event id or "implied"
    step_id = models.CharField(max_length=200)
    gate = models.CharField(max_length=20)
    checkpoint = models.CharField(max_length=200, blank=True, default="")
    after_seq = models.PositiveIntegerField()  # the run's last seq when the gate was seen pending
    status = models.CharField(max_length=12, choices=ProposalStatus.choices, default=ProposalStatus.PENDING)
    decision = models.CharField(max_length=10, blank=True, default="")  # approved | rejected
    confidence = models.FloatField(null=True, blank=True)
    rationale = models.TextField(blank=True, default="")
    error = models.CharField(max_length=500, blank=True, default="")
    cost = models.DecimalField(max_digits=12, decimal_places=6, default=Decimal(0))
    judge_run_id = models.CharField(max_length=200, blank=True, default="")
    latency_ms = models.FloatField(null=True, blank=True)
    annotation_seq = models.PositiveIntegerField(null=True, blank=True)
    audit = models.BooleanField(default=False)  # delegated gate kept for people as the audit sample
    delegated = models.BooleanField(default=False)  # the judge decided this gate
    policy = models.JSONField(default=dict, blank=True)  # what allowed a delegated decision
    outcome = models.CharField(max_length=10, blank=True, default="")  # the gate's decision
    outcome_by = models.CharField(max_length=200, blank=True, default="")
    outcome_seq = models.PositiveIntegerField(null=True, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    # A person overruled the judge's decision of this gate (runs.actions.overrule, a fork): their
    # decision, a label the agreement counts (the gate's outcome in the run stays the judge's)
    overruled = models.CharField(max_length=10, blank=True, default="")
    overruled_by = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-pk"]
        constraints = [models.UniqueConstraint(fields=["judge", "run", "gate_key"], name="proposal_unique")]
        indexes = [
            models.Index(fields=["run", "outcome"], name="proposal_run_outcome"),
            models.Index(fields=["judge", "decided_at"], name="proposal_judge_decided"),
        ]

    @property
    def human(self) -> bool:
        """Whether a person decided the gate (a label the agreement counts)."""
        return bool(self.outcome) and not self.outcome_by.startswith("judge:")

    @property
    def label(self) -> str:
        """What a person decided, "" when nobody did: their overrule of the judge's decision, else
        the gate's outcome when a person decided it."""
        return self.overruled or (self.outcome if self.human else "")


class OnlineScore(models.Model):
    """One live run (SDK, OTLP-ingested, or the workbench's own) of the judge's workflow, scored
    by the judge once it finished (online evaluation): recorded on the run as an annotation
    tagged ``judge-score``. A new version of the judge re-scores the runs older versions scored;
    an equal model request is answered from the response cache (no provider call)."""

    judge = models.ForeignKey(GateJudge, on_delete=models.CASCADE, related_name="scores")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=12, choices=ProposalStatus.choices, default=ProposalStatus.PENDING)
    decision = models.CharField(max_length=10, blank=True, default="")  # approved | rejected
    confidence = models.FloatField(null=True, blank=True)
    rationale = models.TextField(blank=True, default="")
    error = models.CharField(max_length=500, blank=True, default="")
    cost = models.DecimalField(max_digits=12, decimal_places=6, default=Decimal(0))
    judge_run_id = models.CharField(max_length=200, blank=True, default="")
    annotation_seq = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-pk"]
        constraints = [models.UniqueConstraint(fields=["judge", "run"], name="online_score_unique")]
