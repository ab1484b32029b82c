"""The dashboard's metrics kept on the write path (runs.models.MetricRollup, RunMetricRollup): model
response latencies, gate decisions and their time to decision, and finished runs' durations, in
histogram buckets per workspace x run start day x workflow x shard (and per run, for the run's own
rows), in the same transaction as the events they come from.

:func:`count_metrics` is the append path's hook (``Appender.save``, runs.actions.core);
runs.actions.rollups moves a run's duration bucket with its counters (:func:`apply_metrics`),
subtracts a deleted run (:func:`forget_metrics`), and rebuilds and checks these rows with the cost
rollups (:func:`rebuild_metrics`, :func:`metrics_match`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from django.db import connection

from runs.actions import rollup_pending
from runs.actions.rollup_labels import RUN_COLUMNS, read_label, run_labels, spell
from runs.models import Event, MetricRollup, Run, RunMetricRollup, Workspace
from runs.presenters.histogram import bucket_of
from runs.protocol.values import loads

# what the gate metrics read of a run's events (the Appender collects them as it appends)
GATE_EVENTS = ("human_gate_requested", "human_gate_resolved", "step_completed")

# (kind, label, reviewer, decision, bucket): a MetricRollup row's key below its run's labels
MetricKey = tuple[str, str, str, str, int]


def run_duration_ms(run: Run) -> float | None:
    """A finished run's duration in ms (None while it runs or when it has no end)."""
    if run.status == "running" or run.ended_at is None or run.started_at is None:
        return None
    return max(0.0, (run.ended_at - run.started_at).total_seconds() * 1000)


def run_metric(run: Run) -> MetricKey | None:
    duration = run_duration_ms(run)
    return None if duration is None else ("run_latency", run.status, "", "", bucket_of(duration))


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
    run: Run,
    events: Iterable[tuple[Mapping[str, Any], str]],
    sign: int = 1,
    *,
    lookup: bool = True,
    before: int | None = None,
) -> dict[MetricKey, int]:
    """Gate decisions (``human_gate_resolved``, with who recorded them) by step, reviewer and
    decision, and each decision's time to decision: from when the gate became decidable to the
    decision. A gate became decidable at the latest of its request (``human_gate_requested``) and,
    for a gate implied by the step's policy, the step's completion (PAUSE_AFTER) or the run's last
    step completion or decision (PAUSE_BEFORE, CHECKPOINT). ``events`` are the batch's gate
    requests, decisions and step completions in order; what came before them is read from the
    run's stored events (two index probes per decision whose start is not in the batch), unless
    ``lookup`` is False (``events`` are then all the run's: a recomputation). ``before``: the
    batch's first seq, when its events are already stored (the lookup must not find the batch's
    own decision as the start of that decision: a recomputation never does)."""
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
            starts += _stored_starts(run, step, after=after, before=before)
        if moment is not None and starts:
            ms = max(0.0, (moment - max(starts)).total_seconds() * 1000)
            latency: MetricKey = ("decision_latency", step, "", "", bucket_of(ms))
            out[latency] = out.get(latency, 0) + sign
        requested.pop(step, None)
        if moment is not None:
            progress = moment
    return out


def _stored_starts(run: Run, step: str, *, after: bool, before: int | None = None) -> list[datetime]:
    """When a gate of ``step`` may have become decidable, from the run's stored events: its latest
    request, and the step's completion (``after``) or the run's latest completion or decision."""
    if run.pk is None:
        return []
    rows = Event.objects.filter(run_id=run.pk)
    if before is not None:
        rows = rows.filter(seq__lt=before)
    found = [
        rows.filter(step_id=spell(step), type="human_gate_requested")
        .order_by("-seq")
        .values_list("ts", flat=True)
        .first()
    ]
    if after:
        found.append(
            rows.filter(step_id=spell(step), type="step_completed")
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


def apply_metrics(by_run: Mapping[Any, tuple[Run, Mapping[MetricKey, int]]], *, own: bool = True) -> None:
    """Add each run's metric deltas to its workspace's rows (and, with ``own``, to the run's own
    RunMetricRollup rows): one statement per table, rows in key order, emptied rows removed."""
    merged: dict[tuple, list] = {}
    own_rows: dict[tuple[int, str], list] = {}
    for run, deltas in by_run.values():
        day, shard, workflow, *_ = run_labels(run)
        for key, count in deltas.items():
            if not count:
                continue
            key_hash = _metric_hash(workflow, shard, key)
            held = merged.setdefault((run.workspace_id, day, key_hash), [workflow, shard, key, 0])
            held[3] += count
            if own:
                mine = own_rows.setdefault((run.pk, _own_hash(key)), [key, 0])
                mine[1] += count
    deferred = rollup_pending.pending()
    if deferred is not None:  # inside runs.actions.rollups.deferred: written at the block's end
        deferred.add_metrics(merged)
    else:
        write_workspace_metrics(merged)
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
            (run_pk, key_hash, key[0], *(spell(t) for t in key[1:4]), key[4], n)
            for (run_pk, key_hash), (key, n) in sorted(own_rows.items())
        ]
        _upsert(table, columns, "run_id, key_hash", rows)
        if any(n < 0 for _, n in own_rows.values()):
            RunMetricRollup.objects.filter(run_id__in={pk for pk, _ in own_rows}, count__lte=0).delete()


def write_workspace_metrics(merged: Mapping[tuple, list]) -> None:
    """Add ``{(workspace, run day, key hash): [workflow, shard, key, count]}`` to MetricRollup: one
    statement, rows in key order, emptied rows removed."""
    if not merged:
        return
    table = MetricRollup._meta.db_table
    columns: tuple[str, ...] = ("workspace_id", "run_day", "key_hash", "workflow_id", "shard", "kind",
                                "label", "reviewer", "decision", "bucket", "count")  # fmt: skip
    rows = [
        (ws, day, key_hash, spell(workflow), shard, key[0], *(spell(t) for t in key[1:4]), key[4], n)
        for (ws, day, key_hash), (workflow, shard, key, n) in sorted(merged.items())
        if n  # (increments of one deferred block may sum to nothing)
    ]
    _upsert(table, columns, "workspace_id, run_day, key_hash", rows)
    if any(n < 0 for *_, n in merged.values()):
        for ws in {ws for ws, _, _ in merged}:
            MetricRollup.objects.filter(
                workspace_id=ws, key_hash__in=[h for w, _, h in merged if w == ws], count__lte=0
            ).delete()


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


def count_metrics(
    run: Run,
    responses: Iterable[Mapping[str, Any]],
    gates: list[tuple[dict, str]],
    *,
    before: int | None = None,
) -> None:
    """THE metric hook of the append path: the model latencies and gate decisions of a run's newly
    stored events, in the caller's transaction."""
    deltas = model_metrics(responses)
    if gates:
        for key, n in gate_metrics(run, gates, before=before).items():
            deltas[key] = deltas.get(key, 0) + n
    if deltas:
        apply_metrics({run.pk: (run, deltas)})


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
    apply_metrics(by_run)


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
        apply_metrics({run.pk: (run, deltas)}, own=False)
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
    for run in Run.objects.for_workspace(workspace).only(*RUN_COLUMNS).iterator(chunk_size=2000):
        day, shard, workflow, *_ = run_labels(run)
        mine = recompute_run_metrics(run)
        if mine:
            own[run.pk] = mine
        keys = dict(mine)
        metric = run_metric(run)
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
    runs = {run.pk: run for run in Run.objects.for_workspace(workspace).only(*RUN_COLUMNS)}
    by_run = {pk: (runs[pk], deltas) for pk, deltas in own.items()}
    apply_metrics(by_run)
    durations = {
        pk: (run, {metric: 1}) for pk, run in runs.items() if (metric := run_metric(run)) is not None
    }
    apply_metrics(durations, own=False)
    return len(computed)


def metrics_match(workspace: Workspace) -> bool:
    computed, own = recompute_metrics(workspace)
    if stored_metrics(workspace) != computed:
        return False
    runs = Run.objects.for_workspace(workspace).only("pk")
    return all(run_metrics(run) == own.get(run.pk, {}) for run in runs)


def count_cloned_metrics(
    metrics: Mapping[Any, tuple[Run, Mapping[MetricKey, int]]],
    latencies: Mapping[Any, tuple[Run, Mapping[MetricKey, int]]],
) -> None:
    """The dashboard metrics of runs written by a bulk copy of other runs' rows (bench/scale_data:
    each clone holds its template's events and duration): ``metrics`` their own rows and the
    workspace's, ``latencies`` their durations' buckets (the workspace's only)."""
    apply_metrics(metrics)
    apply_metrics(latencies, own=False)
