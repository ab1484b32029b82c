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

Beside this module: runs.actions.rollup_metrics keeps the dashboard's metrics (MetricRollup,
RunMetricRollup) and runs.actions.rollup_labels says how a run is filed (start day, shard,
workflow and subject labels); the entry points here (:func:`count_new_run`, :func:`forget_run`,
:func:`rebuild`, :func:`rollups_match`) cover those rows too.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import date
from decimal import Decimal
from typing import Any, cast

from django.db import connection, transaction

from runs.actions import rollup_pending
from runs.actions.rollup_labels import ROLLUP_SHARDS, RUN_COLUMNS, read_label, run_day, run_labels, spell
from runs.actions.rollup_metrics import (
    MetricKey,
    apply_metrics,
    forget_metrics,
    metrics_match,
    rebuild_metrics,
    run_metric,
    run_metrics,
    write_workspace_metrics,
)
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
from runs.protocol.telemetry import (
    Number,
    derived_total_tokens,
    exact_amount,
    normalize_currency,
    pricing_source,
    prompt_label,
)
from runs.protocol.values import loads

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
    day, shard, workflow, user, tenant, plan = run_labels(run)
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


def _apply(workspace_id: int, deltas: dict[Key, list]) -> None:
    """Add the deltas to the rollup rows (created when missing), in key order (no deadlock between
    two writers that touch the same rows); inside a :func:`deferred` block, at its end."""
    if not deltas:
        return
    held = rollup_pending.pending()
    if held is not None:
        held.add_costs(workspace_id, deltas)
        return
    ordered = sorted(
        ((_key_hash(key), key, sums) for key, sums in deltas.items() if any(sums)),
        key=lambda x: (x[1][0], x[0]),
    )
    if not ordered:
        return
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
        *(spell(label) for label in key[2:]),
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
            *(spell(label) for label in key),
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
    day, shard, workflow, user, tenant, plan = run_labels(run)
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
                merged[key] = list(sums)  # a copy: the sums below must not add into this run's own
            else:
                for i, value in enumerate(sums):
                    held[i] += value
    for workspace_id, deltas in by_workspace.items():
        _apply(workspace_id, deltas)
    apply_run_deltas(by_run, new_runs=new_runs)


_STATUS_COLUMNS = ("completed", "failed", "cancelled")


def _count_runs(workspace_id: int, counts: dict[RunKey, list[int]]) -> None:
    """Add [runs, waiting gates, completed, failed, cancelled] to the run counters (rows created
    when missing, in key order); inside a :func:`deferred` block, at its end."""
    held = rollup_pending.pending()
    if held is not None:
        held.add_runs(workspace_id, {key: _padded(vector) for key, vector in counts.items()})
        return
    table = RunRollup._meta.db_table
    sums = ("runs", "waiting_gates", *_STATUS_COLUMNS)
    sql = (
        f"INSERT INTO {table} (workspace_id, run_day, workflow_id, workflow_version, shard, {', '.join(sums)})"
        " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (workspace_id, run_day, workflow_id,"
        " workflow_version, shard) DO UPDATE SET "
        + ", ".join(f"{c} = {table}.{c} + excluded.{c}" for c in sums)
    )
    rows: list[Any] = [
        (workspace_id, day, spell(workflow), version, shard, *_padded(vector))
        for (day, workflow, version, shard), vector in sorted(counts.items())
        if any(vector)
    ]
    if not rows:
        return
    with connection.cursor() as cursor:
        cursor.executemany(sql, rows)
    if any(vector[0] < 0 for vector in counts.values()):
        RunRollup.objects.filter(workspace_id=workspace_id, runs__lte=0).delete()


@contextmanager
def deferred() -> Iterator[None]:
    """``transaction.atomic()`` whose workspace rollup increments (run counters, calls, metrics) are
    summed per key and written at the block's end, one statement per table in one order, so the
    shared rows stay locked only from there to the commit (runs.actions.rollup_pending says why
    and what is held). An exception writes nothing of them: the block rolls back as a whole. A
    deferred block directly inside another (its savepoint) hands its increments to the outer one
    once it succeeded: the rows are written once, at the outer block's end."""
    outer = rollup_pending.pending()
    with transaction.atomic():
        held, hidden = rollup_pending.enter()
        try:
            yield
        finally:
            rollup_pending.leave(hidden)
        if outer is None:
            for workspace_id, counts in sorted(held.runs.items()):
                _count_runs(workspace_id, counts)
            for workspace_id, deltas in sorted(held.costs.items()):
                _apply(workspace_id, deltas)
            write_workspace_metrics(held.metrics)
    if outer is not None:  # our savepoint released: what we held is the outer block's now
        outer.merge(held)


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


def run_marks(run: Run) -> tuple[list[int], MetricKey | None]:
    """What a run's row adds to the rollups now (taken before its projection changes)."""
    return run_counters(run), run_metric(run)


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
        apply_metrics({run.pk: (run, deltas)}, own=False)


def count_new_run(run: Run, *, sign: int = 1) -> None:
    """A new run (or, with ``sign=-1``, one going away) in the run counters and its duration."""
    _count_runs(run.workspace_id, {_run_key(run): [sign * v for v in run_counters(run)]})
    metric = run_metric(run)
    if metric is not None:
        apply_metrics({run.pk: (run, {metric: sign})}, own=False)


def count_new_runs(runs: list[Run]) -> None:
    """Many new runs of one workspace (the batch insert of OTLP ingest) in one statement."""
    counts: dict[RunKey, list[int]] = {}
    metrics: dict[int, tuple[Run, dict[MetricKey, int]]] = {}
    for run in runs:
        held = counts.setdefault(_run_key(run), [0] * 5)
        for i, value in enumerate(run_counters(run)):
            held[i] += value
        metric = run_metric(run)
        if metric is not None:
            metrics[run.pk] = (run, {metric: 1})
    if runs:
        _count_runs(runs[0].workspace_id, counts)
        apply_metrics(metrics, own=False)


def forget_run(run: Run) -> None:
    """Subtract a run about to be deleted: its stored responses and the run itself."""
    # the run counter first, as when a run is made: writers take rollup rows in one order
    count_new_run(run, sign=-1)
    forget_calls(run)


def forget_runs(runs: list[Run]) -> None:
    """:func:`forget_run` for many runs at once (retention's partition drops): each workspace's
    run counters, calls and metrics summed over its runs, then one write per rollup table and
    workspace, and the runs' own rollup rows cleared in one statement per table. The rows end as
    after one :func:`forget_run` per run (the run counters first, as there)."""
    by_workspace: dict[int, list[Run]] = {}
    for run in runs:
        by_workspace.setdefault(run.workspace_id, []).append(run)
    for workspace_id, group in sorted(by_workspace.items()):
        counts: dict[RunKey, list[int]] = {}
        calls: dict[Key, list] = {}
        metrics: dict[int, tuple[Run, dict[MetricKey, int]]] = {}
        for run in group:
            held = counts.setdefault(_run_key(run), [0] * 5)
            for i, value in enumerate(run_counters(run)):
                held[i] -= value
            for key, sums in _run_deltas(run, -1).items():
                if key in calls:
                    calls[key] = [a + b for a, b in zip(calls[key], sums, strict=True)]
                else:
                    calls[key] = sums
            deltas = {key: -count for key, count in run_metrics(run).items()}
            metric = run_metric(run)
            if metric is not None:
                deltas[metric] = deltas.get(metric, 0) - 1
            if deltas:
                metrics[run.pk] = (run, deltas)
        _count_runs(workspace_id, counts)
        _apply(workspace_id, calls)
        apply_metrics(metrics, own=False)
    keys = [run.pk for run in runs]
    RunCostRollup.objects.filter(run_id__in=keys).delete()
    RunMetricRollup.objects.filter(run_id__in=keys).delete()


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
    return recompute_runs(Run.objects.for_workspace(workspace).only(*RUN_COLUMNS).iterator(chunk_size=2000))


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
        count_runs_calls(runs.only(*RUN_COLUMNS).order_by("pk").iterator(chunk_size=2000))
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
    runs = Run.objects.for_workspace(workspace).only(*RUN_COLUMNS).iterator(chunk_size=2000)
    return all(stored_run_calls(run) == recompute_run_calls(run) for run in runs) and metrics_match(workspace)


def rebuild_run_counters(workspace: Workspace) -> None:
    """Replace a workspace's run counters by those of its runs as they are now (no event read)."""
    counts: dict[RunKey, list[int]] = {}
    for run in Run.objects.for_workspace(workspace).only(*RUN_COLUMNS).iterator(chunk_size=2000):
        held = counts.setdefault(_run_key(run), [0] * 5)
        for i, value in enumerate(run_counters(run)):
            held[i] += value
    RunRollup.objects.filter(workspace=workspace).delete()
    _count_runs(workspace.pk, counts)
