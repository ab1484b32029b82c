"""Rollups maintained on the write path: what the workspace ledger reads instead of every
``model_io`` body of the period (runs.models.CostRollup, runs.models.RunRollup).

The invariant: the rollup tables always equal :func:`recompute` over the stored events, i.e.
for every stored ``model_io`` response of every run of the workspace, counted under the run's
start day, workflow and subject (the run row's columns), and every run counted once under its
start day and workflow. It holds because every door that writes events or runs calls in here in
the same transaction:

- :func:`count_model_calls` from ``Appender.save`` (runs.actions.core): every append, a command,
  a host's batch, OTLP ingest, a bundle import, the history a fork copies;
- :func:`count_new_run` from ``save_new_run``: every new run (started, imported, forked, OTLP);
- :func:`forget_run` from ``do_delete_run`` (and any bulk retention): the run's calls and the
  run itself are subtracted before its rows go.

Each run's own calls are also kept per run (runs.models.RunCostRollup: run x call day x provider x
model x step x currency x price source x prompt), by the same hook in the same transaction: the
run ledger reads them instead of the run's ``model_io`` bodies, and :func:`forget_run` subtracts a
run from the workspace's rows by its per-run rows (a ten-million-event run goes without reading
its bodies).

Forks: a fork's copied history is stored as the fork's own events, and the run ledger and the
workspace ledger always counted every stored response of every run, so a fork's copied calls
count again under the fork (what was spent once is shown under both runs, as before rollups).
Redaction happens before events are stored (a redacted bundle, a fork of one): the rollups count
what is stored, so a redacted field is never counted or revealed through them.

A run's start day and subject never change after its row is created (the engine has no event
that changes them; a bundle's document carries the same ones its first state had), so the key a
run's calls are counted under is stable. ``manage.py rebuild_rollups`` recomputes everything
from the events when an operator needs it (after restoring a backup, or changing ROLLUP_SHARDS).

Prompt versions: a row's ``prompt`` label is ``name@N`` of the fetched prompt its calls were made
with (``payload["workbench.prompt"]``, telemetry.prompt_label), "" for calls without one. Rows
written before that label existed hold "" (their calls still sum into every total, under no
prompt version); ``manage.py rebuild_rollups`` files those calls under their prompt version. A
key whose prompt is "" hashes as it did before the label (:func:`_key_hash`), so new calls
without a prompt add to the old rows instead of starting twins.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any, cast

from django.db import connection, transaction

from runs.fields import from_column, to_column
from runs.models import (
    CostRollup,
    Event,
    MetricRollup,
    Run,
    RunCostRollup,
    RunMetricRollup,
    RunRollup,
    Workspace,
)
from runs.presenters.histogram import bucket_of
from runs.protocol.telemetry import (
    Number,
    derived_total_tokens,
    exact_amount,
    normalize_currency,
    pricing_source,
    prompt_label,
)
from runs.protocol.values import loads

# Concurrent writers of one workspace spread over this many rows per key (by run pk).
ROLLUP_SHARDS = 4

_INT_SUMS = (
    "calls",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cached_input_tokens",
    "reasoning_tokens",
)
_TEXT_SUMS = ("duration_ms", "cost")
_LABELS = (
    "call_day",
    "workflow_id",
    "provider",
    "model",
    "step_id",
    "subject_user",
    "subject_tenant",
    "subject_plan",
    "currency",
    "pricing",
    "pricing_label",
    "prompt",
)
_COLUMNS = ("workspace_id", "run_day", "key_hash", "shard", *_LABELS, *_INT_SUMS, *_TEXT_SUMS)

# (run_day, shard, call_day, workflow, provider, model, step, user, tenant, plan, currency, pricing,
# pricing label, prompt version)
Key = tuple[date, int, str, str, str, str, str, str, str, str, str, str, str, str]
# (run_day, workflow, workflow version, shard)
RunKey = tuple[date, str, int, int]
# a run's own calls: (call_day, provider, model, step, currency, pricing, pricing label, prompt)
CallKey = tuple[str, str, str, str, str, str, str, str]
_RUN_COST_LABELS = (
    "call_day",
    "provider",
    "model",
    "step_id",
    "currency",
    "pricing",
    "pricing_label",
    "prompt",
)
_RUN_COST_COLUMNS = ("run_id", "key_hash", *_RUN_COST_LABELS, *_INT_SUMS, *_TEXT_SUMS)


def run_day(run: Run) -> date:
    """The UTC day the run started: the day the workspace ledger files it under."""
    return run.started_at.astimezone(UTC).date()


def _run_labels(run: Run) -> tuple[date, int, str, str, str, str]:
    subject = run.subject if isinstance(run.subject, dict) else {}

    def text(name: str) -> str:
        value = subject.get(name)
        return value if isinstance(value, str) else ""

    return (
        run_day(run),
        run.pk % ROLLUP_SHARDS,
        run.workflow_id or "",
        text("userId"),
        text("tenantId"),
        text("planId"),
    )


def response_sums(event: Mapping[str, Any]) -> tuple[tuple[str, ...], list]:
    """What one ``model_io`` response adds: its labels (call day, provider, model, step, currency,
    price source and its label, prompt version ``name@N`` or "")
    and its sums [1, input, output, total, cached, reasoning, duration, cost], exactly as the
    ledger reads them (runs.protocol.telemetry.ledger_entry)."""
    usage = event.get("usage")
    tokens: list[Number] = [0, 0, 0, 0, 0]  # JSON numbers, summed as the ledger does
    if isinstance(usage, Mapping):
        tokens = [
            usage.get("inputTokens") or 0,
            usage.get("outputTokens") or 0,
            derived_total_tokens(usage),
            usage.get("cachedInputTokens") or 0,
            usage.get("reasoningTokens") or 0,
        ]
    duration = event.get("durationMs")
    cost = event.get("cost")
    currency, amount = "", Decimal(0)
    if isinstance(cost, Mapping):
        currency = normalize_currency(cost["currency"])
        amount = exact_amount(cost["amount"])
    labels = (
        str(event.get("ts") or "")[:10] or "unknown",
        event.get("provider") or "",
        event.get("model") or "",
        event.get("stepId") or "",
        currency,
        *pricing_source(event),
        prompt_label(event),
    )
    return labels, [1, *tokens, Decimal(0) if duration is None else exact_amount(duration), amount]


def _deltas(run: Run, events: Iterable[Mapping[str, Any]], sign: int) -> dict[Key, list]:
    day, shard, workflow, user, tenant, plan = _run_labels(run)
    out: dict[Key, list] = {}
    for event in events:
        if event.get("type") != "model_io" or event.get("direction") != "response":
            continue
        (call_day, provider, model, step, currency, pricing, pricing_label, prompt), sums = response_sums(
            event
        )
        key: Key = (
            day,
            shard,
            call_day,
            workflow,
            provider,
            model,
            step,
            user,
            tenant,
            plan,
            currency,
            pricing,
            pricing_label,
            prompt,
        )
        held = out.get(key)
        if held is None:
            out[key] = [sign * value for value in sums]
        else:
            for i, value in enumerate(sums):
                held[i] += sign * value
    return out


def _key_hash(key: Key) -> str:
    # without a prompt, the key hashes as it did before the prompt label (old rows keep adding up)
    labels = key[2:] if key[-1] else key[2:-1]
    text = json.dumps([key[1], *labels], ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _spell(text: str) -> str:
    return to_column(text) if connection.vendor == "postgresql" else text


def read_label(text: str) -> str:
    """A label column's value as the protocol string it holds."""
    return from_column(text) if connection.vendor == "postgresql" else text


def _apply(workspace_id: int, deltas: dict[Key, list]) -> None:
    """Add the deltas to the rollup rows (created when missing), in key order (no deadlock between
    two writers that touch the same rows)."""
    if not deltas:
        return
    ordered = sorted(
        ((_key_hash(key), key, sums) for key, sums in deltas.items()), key=lambda x: (x[1][0], x[0])
    )
    if connection.vendor == "postgresql":
        _apply_postgresql(workspace_id, ordered)
    else:
        _apply_read_modify_write(workspace_id, ordered)
    emptied = [(key[0], key_hash) for key_hash, key, sums in ordered if sums[0] < 0]
    if emptied:
        CostRollup.objects.filter(
            workspace_id=workspace_id,
            run_day__in={day for day, _ in emptied},
            key_hash__in={key_hash for _, key_hash in emptied},
            calls__lte=0,
        ).delete()


def _row(workspace_id: int, key_hash: str, key: Key, sums: list) -> list:
    return [
        workspace_id,
        key[0],
        key_hash,
        key[1],
        *(_spell(label) for label in key[2:]),
        *(int(v) for v in sums[:6]),
        *(format(v, "f") for v in sums[6:]),
    ]


def _apply_postgresql(workspace_id: int, ordered: list) -> None:
    """One statement: INSERT ... ON CONFLICT DO UPDATE, the text sums added as ``numeric``."""
    table = CostRollup._meta.db_table
    placeholders = "(" + ", ".join(["%s"] * len(_COLUMNS)) + ")"
    updates = [f"{c} = {table}.{c} + EXCLUDED.{c}" for c in _INT_SUMS]
    updates += [f"{c} = ({table}.{c}::numeric + EXCLUDED.{c}::numeric)::text" for c in _TEXT_SUMS]
    params = [value for key_hash, key, sums in ordered for value in _row(workspace_id, key_hash, key, sums)]
    sql = (
        f"INSERT INTO {table} ({', '.join(_COLUMNS)}) VALUES {', '.join([placeholders] * len(ordered))}"
        f" ON CONFLICT (workspace_id, run_day, key_hash) DO UPDATE SET {', '.join(updates)}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _apply_read_modify_write(workspace_id: int, ordered: list) -> None:
    """SQLite (one writer at a time): read the rows, add in Python (``Decimal``), write them back."""
    held = {
        (row["run_day"], row["key_hash"]): row
        for row in CostRollup.objects.filter(
            workspace_id=workspace_id, key_hash__in={key_hash for key_hash, _, _ in ordered}
        ).values("run_day", "key_hash", *_INT_SUMS, *_TEXT_SUMS)
    }
    rows = []
    for key_hash, key, sums in ordered:
        old = held.get((key[0], key_hash))
        if old is not None:
            sums = [int(old[c]) + v for c, v in zip(_INT_SUMS, sums[:6], strict=True)] + [
                Decimal(old[c]) + v for c, v in zip(_TEXT_SUMS, sums[6:], strict=True)
            ]
        rows.append(_row(workspace_id, key_hash, key, sums))
    table = CostRollup._meta.db_table
    placeholders = ", ".join(["%s"] * len(_COLUMNS))
    updates = ", ".join(f"{c} = excluded.{c}" for c in (*_INT_SUMS, *_TEXT_SUMS))
    with connection.cursor() as cursor:
        cursor.executemany(
            f"INSERT INTO {table} ({', '.join(_COLUMNS)}) VALUES ({placeholders})"
            f" ON CONFLICT (workspace_id, run_day, key_hash) DO UPDATE SET {updates}",
            rows,
        )


def count_model_calls(run: Run, events: Iterable[Mapping[str, Any]], *, sign: int = 1) -> None:
    """THE rollup hook of the append path: add the run's newly stored events (only ``model_io``
    responses count) to the cost rollups and to the run's own, in the caller's transaction."""
    deltas = _deltas(run, events, sign)
    _apply(run.workspace_id, deltas)
    apply_run_deltas({run.pk: deltas})


def call_key(key: Key) -> CallKey:
    """The labels of a workspace key that vary within one run."""
    return (key[2], key[4], key[5], key[6], key[10], key[11], key[12], key[13])


def _call_key_hash(key: CallKey) -> str:
    text = json.dumps(list(key), ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def apply_run_deltas(deltas_by_run: Mapping[int, Mapping[Key, list]], *, new_runs: bool = False) -> None:
    """Add each run's deltas to its RunCostRollup rows (created when missing; emptied rows go).
    ``new_runs``: the runs were created in this transaction, so they have no rows yet (SQLite
    then skips reading them back to add to)."""
    ordered = sorted(
        (run_pk, _call_key_hash(call_key(key)), call_key(key), sums)
        for run_pk, deltas in deltas_by_run.items()
        for key, sums in deltas.items()
    )
    if not ordered:
        return
    table = RunCostRollup._meta.db_table
    if connection.vendor == "postgresql":
        updates = [f"{c} = {table}.{c} + EXCLUDED.{c}" for c in _INT_SUMS]
        updates += [f"{c} = ({table}.{c}::numeric + EXCLUDED.{c}::numeric)::text" for c in _TEXT_SUMS]
    else:  # SQLite: read, add in Python (``Decimal``), write back
        ordered = ordered if new_runs else _added_to_stored(ordered)
        updates = [f"{c} = excluded.{c}" for c in (*_INT_SUMS, *_TEXT_SUMS)]
    placeholders = "(" + ", ".join(["%s"] * len(_RUN_COST_COLUMNS)) + ")"
    params: list[int | str] = []
    for run_pk, key_hash, key, sums in ordered:
        params += [
            run_pk,
            key_hash,
            *(_spell(label) for label in key),
            *(int(v) for v in sums[:6]),
            *(format(v, "f") for v in sums[6:]),
        ]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} ({', '.join(_RUN_COST_COLUMNS)}) VALUES {', '.join([placeholders] * len(ordered))}"
            f" ON CONFLICT (run_id, key_hash) DO UPDATE SET {', '.join(updates)}",
            params,
        )
    emptied = {run_pk for run_pk, _, _, sums in ordered if sums[0] < 0}
    if emptied:
        RunCostRollup.objects.filter(run_id__in=emptied, calls__lte=0).delete()


def _added_to_stored(ordered: list) -> list:
    held = {
        (row["run_id"], row["key_hash"]): row
        for row in RunCostRollup.objects.filter(
            run_id__in={run_pk for run_pk, _, _, _ in ordered}, key_hash__in={h for _, h, _, _ in ordered}
        ).values("run_id", "key_hash", *_INT_SUMS, *_TEXT_SUMS)
    }
    out = []
    for run_pk, key_hash, key, sums in ordered:
        old = held.get((run_pk, key_hash))
        if old is not None:
            sums = [int(old[c]) + v for c, v in zip(_INT_SUMS, sums[:6], strict=True)] + [
                Decimal(old[c]) + v for c, v in zip(_TEXT_SUMS, sums[6:], strict=True)
            ]
        out.append((run_pk, key_hash, key, sums))
    return out


def run_calls(run: Run) -> list[tuple[CallKey, list]]:
    """A run's own rollup rows: (labels, [calls, input, output, total, cached, reasoning, duration,
    cost]), in key order."""
    rows = RunCostRollup.objects.filter(run_id=run.pk).order_by("key_hash")
    out: list[tuple[CallKey, list]] = []
    for row in rows.values_list(*_RUN_COST_LABELS, *_INT_SUMS, *_TEXT_SUMS):
        labels = cast(CallKey, tuple(read_label(t) for t in row[: len(_RUN_COST_LABELS)]))
        sums = row[len(_RUN_COST_LABELS) :]
        out.append((labels, [int(v) for v in sums[:6]] + [Decimal(v) for v in sums[6:]]))
    return out


def _run_deltas(run: Run, sign: int) -> dict[Key, list]:
    """The run's workspace-rollup deltas from its own rows (what :func:`_deltas` of every stored
    response gives, without reading them)."""
    day, shard, workflow, user, tenant, plan = _run_labels(run)
    out: dict[Key, list] = {}
    for (call_day, provider, model, step, currency, pricing, pricing_label, prompt), sums in run_calls(run):
        key: Key = (day, shard, call_day, workflow, provider, model, step, user, tenant, plan, currency,
                    pricing, pricing_label, prompt)  # fmt: skip
        out[key] = [sign * value for value in sums]
    return out


def count_model_calls_many(
    calls: Iterable[tuple[Run, Iterable[Mapping[str, Any]]]], *, new_runs: bool = False
) -> None:
    """:func:`count_model_calls` for many runs at once (the batch insert of OTLP ingest, where one
    request creates a run per trace): the deltas of every run summed per key, then ONE write per
    workspace. The rows end as they would after one :func:`count_model_calls` per run.
    ``new_runs``: every run was created in this transaction (see :func:`apply_run_deltas`)."""
    by_workspace: dict[int, dict[Key, list]] = {}
    by_run: dict[int, dict[Key, list]] = {}
    for run, events in calls:
        merged = by_workspace.setdefault(run.workspace_id, {})
        by_run[run.pk] = _deltas(run, events, 1)
        for key, sums in by_run[run.pk].items():
            held = merged.get(key)
            if held is None:
                merged[key] = sums
            else:
                for i, value in enumerate(sums):
                    held[i] += value
    for workspace_id, deltas in by_workspace.items():
        _apply(workspace_id, deltas)
    apply_run_deltas(by_run, new_runs=new_runs)


_STATUS_COLUMNS = ("completed", "failed", "cancelled")


def _count_runs(workspace_id: int, counts: dict[RunKey, list[int]]) -> None:
    """Add [runs, waiting gates, completed, failed, cancelled] to the run counters (rows created
    when missing, in key order)."""
    table = RunRollup._meta.db_table
    sums = ("runs", "waiting_gates", *_STATUS_COLUMNS)
    sql = (
        f"INSERT INTO {table} (workspace_id, run_day, workflow_id, workflow_version, shard, {', '.join(sums)})"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (workspace_id, run_day, workflow_id,"
        " workflow_version, shard) DO UPDATE SET "
        + ", ".join(f"{c} = {table}.{c} + excluded.{c}" for c in sums)
    )
    rows: list[Any] = [
        (workspace_id, day, _spell(workflow), version, shard, *_padded(vector))
        for (day, workflow, version, shard), vector in sorted(counts.items())
        if any(vector)
    ]
    if not rows:
        return
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)
    if any(vector[0] < 0 for vector in counts.values()):
        RunRollup.objects.filter(workspace_id=workspace_id, runs__lte=0).delete()


def _padded(vector: list[int]) -> list[int]:
    return [*vector, *[0] * (5 - len(vector))]


def _run_key(run: Run) -> RunKey:
    return (run_day(run), run.workflow_id, run.workflow_version, run.pk % ROLLUP_SHARDS)


def waiting_gates(run: Run) -> int:
    """The gates a run waits on, as the inbox counts them (pending gates of a running run)."""
    return run.pending_gates if run.status == "running" else 0


def run_counters(run: Run) -> list[int]:
    """What one run adds to its run counter row: [1, waiting gates, completed, failed, cancelled]."""
    return [1, waiting_gates(run), *(int(run.status == status) for status in _STATUS_COLUMNS)]


# what the gate metrics read of a run's events (the Appender collects them as it appends)
GATE_EVENTS = ("human_gate_requested", "human_gate_resolved", "step_completed")

# (kind, label, reviewer, decision, bucket): a MetricRollup row's key below its run's labels
MetricKey = tuple[str, str, str, str, int]


def run_duration_ms(run: Run) -> float | None:
    """A finished run's duration in ms (None while it runs or when it has no end)."""
    if run.status == "running" or run.ended_at is None or run.started_at is None:
        return None
    return max(0.0, (run.ended_at - run.started_at).total_seconds() * 1000)


def _run_metric(run: Run) -> MetricKey | None:
    duration = run_duration_ms(run)
    return None if duration is None else ("run_latency", run.status, "", "", bucket_of(duration))


def run_marks(run: Run) -> tuple[list[int], MetricKey | None]:
    """What a run's row adds to the rollups now (taken before its projection changes)."""
    return run_counters(run), _run_metric(run)


def count_run_change(run: Run, before: tuple[list[int], MetricKey | None]) -> None:
    """A run's projection changed: move its counters (waiting gates, status) and its duration's
    bucket by what changed."""
    if run.pk is None:
        return  # a run not inserted yet: count_new_run(s) counts what it holds then
    counters, metric = run_marks(run)
    delta = [after - was for after, was in zip(counters, before[0], strict=True)]
    if any(delta):
        _count_runs(run.workspace_id, {_run_key(run): delta})
    if metric != before[1]:
        deltas: dict[MetricKey, int] = {}
        if before[1] is not None:
            deltas[before[1]] = -1
        if metric is not None:
            deltas[metric] = deltas.get(metric, 0) + 1
        _apply_metrics({run.pk: (run, deltas)}, own=False)


def count_new_run(run: Run, *, sign: int = 1) -> None:
    """A new run (or, with ``sign=-1``, one going away) in the run counters and its duration."""
    _count_runs(run.workspace_id, {_run_key(run): [sign * v for v in run_counters(run)]})
    metric = _run_metric(run)
    if metric is not None:
        _apply_metrics({run.pk: (run, {metric: sign})}, own=False)


def count_new_runs(runs: list[Run]) -> None:
    """Many new runs of one workspace (the batch insert of OTLP ingest) in one statement."""
    counts: dict[RunKey, list[int]] = {}
    metrics: dict[int, tuple[Run, dict[MetricKey, int]]] = {}
    for run in runs:
        held = counts.setdefault(_run_key(run), [0] * 5)
        for i, value in enumerate(run_counters(run)):
            held[i] += value
        metric = _run_metric(run)
        if metric is not None:
            metrics[run.pk] = (run, {metric: 1})
    if runs:
        _count_runs(runs[0].workspace_id, counts)
        _apply_metrics(metrics, own=False)


# ---- the dashboard's metrics (MetricRollup, RunMetricRollup)


def model_metrics(events: Iterable[Mapping[str, Any]], sign: int = 1) -> dict[MetricKey, int]:
    """The latency buckets of model responses (those with a ``durationMs``), by model."""
    out: dict[MetricKey, int] = {}
    for event in events:
        if event.get("type") != "model_io" or event.get("direction") != "response":
            continue
        duration = event.get("durationMs")
        if isinstance(duration, bool) or not isinstance(duration, int | float):
            continue
        key: MetricKey = ("model_latency", event.get("model") or "", "", "", bucket_of(float(duration)))
        out[key] = out.get(key, 0) + sign
    return out


def _ts(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def gate_metrics(
    run: Run, events: Iterable[tuple[Mapping[str, Any], str]], sign: int = 1, *, lookup: bool = True
) -> dict[MetricKey, int]:
    """Gate decisions (``human_gate_resolved``, with who recorded them) by step, reviewer and
    decision, and each decision's time to decision: from when the gate became decidable to the
    decision. A gate became decidable at the latest of its request (``human_gate_requested``) and,
    for a gate implied by the step's policy, the step's completion (PAUSE_AFTER) or the run's last
    step completion or decision (PAUSE_BEFORE, CHECKPOINT). ``events`` are the batch's gate
    requests, decisions and step completions in order; what came before them is read from the
    run's stored events (two index probes per decision whose start is not in the batch), unless
    ``lookup`` is False (``events`` are then all the run's: a recomputation)."""
    out: dict[MetricKey, int] = {}
    requested: dict[str, datetime] = {}
    completed: dict[str, datetime] = {}
    progress: datetime | None = None
    for event, actor in events:
        kind = event.get("type")
        step = event.get("stepId") or ""
        moment = _ts(event.get("ts"))
        if kind == "human_gate_requested":
            if moment is not None:
                requested[step] = moment
            continue
        if kind == "step_completed":
            if moment is not None:
                completed[step] = progress = moment
            continue
        if kind != "human_gate_resolved":
            continue
        key: MetricKey = ("decision", step, actor, str(event.get("decision") or ""), 0)
        out[key] = out.get(key, 0) + sign
        after = event.get("gate") == "PAUSE_AFTER"
        implied = completed.get(step) if after else progress
        starts = [t for t in (requested.get(step), implied) if t is not None]
        if implied is None and lookup:
            starts += _stored_starts(run, step, after=after)
        if moment is not None and starts:
            ms = max(0.0, (moment - max(starts)).total_seconds() * 1000)
            latency: MetricKey = ("decision_latency", step, "", "", bucket_of(ms))
            out[latency] = out.get(latency, 0) + sign
        requested.pop(step, None)
        if moment is not None:
            progress = moment
    return out


def _stored_starts(run: Run, step: str, *, after: bool) -> list[datetime]:
    """When a gate of ``step`` may have become decidable, from the run's stored events: its latest
    request, and the step's completion (``after``) or the run's latest completion or decision."""
    if run.pk is None:
        return []
    rows = Event.objects.filter(run_id=run.pk)
    found = [
        rows.filter(step_id=_spell(step), type="human_gate_requested")
        .order_by("-seq")
        .values_list("ts", flat=True)
        .first()
    ]
    if after:
        found.append(
            rows.filter(step_id=_spell(step), type="step_completed")
            .order_by("-seq")
            .values_list("ts", flat=True)
            .first()
        )
    else:
        for kind in ("step_completed", "human_gate_resolved"):
            found.append(rows.filter(type=kind).order_by("-seq").values_list("ts", flat=True).first())
    return [t for t in (_ts(text) for text in found) if t is not None]


def _metric_hash(workflow: str, shard: int, key: MetricKey) -> str:
    text = json.dumps([workflow, shard, *key], ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _own_hash(key: MetricKey) -> str:
    return _metric_hash("", 0, key)


def _apply_metrics(by_run: Mapping[Any, tuple[Run, Mapping[MetricKey, int]]], *, own: bool = True) -> None:
    """Add each run's metric deltas to its workspace's rows (and, with ``own``, to the run's own
    RunMetricRollup rows): one statement per table, rows in key order, emptied rows removed."""
    merged: dict[tuple, list] = {}
    own_rows: dict[tuple[int, str], list] = {}
    for run, deltas in by_run.values():
        day, shard, workflow, *_ = _run_labels(run)
        for key, count in deltas.items():
            if not count:
                continue
            key_hash = _metric_hash(workflow, shard, key)
            held = merged.setdefault((run.workspace_id, day, key_hash), [workflow, shard, key, 0])
            held[3] += count
            if own:
                mine = own_rows.setdefault((run.pk, _own_hash(key)), [key, 0])
                mine[1] += count
    if merged:
        table = MetricRollup._meta.db_table
        columns: tuple[str, ...] = ("workspace_id", "run_day", "key_hash", "workflow_id", "shard", "kind",
                                    "label", "reviewer", "decision", "bucket", "count")  # fmt: skip
        rows = [
            (ws, day, key_hash, _spell(workflow), shard, key[0], *(_spell(t) for t in key[1:4]), key[4], n)
            for (ws, day, key_hash), (workflow, shard, key, n) in sorted(merged.items())
        ]
        _upsert(table, columns, "workspace_id, run_day, key_hash", rows)
        if any(n < 0 for *_, n in merged.values()):
            for ws in {ws for ws, _, _ in merged}:
                MetricRollup.objects.filter(
                    workspace_id=ws, key_hash__in=[h for w, _, h in merged if w == ws], count__lte=0
                ).delete()
    if own_rows:
        table = RunMetricRollup._meta.db_table
        columns = (
            "run_id",
            "key_hash",
            "kind",
            "label",
            "reviewer",
            "decision",
            "bucket",
            "count",
        )
        rows = [
            (run_pk, key_hash, key[0], *(_spell(t) for t in key[1:4]), key[4], n)
            for (run_pk, key_hash), (key, n) in sorted(own_rows.items())
        ]
        _upsert(table, columns, "run_id, key_hash", rows)
        if any(n < 0 for _, n in own_rows.values()):
            RunMetricRollup.objects.filter(run_id__in={pk for pk, _ in own_rows}, count__lte=0).delete()


def _upsert(table: str, columns: tuple[str, ...], conflict: str, rows: list[tuple]) -> None:
    placeholders = "(" + ", ".join(["%s"] * len(columns)) + ")"
    for start in range(0, len(rows), 500):
        chunk = rows[start : start + 500]
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES {', '.join([placeholders] * len(chunk))}"
                f" ON CONFLICT ({conflict}) DO UPDATE SET count = {table}.count + excluded.count",
                [value for row in chunk for value in row],
            )


def count_metrics(run: Run, responses: Iterable[Mapping[str, Any]], gates: list[tuple[dict, str]]) -> None:
    """THE metric hook of the append path: the model latencies and gate decisions of a run's newly
    stored events, in the caller's transaction."""
    deltas = model_metrics(responses)
    if gates:
        for key, n in gate_metrics(run, gates).items():
            deltas[key] = deltas.get(key, 0) + n
    if deltas:
        _apply_metrics({run.pk: (run, deltas)})


def count_metrics_many(
    items: Iterable[tuple[Run, Iterable[Mapping[str, Any]], list[tuple[dict, str]]]],
) -> None:
    """:func:`count_metrics` for many new runs at once (OTLP's batch insert): one write per table."""
    by_run: dict[int, tuple[Run, Mapping[MetricKey, int]]] = {}
    for run, responses, gates in items:
        deltas = model_metrics(responses)
        for key, n in gate_metrics(run, gates).items():
            deltas[key] = deltas.get(key, 0) + n
        if deltas:
            by_run[run.pk] = (run, deltas)
    _apply_metrics(by_run)


def run_metrics(run: Run) -> dict[MetricKey, int]:
    """A run's own metric rows (RunMetricRollup)."""
    return {
        (kind, read_label(label), read_label(reviewer), read_label(decision), bucket): count
        for kind, label, reviewer, decision, bucket, count in RunMetricRollup.objects.filter(
            run_id=run.pk
        ).values_list("kind", "label", "reviewer", "decision", "bucket", "count")
        if count
    }


def recompute_run_metrics(run: Run) -> dict[MetricKey, int]:
    """A run's own metric rows computed from its stored events."""
    rows = (
        Event.objects.filter(run_id=run.pk, type__in=("model_io", *GATE_EVENTS))
        .order_by("seq")
        .values_list("type", "body", "actor")
    )
    responses, gates = [], []
    for kind, body, actor in rows.iterator(chunk_size=2000):
        if kind == "model_io":
            responses.append(loads(body))
        else:
            gates.append((loads(body), read_label(actor)))
    out = model_metrics(responses)
    for key, n in gate_metrics(run, gates, lookup=False).items():
        out[key] = out.get(key, 0) + n
    return {k: v for k, v in out.items() if v}


def forget_metrics(run: Run) -> None:
    """Subtract a run's model latencies and decisions (its own rows) from its workspace's rows, and
    clear its own rows."""
    deltas = {key: -count for key, count in run_metrics(run).items()}
    if deltas:
        _apply_metrics({run.pk: (run, deltas)}, own=False)
    RunMetricRollup.objects.filter(run_id=run.pk).delete()


def stored_metrics(workspace: Workspace) -> dict[tuple, int]:
    """A workspace's metric rows: {(run day, workflow, shard, kind, label, reviewer, decision,
    bucket): count}, rows that count nothing left out."""
    return {
        (
            day,
            read_label(workflow),
            shard,
            kind,
            read_label(label),
            read_label(reviewer),
            read_label(decision),
            bucket,
        ): count
        for day, workflow, shard, kind, label, reviewer, decision, bucket, count in MetricRollup.objects.filter(
            workspace=workspace
        ).values_list(
            "run_day", "workflow_id", "shard", "kind", "label", "reviewer", "decision", "bucket", "count"
        )
        if count
    }


def recompute_metrics(workspace: Workspace) -> tuple[dict[tuple, int], dict[int, dict[MetricKey, int]]]:
    """A workspace's metric rows (in :func:`stored_metrics`' shape) and each run's own, from its
    runs and their stored events."""
    out: dict[tuple, int] = {}
    own: dict[int, dict[MetricKey, int]] = {}
    for run in Run.objects.for_workspace(workspace).only(*_RUN_COLUMNS).iterator(chunk_size=2000):
        day, shard, workflow, *_ = _run_labels(run)
        mine = recompute_run_metrics(run)
        if mine:
            own[run.pk] = mine
        keys = dict(mine)
        metric = _run_metric(run)
        if metric is not None:
            keys[metric] = keys.get(metric, 0) + 1
        for key, n in keys.items():
            full = (day, workflow, shard, *key)
            out[full] = out.get(full, 0) + n
    return {k: v for k, v in out.items() if v}, own


def rebuild_metrics(workspace: Workspace) -> int:
    """Replace a workspace's metric rows (and its runs' own) by :func:`recompute_metrics`; the
    caller holds the transaction. Returns the number of workspace rows written."""
    computed, own = recompute_metrics(workspace)
    MetricRollup.objects.filter(workspace=workspace).delete()
    RunMetricRollup.objects.filter(run__workspace=workspace).delete()
    runs = {run.pk: run for run in Run.objects.for_workspace(workspace).only(*_RUN_COLUMNS)}
    by_run = {pk: (runs[pk], deltas) for pk, deltas in own.items()}
    _apply_metrics(by_run)
    durations = {
        pk: (run, {metric: 1}) for pk, run in runs.items() if (metric := _run_metric(run)) is not None
    }
    _apply_metrics(durations, own=False)
    return len(computed)


def metrics_match(workspace: Workspace) -> bool:
    computed, own = recompute_metrics(workspace)
    if stored_metrics(workspace) != computed:
        return False
    runs = Run.objects.for_workspace(workspace).only("pk")
    return all(run_metrics(run) == own.get(run.pk, {}) for run in runs)


def forget_run(run: Run) -> None:
    """Subtract a run about to be deleted: its stored responses and the run itself."""
    # the run counter first, as when a run is made: writers take rollup rows in one order
    count_new_run(run, sign=-1)
    forget_calls(run)


def forget_calls(run: Run) -> None:
    """Subtract the run's stored responses from the workspace's rollups, by its own rollup rows,
    and clear those rows (the run's events themselves may go later, in batches)."""
    _apply(run.workspace_id, _run_deltas(run, -1))
    RunCostRollup.objects.filter(run_id=run.pk).delete()
    forget_metrics(run)


def _stored_responses(run: Run) -> Iterable[dict]:
    rows = Event.objects.filter(run_id=run.pk, type="model_io").order_by("seq").values_list("body", flat=True)
    for body in rows.iterator(chunk_size=2000):
        yield loads(body)


_RUN_COLUMNS = (
    "pk",
    "workspace_id",
    "started_at",
    "ended_at",
    "subject",
    "workflow_id",
    "workflow_version",
    "status",
    "pending_gates",
)


def recompute_runs(runs: Iterable[Run]) -> tuple[dict[Key, list], dict[RunKey, list[int]]]:
    """The rollups of these runs (of one workspace) computed from scratch from their stored events
    (their model_io rows read 500 runs at a time)."""
    costs: dict[Key, list] = {}
    counts: dict[RunKey, list[int]] = {}
    batch: list[Run] = []

    def flush() -> None:
        bodies: dict[int, list[dict]] = {run.pk: [] for run in batch}
        rows = (
            Event.objects.filter(run_id__in=list(bodies), type="model_io")
            .order_by("run_id", "seq")
            .values_list("run_id", "body")
        )
        for run_pk, body in rows.iterator(chunk_size=5000):
            bodies[run_pk].append(loads(body))
        for run in batch:
            for k, sums in _deltas(run, bodies[run.pk], 1).items():
                held = costs.get(k)
                if held is None:
                    costs[k] = sums
                else:
                    for i, value in enumerate(sums):
                        held[i] += value
        batch.clear()

    for run in runs:
        held = counts.setdefault(_run_key(run), [0] * 5)
        for i, value in enumerate(run_counters(run)):
            held[i] += value
        batch.append(run)
        if len(batch) >= 500:
            flush()
    flush()
    return costs, counts


def recompute(workspace: Workspace) -> tuple[dict[Key, list], dict[RunKey, list[int]]]:
    """The rollups of a workspace computed from scratch from its runs and stored events."""
    return recompute_runs(Run.objects.for_workspace(workspace).only(*_RUN_COLUMNS).iterator(chunk_size=2000))


def write(workspace_id: int, costs: dict[Key, list], counts: dict[RunKey, list[int]]) -> None:
    """Add computed rollups to a workspace's rows (the migration's backfill and :func:`rebuild`)."""
    _apply(workspace_id, costs)
    _count_runs(workspace_id, counts)


def rebuild(workspace: Workspace) -> tuple[int, int]:
    """Replace a workspace's rollups by :func:`recompute`, in one transaction (on PostgreSQL the
    rollup tables are locked first: a writer waits, then adds its calls to the rebuilt rows).
    Returns the number of cost rows and run-counter rows written."""
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(
                    f"LOCK TABLE {CostRollup._meta.db_table}, {RunRollup._meta.db_table},"
                    f" {MetricRollup._meta.db_table} IN EXCLUSIVE MODE"
                )
        costs, counts = recompute(workspace)
        CostRollup.objects.filter(workspace=workspace).delete()
        RunRollup.objects.filter(workspace=workspace).delete()
        write(workspace.pk, costs, counts)
        runs = Run.unscoped.filter(workspace=workspace)
        RunCostRollup.objects.filter(run__in=runs).delete()
        count_runs_calls(runs.only(*_RUN_COLUMNS).order_by("pk").iterator(chunk_size=2000))
        rebuild_metrics(workspace)
    return len(costs), len(counts)


def recompute_run_calls(run: Run) -> dict[CallKey, list]:
    """A run's own rollup rows computed from its stored responses (calls that sum to nothing left out)."""
    return {call_key(key): sums for key, sums in _deltas(run, _stored_responses(run), 1).items() if sums[0]}


def count_runs_calls(runs: Iterable[Run]) -> None:
    """Write the per-run rollup rows of runs that have none yet, from their stored responses (the
    migration's backfill and :func:`rebuild`)."""
    for run in runs:
        apply_run_deltas({run.pk: _deltas(run, _stored_responses(run), 1)})


def stored_run_calls(run: Run) -> dict[CallKey, list]:
    return {labels: sums for labels, sums in run_calls(run) if sums[0]}


def stored(workspace: Workspace) -> tuple[dict[Key, list], dict[RunKey, list[int]]]:
    """A workspace's rollup rows in :func:`recompute`'s shape (rows that sum to nothing left out)."""
    costs: dict[Key, list] = {}
    for row in CostRollup.objects.filter(workspace=workspace).values_list(
        "run_day", "shard", *_LABELS, *_INT_SUMS, *_TEXT_SUMS
    ):
        labels = tuple(read_label(t) for t in row[2 : 2 + len(_LABELS)])
        sums = row[2 + len(_LABELS) :]
        costs[(row[0], row[1], *labels)] = [int(v) for v in sums[:6]] + [Decimal(v) for v in sums[6:]]
    counts = {
        (day, read_label(workflow), version, shard): list(sums)
        for day, workflow, version, shard, *sums in RunRollup.objects.filter(workspace=workspace).values_list(
            "run_day", "workflow_id", "workflow_version", "shard", "runs", "waiting_gates", *_STATUS_COLUMNS
        )
        if any(sums)
    }
    return costs, counts


def rollups_match(workspace: Workspace) -> bool:
    """Whether a workspace's rollups equal a recomputation from its events."""
    costs, counts = recompute(workspace)
    if stored(workspace) != (
        {k: v for k, v in costs.items() if v[0]},
        {k: v for k, v in counts.items() if any(v)},
    ):
        return False
    runs = Run.objects.for_workspace(workspace).only(*_RUN_COLUMNS).iterator(chunk_size=2000)
    return all(stored_run_calls(run) == recompute_run_calls(run) for run in runs) and metrics_match(workspace)


def rebuild_run_counters(workspace: Workspace) -> None:
    """Replace a workspace's run counters by those of its runs as they are now (no event read)."""
    counts: dict[RunKey, list[int]] = {}
    for run in Run.objects.for_workspace(workspace).only(*_RUN_COLUMNS).iterator(chunk_size=2000):
        held = counts.setdefault(_run_key(run), [0] * 5)
        for i, value in enumerate(run_counters(run)):
            held[i] += value
    RunRollup.objects.filter(workspace=workspace).delete()
    _count_runs(workspace.pk, counts)


def count_cloned_metrics(
    metrics: Mapping[Any, tuple[Run, Mapping[MetricKey, int]]],
    latencies: Mapping[Any, tuple[Run, Mapping[MetricKey, int]]],
) -> None:
    """The dashboard metrics of runs written by a bulk copy of other runs' rows (bench/scale_data:
    each clone holds its template's events and duration): ``metrics`` their own rows and the
    workspace's, ``latencies`` their durations' buckets (the workspace's only)."""
    _apply_metrics(metrics)
    _apply_metrics(latencies, own=False)
