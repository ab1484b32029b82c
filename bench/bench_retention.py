"""Retention on a large event table, on both databases (issue 53): PostgreSQL drops whole event
partitions (runs.actions.partitions), SQLite purges in bounded batches (runs.actions.retention).

The data: runs of 1,000 events (a generated bundle's trace, imported once through the actions, then
cloned with ``INSERT ... SELECT`` on the server, a chunk of runs per transaction) over four months
(ended 120, 90, 60 and 30 days ago); on PostgreSQL each month's runs get keys in a range of their
own (the monthly step of ``partitions.ensure_partitions``). The prune deletes what ended more than
75 days ago: the two oldest months, half the events. Built once and cached under var/bench/ (the
SQLite file, or a PostgreSQL template database whose COMMENT says what it holds); every measure
runs on a fresh copy (the prune destroys it).

Printed per database: the prune's wall time and its peak RSS (a process of its own running
``do_prune_runs``, as ``manage.py prune_runs`` does; target under 200 MB), what it deleted, and
the latency seen beside it by a writer (``do_append_events``, 10 events a batch, another run) and
a page reader (the first 100 events of a kept run and the workspace's first runs page), before and
during the prune (p50 / p99 / max: the max is the longest wait on a lock).

    .venv/bin/python bench/bench_retention.py                      # both databases
    BENCH_RETENTION_EVENTS=10000000 .venv/bin/python bench/bench_retention.py
    .venv/bin/python bench/bench_retention.py --db sqlite

Size: BENCH_RETENTION_EVENTS (default: 10,000,000 when that build is cached, else 1,000,000),
BENCH_RETENTION_PER_RUN events a run (default 1,000).
PostgreSQL: BENCH_PG_URL's server (default postgres://postgres@127.0.0.1:5432/...).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VAR = ROOT / "var" / "bench"
PER_RUN = int(os.environ.get("BENCH_RETENTION_PER_RUN", 1000))  # events a run
MONTHS = (120, 90, 60, 30)  # days since each month's runs ended
CUTOFF_DAYS = 75
CHUNK_EVENTS = 500_000  # events cloned per transaction
PG_SERVER = os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432/workbench_bench").rsplit(
    "/", 1
)[0]


def log(text: str) -> None:
    print(text, flush=True)


def size() -> int:
    if os.environ.get("BENCH_RETENTION_EVENTS"):
        return int(os.environ["BENCH_RETENTION_EVENTS"])
    return 10_000_000 if (VAR / f"retention-10000000x{PER_RUN}-sqlite.json").exists() else 1_000_000


def urls(db: str, events: int) -> tuple[str, str]:
    """(the cache's URL, the working copy's URL)."""
    if db == "sqlite":
        return (
            f"sqlite:///{VAR}/retention-{tag(events)}.sqlite3",
            f"sqlite:///{VAR}/retention-{tag(events)}-work.sqlite3",
        )
    return f"{PG_SERVER}/bench_retention_{tag(events)}", f"{PG_SERVER}/bench_retention_{tag(events)}_work"


def tag(events: int) -> str:
    return f"{events}x{PER_RUN}"


def _admin():
    import psycopg

    return psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True)


def cached(db: str, events: int) -> bool:
    record = VAR / f"retention-{tag(events)}-{db}.json"
    if not record.exists():
        return False
    if db == "sqlite":
        return Path(urls(db, events)[0].removeprefix("sqlite:///")).exists()
    with _admin() as conn:
        return bool(
            conn.execute(
                "SELECT 1 FROM pg_database WHERE datname = %s", [f"bench_retention_{tag(events)}"]
            ).fetchone()
        )


def fresh_copy(db: str, events: int) -> None:
    cache, work = urls(db, events)
    if db == "sqlite":
        src, dst = Path(cache.removeprefix("sqlite:///")), Path(work.removeprefix("sqlite:///"))
        for suffix in ("-wal", "-shm"):
            Path(f"{dst}{suffix}").unlink(missing_ok=True)
        shutil.copyfile(src, dst)
        return
    with _admin() as conn:
        conn.execute(f"DROP DATABASE IF EXISTS bench_retention_{tag(events)}_work WITH (FORCE)")
        conn.execute(
            f"CREATE DATABASE bench_retention_{tag(events)}_work TEMPLATE bench_retention_{tag(events)}"
        )


# ------------------------------------------------------------------ in a process set up on one URL


def setup(url: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "bench"))
    import django

    django.setup()


def build(db: str, events: int) -> None:
    """--build DB N: migrate the cache's database, import the template run, clone it."""
    import orjson
    from django.core.management import call_command
    from django.db import connection, transaction
    from gen_bundle import build_bundle

    from runs.actions import partitions
    from runs.actions.bigimport import do_import_bundle_file
    from runs.actions.workspaces import get_or_create_workspace
    from runs.models import Event, Run
    from runs.protocol.canonical import _prepare

    call_command("migrate", verbosity=0)
    path = VAR / "retention-template.json"
    path.write_bytes(orjson.dumps(_prepare(build_bundle(PER_RUN, seed=3))))
    template = do_import_bundle_file(
        workspace=get_or_create_workspace("ret-template"), path=path, actor="bench"
    )
    assert Event.objects.filter(run=template).count() == PER_RUN
    now = datetime.now(UTC)
    # made long ago (it goes with the first month): the first month's range is not this month's
    Run.unscoped.filter(pk=template.pk).update(created_at=now - timedelta(days=200))
    ws = get_or_create_workspace("ret")
    columns = [f.column for f in Run._meta.concrete_fields if f.column not in ("id",)]
    event_columns = [f.column for f in Event._meta.concrete_fields if f.column not in ("run_id",)]
    per_month = events // PER_RUN // len(MONTHS)
    started = time.perf_counter()
    for month, days in enumerate(MONTHS):
        ended = now - timedelta(days=days)
        chunk_runs = max(1, CHUNK_EVENTS // PER_RUN)
        for first in range(0, per_month, chunk_runs):
            count = min(chunk_runs, per_month - first)
            values = {
                "workspace_id": "%s",
                "run_id": f"'run_m{month}_' || (g + {first})",
                "started_at": "%s",
                "ended_at": "%s",
                "created_at": "%s",
                "updated_at": "%s",
            }
            select = ", ".join(values.get(col, f"t.{col}") for col in columns)
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SELECT COALESCE(MAX(id), 0) FROM runs_run")
                (top,) = cursor.fetchone()
                series = (
                    "generate_series(1, %s) g"
                    if connection.vendor == "postgresql"
                    else "(WITH RECURSIVE s(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM s WHERE g < %s) SELECT g FROM s)"
                )
                cursor.execute(
                    f"INSERT INTO runs_run ({', '.join(columns)}) SELECT {select} FROM runs_run t, {series}"
                    " WHERE t.id = %s ORDER BY g",
                    [ws.pk, ended - timedelta(hours=1), ended, ended, ended, count, template.pk],
                )
                cursor.execute(
                    f"INSERT INTO runs_event (run_id, {', '.join(event_columns)})"
                    f" SELECT r.id, {', '.join('e.' + c for c in event_columns)} FROM runs_run r, runs_event e"
                    " WHERE r.id > %s AND r.workspace_id = %s AND e.run_id = %s",
                    [top, ws.pk, template.pk],
                )
            done = month * per_month + first + count
            if done % (chunk_runs * 4) == 0 or first + count == per_month:
                rate = done * PER_RUN / (time.perf_counter() - started)
                log(f"  built {done * PER_RUN:,} events ({rate:,.0f} events/s)")
        partitions.ensure_partitions()  # PostgreSQL: the next month's runs in a range of their own
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def prune_main(cutoff: str) -> None:
    """--prune: what ``manage.py prune_runs`` runs, in a process of its own (its peak RSS)."""
    from runs.actions.retention import do_prune_runs

    started = time.perf_counter()
    report = do_prune_runs(before=datetime.fromisoformat(cutoff))
    print(
        json.dumps(
            {
                "seconds": time.perf_counter() - started,
                "runs": report.runs,
                "events": report.events,
                "transactions": report.transactions,
                "longest_ms": report.longest_transaction_ms,
                "longest_step": report.longest_step,
                "partitions": len(report.partitions_dropped),
                "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }
        )
    )


class Probe(threading.Thread):
    """A loop timing one operation until stopped: (start, ms) per call."""

    def __init__(self, name: str, operation) -> None:
        super().__init__(name=name, daemon=True)
        self.operation, self.rows, self.stop = operation, [], threading.Event()

    def run(self) -> None:
        from django.db import connection

        n = 0
        while not self.stop.is_set():
            t0 = time.perf_counter()
            self.operation(n)
            self.rows.append((t0, (time.perf_counter() - t0) * 1000))
            n += 1
            time.sleep(0.02)
        connection.close()

    def window(self, lo: float, hi: float) -> str:
        got = sorted(ms for t, ms in self.rows if lo <= t < hi or lo <= t + ms / 1000 < hi)
        if not got:
            return "none"
        p99 = got[min(len(got) - 1, round(0.99 * (len(got) - 1)))]
        return f"{len(got):6} calls, p50 {statistics.median(got):7.1f}, p99 {p99:7.1f}, max {got[-1]:8.1f} ms"


def measure_main(db: str, events: int) -> int:
    """--measure DB N: on the working copy, the prune in a child process, the probes beside it."""
    from runs import actions
    from runs.actions.workspaces import get_or_create_workspace
    from runs.models import Event, Run
    from runs.protocol.values import now_iso

    ws = get_or_create_workspace("ret")
    kept = Run.unscoped.filter(workspace=ws, run_id__startswith="run_m3_").order_by("pk").first()
    writer_ws = get_or_create_workspace("ret-writer")
    workflow = {"id": "wf-w", "version": 1, "steps": [{"id": "a", "gatePolicy": "AUTO"}], "edges": []}
    actions.do_start_run(workspace=writer_ws, workflow=workflow, run_id="run_writer", actor="bench")

    def write(n: int) -> None:
        batch = [
            {
                "id": f"w_{n}_{k}",
                "runId": "run_writer",
                "ts": now_iso(),
                "type": "annotation",
                "text": f"w {n}",
            }
            for k in range(10)
        ]
        actions.do_append_events(workspace=writer_ws, run_id="run_writer", events=batch, actor="bench")

    def read(n: int) -> None:
        list(Event.objects.filter(run_id=kept.pk).order_by("seq")[:100])
        list(Run.objects.filter(workspace=ws).order_by("-started_at", "-id")[:50])

    probes = [Probe("writer", write), Probe("reader", read)]
    for probe in probes:
        probe.start()
    time.sleep(3)
    cutoff = (datetime.now(UTC) - timedelta(days=CUTOFF_DAYS)).isoformat()
    t0 = time.perf_counter()
    child = subprocess.run(
        [sys.executable, __file__, "--prune", os.environ["DATABASE_URL"], cutoff],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    t1 = time.perf_counter()
    time.sleep(2)
    for probe in probes:
        probe.stop.set()
        probe.join()
    if child.returncode:
        log(child.stdout + child.stderr)
        return 1
    got = json.loads(child.stdout.strip().splitlines()[-1])
    left = Event.objects.count()
    rss = "ok" if got["rss_mb"] < 200 else "MISSED"
    log(
        f"  prune: {got['seconds']:.1f} s wall ({t1 - t0:.1f} s with the process start), peak RSS"
        f" {got['rss_mb']:.0f} MB ({rss}: < 200 MB); {got['runs']:,} runs, {got['events']:,} events deleted,"
        f" {got['partitions']} partition(s) dropped, {got['transactions']:,} transactions, the longest"
        f" {got['longest_ms']:.0f} ms ({got['longest_step']}); {left:,} events left"
    )
    for probe in probes:
        log(f"  {probe.name:6} before: {probe.window(0, t0)}")
        log(f"  {probe.name:6} during: {probe.window(t0, t1)}")
    log(
        f"headline: {db} retention of {got['events']:,} of {events:,} events: {got['seconds']:.1f} s,"
        f" {got['rss_mb']:.0f} MB; writer max {max((ms for t, ms in probes[0].rows if t0 <= t < t1), default=0):.0f} ms,"
        f" reader max {max((ms for t, ms in probes[1].rows if t0 <= t < t1), default=0):.0f} ms"
    )
    return 0


# ------------------------------------------------------------------ the driver


def one(db: str, events: int) -> int:
    cache, work = urls(db, events)
    VAR.mkdir(parents=True, exist_ok=True)
    record = VAR / f"retention-{tag(events)}-{db}.json"
    if not cached(db, events):
        log(f"{db}: building {events:,} events (once; cached under var/bench/)")
        if db == "sqlite":
            Path(cache.removeprefix("sqlite:///")).unlink(missing_ok=True)
        else:
            with _admin() as conn:
                conn.execute(f"DROP DATABASE IF EXISTS bench_retention_{tag(events)} WITH (FORCE)")
                conn.execute(f"CREATE DATABASE bench_retention_{tag(events)}")
        t0 = time.perf_counter()
        subprocess.run([sys.executable, __file__, "--build", cache, db, str(events)], cwd=ROOT, check=True)
        record.write_text(json.dumps({"events": events, "built": datetime.now(UTC).isoformat()}))
        log(f"{db}: built in {time.perf_counter() - t0:.0f} s")
    t0 = time.perf_counter()
    fresh_copy(db, events)
    log(
        f"{db}: {events:,} events, working copy made in {time.perf_counter() - t0:.1f} s; load {os.getloadavg()[0]:.2f}"
    )
    code = subprocess.run([sys.executable, __file__, "--measure", work, db, str(events)], cwd=ROOT).returncode
    if db == "sqlite":  # the working copy is spent (the cache stays)
        for suffix in ("", "-wal", "-shm"):
            Path(work.removeprefix("sqlite:///") + suffix).unlink(missing_ok=True)
    else:
        with _admin() as conn:
            conn.execute(f"DROP DATABASE IF EXISTS bench_retention_{tag(events)}_work WITH (FORCE)")
    return code


def main(argv: list[str]) -> int:
    if argv[:1] == ["--build"]:
        setup(argv[1])
        build(argv[2], int(argv[3]))
        return 0
    if argv[:1] == ["--prune"]:
        setup(argv[1])
        prune_main(argv[2])
        return 0
    if argv[:1] == ["--measure"]:
        setup(argv[1])
        return measure_main(argv[2], int(argv[3]))
    dbs = ["postgres", "sqlite"]
    if "--db" in argv:
        dbs = [argv[argv.index("--db") + 1]]
    events = size()
    log(
        f"retention: {events:,} events ({PER_RUN} a run, four months), prune of what ended > {CUTOFF_DAYS} days ago"
    )
    return max(one(db, events) for db in dbs)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
