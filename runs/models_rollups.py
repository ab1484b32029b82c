"""Rollups maintained on the write path (runs.actions.rollups): what the ledgers, the runs list's
counters and the inbox read instead of every ``model_io`` body."""

from __future__ import annotations

from django.db import models


class CostSums(models.Model):
    """The sums a cost rollup row keeps (CostRollup, RunCostRollup): exact, tokens in ``numeric``
    columns, cost and duration as decimal text."""

    calls = models.BigIntegerField(default=0)
    input_tokens = models.DecimalField(max_digits=32, decimal_places=0, default=0)
    output_tokens = models.DecimalField(max_digits=32, decimal_places=0, default=0)
    total_tokens = models.DecimalField(max_digits=32, decimal_places=0, default=0)
    cached_input_tokens = models.DecimalField(max_digits=32, decimal_places=0, default=0)
    reasoning_tokens = models.DecimalField(max_digits=32, decimal_places=0, default=0)
    duration_ms = models.TextField(default="0")
    cost = models.TextField(default="0")

    class Meta:
        abstract = True


class CostRollup(CostSums):
    """Model responses summed on the write path (runs.actions.rollups), in the same transaction as
    their events: one row per workspace x run start day (UTC) x shard x call day x workflow x
    provider x model x step x subject (user, tenant, plan) x currency x price source x prompt.
    Sums are exact: tokens in ``numeric`` columns, cost and duration as decimal text (added as
    ``numeric`` on PostgreSQL, with ``Decimal`` on SQLite). ``shard`` (the run's pk modulo
    ROLLUP_SHARDS) spreads concurrent writers of one workspace over several rows. Label columns
    hold protocol strings as runs.fields spells them (NUL on PostgreSQL); ``key_hash`` is the
    SHA-256 of the whole key, so the unique index stays small whatever the labels' length."""

    workspace = models.ForeignKey("runs.Workspace", on_delete=models.CASCADE, related_name="+")
    run_day = models.DateField()
    key_hash = models.CharField(max_length=64)
    shard = models.SmallIntegerField(default=0)
    call_day = models.CharField(max_length=10)  # the response's ts day ("unknown" when it has none)
    workflow_id = models.TextField(default="")
    provider = models.TextField(default="")
    model = models.TextField(default="")
    step_id = models.TextField(default="")
    subject_user = models.TextField(default="")
    subject_tenant = models.TextField(default="")
    subject_plan = models.TextField(default="")
    currency = models.TextField(default="")  # normalized; "" for responses without a cost
    pricing = models.TextField(default="")  # who priced the calls (telemetry.pricing_source): key
    pricing_label = models.TextField(default="")
    prompt = models.TextField(default="")  # "name@N" of the prompt version the calls used, or ""

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "run_day", "key_hash"], name="uniq_cost_rollup")
        ]


class RunRollup(models.Model):
    """Runs counted on the write path: workspace x run start day (UTC) x workflow x shard, with the
    gates they wait on."""

    workspace = models.ForeignKey("runs.Workspace", on_delete=models.CASCADE, related_name="+")
    run_day = models.DateField()
    workflow_id = models.TextField()  # spelled as CostRollup's labels
    workflow_version = models.IntegerField(default=0)
    shard = models.SmallIntegerField(default=0)
    runs = models.BigIntegerField(default=0)
    # gates waiting for a decision on these runs (pending gates of running runs): the inbox count
    waiting_gates = models.BigIntegerField(default=0)
    # these runs by their status now (running ones are ``runs`` minus the three): the dashboard
    completed = models.BigIntegerField(default=0)
    failed = models.BigIntegerField(default=0)
    cancelled = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["workspace", "run_day", "workflow_id", "workflow_version", "shard"],
                name="uniq_run_rollup",
            )
        ]
        indexes = [models.Index(fields=["workspace", "workflow_id"], name="run_rollup_ws_workflow")]


class RunCostRollup(CostSums):
    """One run's model responses summed on the write path, in the same transaction as its events
    (runs.actions.rollups): one row per run x call day x provider x model x step x currency x price
    source x prompt, with CostRollup's sums. The run ledger (page and API) reads these rows instead
    of every ``model_io`` body of the run; a run's subject and workflow are its own columns, so
    they are not labels here. Rows go with the run (cascade); ``key_hash`` is the SHA-256 of the
    labels."""

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="+")
    key_hash = models.CharField(max_length=64)
    call_day = models.CharField(max_length=10)
    provider = models.TextField(default="")
    model = models.TextField(default="")
    step_id = models.TextField(default="")
    currency = models.TextField(default="")
    pricing = models.TextField(default="")
    pricing_label = models.TextField(default="")
    prompt = models.TextField(default="")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "key_hash"], name="uniq_run_cost_rollup")]


class MetricRollup(models.Model):
    """The dashboard's counts, kept on the write path (runs.actions.rollups) in the same transaction
    as the events and run rows they come from: one row per workspace x run start day (UTC) x
    workflow x shard x key, where the key is a ``kind`` and its labels:

    - ``run_latency``: finished runs by the bucket of their duration (``bucket``, see
      runs.presenters.histogram), ``label`` their status;
    - ``model_latency``: model responses by the bucket of their ``durationMs``, ``label`` the model;
    - ``decision_latency``: gate decisions by the bucket of the time from the gate's request to the
      decision, ``label`` the gate's step;
    - ``decision``: gate decisions, ``label`` the step, ``reviewer`` who decided, ``decision`` what
      (``bucket`` 0).

    Percentiles come from merged buckets, never from the events. ``key_hash`` is the SHA-256 of
    the key (labels spelled as CostRollup's)."""

    workspace = models.ForeignKey("runs.Workspace", on_delete=models.CASCADE, related_name="+")
    run_day = models.DateField()
    key_hash = models.CharField(max_length=64)
    workflow_id = models.TextField(default="")
    shard = models.SmallIntegerField(default=0)
    kind = models.CharField(max_length=20)
    label = models.TextField(default="")
    reviewer = models.TextField(default="")
    decision = models.TextField(default="")
    bucket = models.SmallIntegerField(default=0)
    count = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace", "run_day", "key_hash"], name="uniq_metric_rollup")
        ]
        indexes = [models.Index(fields=["workspace", "kind", "run_day"], name="metric_rollup_ws_kind_day")]


class RunMetricRollup(models.Model):
    """One run's share of MetricRollup (its model latencies and gate decisions; a run's own
    duration is its row's): what a deleted run subtracts without reading its events."""

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="+")
    key_hash = models.CharField(max_length=64)
    kind = models.CharField(max_length=20)
    label = models.TextField(default="")
    reviewer = models.TextField(default="")
    decision = models.TextField(default="")
    bucket = models.SmallIntegerField(default=0)
    count = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "key_hash"], name="uniq_run_metric_rollup")]
