"""Monitors: the time one evaluation of each metric takes over large rollup tables.

A monitor reads the rollups (CostRollup, RunRollup, MetricRollup), never the events, so its cost
grows with the rollup rows of the days it reads, not with the runs. The tables are filled directly
(bulk inserts of rows shaped as the write path keeps them): BENCH_MONITOR_DAYS days (60) x 4
shards x BENCH_MONITOR_WORKFLOWS workflows (10) x BENCH_MONITOR_MODELS models (5) cost rows, the
same days x shards x workflows run counters, and latency histograms (20 buckets of run durations
per workflow, of model latencies per model, of times to decision per gate) plus decisions: about
357,000 rollup rows at 60 days, which the fill takes minutes to write on SQLite (a year is 2.1
million metric rows: BENCH_MONITOR_DAYS=365 where there is time). The row count depends on days
x labels x shards, not on the number of runs (BENCH_MONITOR_RUNS, 1,000,000, only sets the counts
written into them), and a monitor reads only the days of its window through the rollups'
(workspace, run day) indexes. BENCH_MONITOR_WAITING runs wait at a gate (gates_waiting reads them).

At 1M runs, literally: BENCH_MONITOR_RUNS (1,000,000) finished runs are also written to the runs
table (the projection rows, spread over the days; the gates-waiting monitor reads that table, through
its partial index of waiting runs). Filling all of it takes minutes on SQLite, so the database is
built once and kept under var/bench/ (``monitors-<days>d-<workflows>w-<models>m-<runs>r.sqlite3``,
about 1 GB; delete it to rebuild); a later ``make bench`` migrates it and only evaluates. Each
evaluation reads the rollup rows of its window, so the figures stay what they are at 100,000 runs or
10 million: the rows grow with days x labels x shards, never with the runs.

Printed: the rows of each table, then per metric the median and p95 of BENCH_MONITOR_REPEAT (20)
evaluations (``evaluate_monitor``: the read, the state, the transaction), and one evaluation of
every monitor at once (the periodic job). BENCH_MONITOR_DB: a postgres:// URL (default SQLite).
Figures only; no target is asserted.
"""

from __future__ import annotations

import hashlib
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DAYS = int(os.environ.get("BENCH_MONITOR_DAYS", "60"))
WORKFLOWS = int(os.environ.get("BENCH_MONITOR_WORKFLOWS", "10"))
MODELS = int(os.environ.get("BENCH_MONITOR_MODELS", "5"))
RUNS = int(os.environ.get("BENCH_MONITOR_RUNS", "1000000"))
WAITING = int(os.environ.get("BENCH_MONITOR_WAITING", "200"))
REPEAT = int(os.environ.get("BENCH_MONITOR_REPEAT", "20"))
SHARDS = 4
BUCKETS = range(25, 45)  # 20 latency buckets (about 250 ms to 25 s)
TMP = Path(tempfile.mkdtemp(prefix="bench_monitors_"))
CACHE = ROOT / "var" / "bench" / f"monitors-{DAYS}d-{WORKFLOWS}w-{MODELS}m-{RUNS}r.sqlite3"
FILLED = CACHE.with_suffix(".filled")  # written once the fill finished (a half-built file is rebuilt)
if not os.environ.get("BENCH_MONITOR_DB"):
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    if not FILLED.exists():
        for stale in (CACHE, CACHE.with_name(CACHE.name + "-wal"), CACHE.with_name(CACHE.name + "-shm")):
            stale.unlink(missing_ok=True)
os.environ["DATABASE_URL"] = os.environ.get("BENCH_MONITOR_DB") or f"sqlite:///{CACHE}"
os.environ.setdefault("WORKBENCH_VAR_DIR", str(TMP))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
os.environ.setdefault("DEBUG", "0")
os.environ.setdefault("SECRET_KEY", "bench-monitors-not-secret-" + "x" * 40)
os.environ["WORKBENCH_TASKS_BACKEND"] = "dummy"
os.environ["WORKBENCH_TRANSCRIPTS"] = "0"

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.utils import timezone  # noqa: E402

from runs import actions  # noqa: E402
from runs.actions.monitors import do_create_monitor, evaluate_monitor, evaluate_monitors  # noqa: E402
from runs.actions.workspaces import get_or_create_workspace  # noqa: E402
from runs.models import CostRollup, MetricRollup, Monitor, Run, RunRollup  # noqa: E402

WORKFLOW = {
    "id": "wf-wait",
    "version": 1,
    "steps": [{"id": "review", "gatePolicy": "PAUSE_BEFORE"}],
    "edges": [],
}


def _hash(*parts: object) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()


def fill(workspace) -> dict[str, int]:
    today = datetime.now(UTC).date()
    per_row = max(1, RUNS // (DAYS * SHARDS * WORKFLOWS))  # runs a counter row counts
    batch: list = []

    def flush(model, force=False):
        if batch and (force or len(batch) >= 20_000):
            model.objects.bulk_create(batch)
            batch.clear()

    for d in range(DAYS):
        day = today - timedelta(days=d)
        for shard in range(SHARDS):
            for w in range(WORKFLOWS):
                workflow = f"wf-{w}"
                for m in range(MODELS):
                    batch.append(
                        CostRollup(
                            workspace=workspace, run_day=day, key_hash=_hash(day, shard, w, m), shard=shard,
                            call_day=day.isoformat(), workflow_id=workflow, provider="openai", model=f"model-{m}",
                            step_id="work", currency="USD", calls=per_row, cost=str(0.001 * per_row),
                        )
                    )  # fmt: skip
                    flush(CostRollup)
    flush(CostRollup, True)
    for d in range(DAYS):
        day = today - timedelta(days=d)
        for shard in range(SHARDS):
            for w in range(WORKFLOWS):
                batch.append(
                    RunRollup(
                        workspace=workspace, run_day=day, workflow_id=f"wf-{w}", workflow_version=1, shard=shard,
                        runs=per_row, completed=per_row - per_row // 20, failed=per_row // 20,
                    )
                )  # fmt: skip
                flush(RunRollup)
    flush(RunRollup, True)
    for d in range(DAYS):
        day = today - timedelta(days=d)
        for shard in range(SHARDS):
            for w in range(WORKFLOWS):
                labels = [("run_latency", "completed")] + [
                    ("model_latency", f"model-{m}") for m in range(MODELS)
                ]
                labels += [("decision_latency", "review")]
                for kind, label in labels:
                    for bucket in BUCKETS:
                        batch.append(
                            MetricRollup(
                                workspace=workspace, run_day=day, key_hash=_hash(day, shard, w, kind, label, bucket),
                                workflow_id=f"wf-{w}", shard=shard, kind=kind, label=label, bucket=bucket,
                                count=max(1, per_row // len(BUCKETS)),
                            )
                        )  # fmt: skip
                        flush(MetricRollup)
                for decision in ("approved", "rejected", "edited"):
                    batch.append(
                        MetricRollup(
                            workspace=workspace, run_day=day, key_hash=_hash(day, shard, w, "decision", decision),
                            workflow_id=f"wf-{w}", shard=shard, kind="decision", label="review",
                            reviewer="user:alice", decision=decision, count=per_row // 10 or 1,
                        )
                    )  # fmt: skip
                    flush(MetricRollup)
    flush(MetricRollup, True)
    return {
        "CostRollup": CostRollup.objects.count(),
        "RunRollup": RunRollup.objects.count(),
        "MetricRollup": MetricRollup.objects.count(),
    }


def _template_run(workspace) -> Run:
    started = timezone.now()
    return Run(
        workspace=workspace, run_id="run_template", workflow_id="wf-0", workflow_version=1, status="completed",
        started_at=started, ended_at=started + timedelta(seconds=2), doc="{}", state="{}", revision=4,
        last_seq=4, event_count=4, model_calls=1, total_tokens=1100, cost_totals={"USD": "0.001"},
        duration_ms=2000, cost_amount=0.001, created_by="bench", created_at=started, updated_at=started,
    )  # fmt: skip


def fill_runs(workspace) -> int:
    """RUNS finished runs, spread over the days and workflows (projection rows as the write path
    leaves them; their events are not written: no monitor reads events). On SQLite one
    INSERT ... SELECT over a counter (no Python per row); elsewhere bulk inserts."""
    if connection.vendor != "sqlite":
        return _fill_runs_bulk(workspace)
    template = _template_run(workspace)
    columns, values, params = [], [], []
    varying = {
        "run_id": "'run_' || printf('%08d', i)",
        "workflow_id": f"'wf-' || (i % {WORKFLOWS})",
        "status": "CASE WHEN i % 20 = 0 THEN 'failed' ELSE 'completed' END",
        "error_count": "CASE WHEN i % 20 = 0 THEN 1 ELSE 0 END",
        "started_at": f"strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || (i % {DAYS}) || ' days', "
        "'-' || (i % 86000 + 60) || ' seconds')",
        "ended_at": f"strftime('%Y-%m-%d %H:%M:%f', 'now', '-' || (i % {DAYS}) || ' days', "
        "'-' || (i % 86000 + 58) || ' seconds')",
    }
    for field in Run._meta.concrete_fields:
        if field.primary_key:
            continue
        columns.append(connection.ops.quote_name(field.column))
        if field.attname in varying:
            values.append(varying[field.attname])
        else:
            values.append("%s")
            params.append(field.get_db_prep_save(getattr(template, field.attname), connection))
    sql = (
        f"WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < {RUNS - 1}) "
        f"INSERT INTO {Run._meta.db_table} ({', '.join(columns)}) SELECT {', '.join(values)} FROM n"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, params)
    return Run.objects.filter(workspace=workspace).count()


def _fill_runs_bulk(workspace) -> int:
    template = _template_run(workspace)
    now = timezone.now()
    batch: list[Run] = []
    for i in range(RUNS):
        started = now - timedelta(days=i % DAYS, seconds=i % 86_000 + 60)
        batch.append(
            Run(
                **{
                    f.attname: getattr(template, f.attname)
                    for f in Run._meta.concrete_fields
                    if not f.primary_key
                },
            )
        )
        run = batch[-1]
        run.run_id, run.workflow_id = f"run_{i:08d}", f"wf-{i % WORKFLOWS}"
        run.started_at, run.ended_at = started, started + timedelta(seconds=2)
        if i % 20 == 0:
            run.status, run.error_count = "failed", 1
        if len(batch) >= 20_000:
            Run.objects.bulk_create(batch)
            batch.clear()
    Run.objects.bulk_create(batch)
    return Run.objects.filter(workspace=workspace).count()


MONITORS = [
    {"name": "cost per hour", "metric": "cost_hour", "alert": 100},
    {"name": "cost per hour, one model", "metric": "cost_hour", "alert": 100, "model": "model-1"},
    {"name": "cost per day", "metric": "cost_day", "alert": 1000},
    {"name": "run latency p95, 30 days", "metric": "latency_p95", "alert": 60, "windowDays": 30},
    {"name": "model latency p95", "metric": "latency_p95", "alert": 60, "model": "model-2", "windowDays": 7},
    {"name": "error rate, one workflow, 30 days", "metric": "error_rate", "alert": 10, "workflow": "wf-3",
     "windowDays": 30},
    {"name": "gates waiting > 0 min", "metric": "gates_waiting", "alert": 1000, "minutes": 0},
    {"name": "time to decision p95, 30 days", "metric": "decision_p95", "alert": 3600, "windowDays": 30},
    {"name": "rejection rate, 30 days", "metric": "rejection_rate", "alert": 50, "gate": "review", "windowDays": 30},
]  # fmt: skip


def main() -> None:
    call_command("migrate", verbosity=0)
    workspace = get_or_create_workspace("bench-monitors")
    started = time.perf_counter()
    cached = FILLED.exists() and not os.environ.get("BENCH_MONITOR_DB")
    if cached:
        Monitor.objects.filter(workspace=workspace).delete()  # the last run's monitors and samples
        sizes = {m.__name__: m.objects.count() for m in (CostRollup, RunRollup, MetricRollup)}
        runs = Run.objects.filter(workspace=workspace).count()
        how = f"cached in {CACHE.relative_to(ROOT)}"
    else:
        if connection.vendor == "sqlite":  # a bench file, rebuilt if the fill stops: no fsync per batch
            with connection.cursor() as cursor:
                cursor.execute("PRAGMA synchronous=OFF")
        sizes = fill(workspace)
        for i in range(WAITING):
            actions.do_start_run(workspace=workspace, workflow=WORKFLOW, run_id=f"run_wait_{i}")
        runs = fill_runs(workspace)
        how = f"filled in {time.perf_counter() - started:.1f} s"
        if not os.environ.get("BENCH_MONITOR_DB"):
            FILLED.write_text(f"{runs} runs\n")
    print(
        f"rollups: {sizes['CostRollup']:,} cost rows, {sizes['RunRollup']:,} run counter rows, "
        f"{sizes['MetricRollup']:,} metric rows ({DAYS} days x {SHARDS} shards x {WORKFLOWS} workflows x "
        f"{MODELS} models; counts of {RUNS:,} runs); runs table: {runs:,} runs, {WAITING} of them waiting "
        f"at a gate; {how} ({os.environ['DATABASE_URL'].split(':')[0]})"
    )
    monitors = [do_create_monitor(workspace=workspace, data=spec) for spec in MONITORS]
    now = timezone.now()
    evaluate_monitors(now=now - timedelta(hours=1))  # the cost-per-hour monitors' first readings
    print(f"{'metric':<40} {'median ms':>10} {'p95 ms':>10}  value")
    for monitor in monitors:
        times = []
        done = None
        for i in range(REPEAT):
            t = time.perf_counter()
            done = evaluate_monitor(monitor.pk, now=now + timedelta(seconds=i))
            times.append((time.perf_counter() - t) * 1000)
        times.sort()
        p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
        value = "no data" if done is None or done.value is None else f"{done.value:.4g}"
        print(f"{monitor.name:<40} {statistics.median(times):>10.2f} {p95:>10.2f}  {value}")
    t = time.perf_counter()
    evaluate_monitors(now=now + timedelta(minutes=5))
    print(
        f"every monitor once (the periodic job, {len(monitors)} monitors): {(time.perf_counter() - t) * 1000:.1f} ms"
    )


if __name__ == "__main__":
    main()
