"""One run of ten million events on PostgreSQL (issue 29): server time of its pages, and retention.

The run (bench/bigrun_data.py): a head and a tail through the actions (steps ingest -> work ->
review, artifacts, a root span, the run left waiting at the review gate) around BLOCKS blocks of 100
events (16 child spans, each with a priced model call of request, stream chunk and response, a tool
call; an annotation, a non-fatal error, stream chunks): ``BLOCKS * 100`` events. Built once with
``INSERT ... SELECT`` from a template block made through the actions, then one pass doing what the
append path does beside the rows (fold, snapshots, cost rollups); the secondary indexes of
runs_event are dropped during the copy and made again after it (scale_data.bulk_load).

Equivalence, at build time: a run of CHECK_BLOCKS blocks made through the actions and the same run
copied store equal rows (run row, events byte for byte, snapshots, artifact versions, rollups),
export byte-identical bundles that verify, and the copy's projection is the fold of its events
(bigrun_data.compare; tests/storage/test_bigrun_build.py runs the same check in `make test`).
After the big build, the big run's projection is compared with the fold of its events (a full
pass: ``--verify`` runs it again on a cached build).

Modes (default: measure the pages):

- pages: median and p95 server time (in-process Django test client) of the run page, timeline
  pages (first, middle, last), the run ledger, the span tree (roots, children of the root span,
  failed spans) and the JSON API's event pages (first, middle, last), REPEAT requests each;
- ``--retention``: DESTROYS the cached run: cancels it and runs ``manage.py prune_runs``'s action
  (runs.actions.retention.do_prune_runs) on it while a writer process appends batches of 10 events
  to another run; prints the total time, the longest transaction and the writer's append latency
  (p50/p99/max) before and during the purge. The cache is invalidated (the next run builds again).
- ``--partition``: the alternative to batched deletes, in scratch tables of the bench database
  (the product's tables are not touched): a copy of runs_event partitioned by range of run_id
  (the run's key, in creation order, so a range is a period of runs), the big run's 10M events
  in one partition; prints DETACH PARTITION + DROP TABLE time while the writer appends to another
  partition, and the cost of an append of 10 events into the partitioned table vs the plain one.

Size: ``--blocks N`` or BENCH_BIGRUN_BLOCKS; without either, the acceptance size (100,000 blocks:
10,000,010 events) when its build is cached, else 1,000 blocks (100,010 events) with a note of how
to build the 10M run. Database BENCH_BIGRUN_DB (default
postgres://postgres@127.0.0.1:5432/workbench_bench_bigrun, suffixed _<blocks> for sizes other
than the acceptance one); cache record var/bench/bench_bigrun-<blocks>.json (and the database's
COMMENT). BENCH_BIGRUN_REPEAT (default 15), BENCH_BIGRUN_REBUILD=1.

    .venv/bin/python bench/bench_bigrun.py --blocks 100000      # build (once) and measure pages
    .venv/bin/python bench/bench_bigrun.py --partition
    .venv/bin/python bench/bench_bigrun.py --retention           # last: deletes the run
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from pg_cache import admin, db_record

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

ACCEPTANCE = 100_000  # blocks: 10,000,000 events + head and tail
FALLBACK = 1_000
CHECK_BLOCKS = 25
REPEAT = int(os.environ.get("BENCH_BIGRUN_REPEAT", "15"))
RECIPE = 1
BASE_DB = os.environ.get("BENCH_BIGRUN_DB", "postgres://postgres@127.0.0.1:5432/workbench_bench_bigrun")
WRITER = "--writer" in sys.argv


def _cache_file(blocks: int) -> Path:
    return ROOT / "var" / "bench" / f"bench_bigrun-{blocks}.json"


def _db_url(blocks: int) -> str:
    return BASE_DB if blocks == ACCEPTANCE else f"{BASE_DB}_{blocks}"


def _size() -> int:
    args = sys.argv[1:]
    if "--blocks" in args:
        return int(args[args.index("--blocks") + 1].replace("_", "").replace(",", ""))
    if os.environ.get("BENCH_BIGRUN_BLOCKS"):
        return int(os.environ["BENCH_BIGRUN_BLOCKS"])
    if _cache_file(ACCEPTANCE).exists() or db_record(_db_url(ACCEPTANCE)):
        return ACCEPTANCE
    if not WRITER:
        print(
            f"bench_bigrun: the 10M-event run ({ACCEPTANCE:,} blocks) is not built; measuring {FALLBACK:,}"
            " blocks. Build it once (about 20 min on 2 cores, ~7 GB of PostgreSQL and 4 GB of transcript):"
            f" .venv/bin/python bench/bench_bigrun.py --blocks {ACCEPTANCE}",
            flush=True,
        )
    return FALLBACK


BLOCKS = _size()
DB_URL = _db_url(BLOCKS)
CACHE = _cache_file(BLOCKS)
# the var dir (transcript files) is kept with the database: a run's transcript is part of what
# its appends write, and a fresh var dir would make the next append catch up ten million lines
VAR = ROOT / "var" / "bench" / f"bigrun-{BLOCKS}-var"
os.environ["DATABASE_URL"] = DB_URL
os.environ.setdefault("WORKBENCH_VAR_DIR", str(VAR))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
os.environ.setdefault("DEBUG", "0")
os.environ.setdefault("SECURE_SSL_REDIRECT", "0")
os.environ.setdefault("SECRET_KEY", "bench-bigrun-not-secret-" + "abcdefghij" * 4)
os.environ.setdefault("ALLOWED_HOSTS", "testserver")


def _wanted() -> dict:
    return {"recipe": RECIPE, "blocks": BLOCKS}


def _cached() -> dict | None:
    if os.environ.get("BENCH_BIGRUN_REBUILD") == "1":
        return None
    cached = json.loads(CACHE.read_text()) if CACHE.exists() else db_record(DB_URL)
    return cached if cached and {k: cached.get(k) for k in _wanted()} == _wanted() else None


def _ensure_database(fresh: bool) -> None:
    name, conn = admin(DB_URL)
    with conn:
        if fresh:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is None:
            conn.execute(f'CREATE DATABASE "{name}"')


CACHED = None if WRITER else _cached()
if not WRITER:
    _ensure_database(fresh=CACHED is None)
    if CACHED is None and VAR.exists():
        import shutil

        shutil.rmtree(VAR)
VAR.mkdir(parents=True, exist_ok=True)

import django  # noqa: E402

django.setup()

import bigrun_data as bd  # noqa: E402
import scale_data  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402

from accounts.tokens import create_token  # noqa: E402
from runs import actions  # noqa: E402
from runs.actions.workspaces import add_member, get_or_create_workspace  # noqa: E402
from runs.engine import commands as c  # noqa: E402
from runs.models import Event, Run, Workspace  # noqa: E402


def log(text: str) -> None:
    print(text, flush=True)


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def record_build(record: dict | None) -> None:
    from urllib.parse import urlparse

    name = urlparse(DB_URL).path.lstrip("/")
    if record is None:
        CACHE.unlink(missing_ok=True)
        with connection.cursor() as cursor:
            cursor.execute(f'COMMENT ON DATABASE "{name}" IS NULL')
        return
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    CACHE.write_text(json.dumps(record))
    with connection.cursor() as cursor:
        cursor.execute(f'COMMENT ON DATABASE "{name}" IS %s', [json.dumps(record)])


def build() -> Run:
    """Template, equivalence check, then the big run (module docstring)."""
    log(
        f"building: one run of {BLOCKS:,} blocks ({BLOCKS * bd.BLOCK:,} events) in {connection.settings_dict['NAME']}"
    )
    template = bd.make_run(get_or_create_workspace("bigrun-template"), 1)
    made = bd.make_run(get_or_create_workspace("bigrun-check-made"), CHECK_BLOCKS)
    copied = bd.copy_run(get_or_create_workspace("bigrun-check-copied"), template, CHECK_BLOCKS)
    problems = bd.compare(made, copied)
    if problems:
        raise SystemExit(f"the copy differs from the actions' run: {problems}")
    log(f"  equivalence: {CHECK_BLOCKS} blocks through the actions == copied (rows, bundle, fold)")
    workspace = get_or_create_workspace("bigrun")
    t0, c0 = time.perf_counter(), time.process_time()
    with scale_data.bulk_load(log=log):
        run = bd.copy_run(workspace, template, BLOCKS, log=log)
        log(
            f"  {run.last_seq:,} events copied and replayed in {time.perf_counter() - t0:.0f} s (load {_load()})"
        )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE runs_run")
        cursor.execute("ANALYZE runs_event")
    log(
        f"  built in {time.perf_counter() - t0:.0f} s with the indexes ({time.process_time() - c0:.0f} s of this"
        f" process's CPU; load {_load()})"
    )
    verify(run)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_size_pretty(pg_total_relation_size('runs_event'))")
        log(f"  runs_event with its indexes: {cursor.fetchone()[0]}")
    record_build({**_wanted(), "events": run.last_seq, "built": datetime.now(UTC).isoformat()})
    return run


def verify(run: Run) -> None:
    t0 = time.perf_counter()
    ok = actions.projection_matches_fold(run)
    log(f"  projection == fold of all {run.last_seq:,} events: {ok} ({time.perf_counter() - t0:.0f} s)")
    if not ok:
        raise SystemExit("the big run's projection differs from the fold of its events")


def big_run() -> Run:
    return Run.objects.by_run_id(Workspace.objects.get(slug="bigrun"), bd.RUN_ID).get()


def _client(workspace: Workspace) -> Client:
    User = get_user_model()
    user = User.objects.filter(username="bigrun-owner").first() or User.objects.create_user(
        "bigrun-owner", password="bench-pw-123456"
    )
    add_member(workspace, user, "owner")
    client = Client()
    client.force_login(user)
    return client


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def pages(run: Run) -> dict[str, tuple[str, dict]]:
    rid, last, mid = run.run_id, run.last_seq, run.last_seq // 2
    hx = {"HTTP_HX_REQUEST": "true"}
    root = bd.template_head_seq(run) - 1  # the span_started of "batch"
    return {
        "run page": (f"/runs/{rid}/", {}),
        "run page ?at=middle": (f"/runs/{rid}/?at={mid}", {}),
        "timeline: first page": (f"/runs/{rid}/timeline/?after=0", hx),
        "timeline: middle page": (f"/runs/{rid}/timeline/?after={mid}", hx),
        "timeline: last page": (f"/runs/{rid}/timeline/?before={last + 1}", hx),
        "timeline: type=tool_call middle": (f"/runs/{rid}/timeline/?type=tool_call&after={mid}", hx),
        "run ledger": (f"/runs/{rid}/ledger/", {}),
        "span tree: roots": (f"/runs/{rid}/spans/tree/", hx),
        "span tree: children of root": (f"/runs/{rid}/spans/tree/?span={root}&depth=2", hx),
        "span tree: failed spans": (f"/runs/{rid}/spans/tree/?view=failed", hx),
        "API events: first page": (f"/api/runs/{rid}/events?after_seq=0&limit=1000", {}),
        "API events: middle page": (f"/api/runs/{rid}/events?after_seq={mid}&limit=1000", {}),
        "API events: last page": (f"/api/runs/{rid}/events?after_seq={last - 1000}&limit=1000", {}),
    }


TARGETS = {"run page": 1000.0, "timeline": 100.0, "API events": 100.0}


def _api_headers(workspace: Workspace) -> dict:
    token = create_token(workspace=workspace, name="bigrun-bench", scopes=["read"]).secret
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def measure_pages(run: Run) -> int:
    client = _client(run.workspace)
    urls = pages(run)
    api = _api_headers(run.workspace)
    for name, (url, headers) in urls.items():
        if name.startswith("API"):
            urls[name] = (url, {**headers, **api})
    wall: dict[str, list[float]] = {name: [] for name in urls}
    cpu: dict[str, list[float]] = {name: [] for name in urls}
    size: dict[str, int] = {}
    load_before = _load()
    for round_no in range(REPEAT + 2):
        for name, (url, headers) in urls.items():
            c0, t0 = time.process_time(), time.perf_counter()
            response = client.get(url, **headers)
            elapsed, used = (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000
            if response.status_code != 200:
                raise SystemExit(f"{url}: HTTP {response.status_code} {response.content[:300]!r}")
            size[name] = len(response.content)
            if round_no >= 2:
                wall[name].append(elapsed)
                cpu[name].append(used)
    log(
        f"\nserver time, in-process client, {REPEAT} requests each (ms), run of {run.last_seq:,} events;"
        f" load average {load_before} before, {_load()} after (2 cores)"
    )
    log(f"{'page':34} {'median':>8} {'p95':>8} {'cpu med':>8} {'bytes':>9}  target")
    missed = 0
    for name in urls:
        target = next((t for prefix, t in TARGETS.items() if name.startswith(prefix)), None)
        med = statistics.median(wall[name])
        verdict = "" if target is None else ("ok" if med < target else "MISSED") + f" (< {target:.0f} ms)"
        missed += verdict.startswith("MISSED")
        log(
            f"{name:34} {med:8.1f} {p95(wall[name]):8.1f} {statistics.median(cpu[name]):8.1f}"
            f" {size[name]:9,}  {verdict}"
        )
    return 0


# --- retention: batched purge vs partition drop, with a writer appending beside it -------------

WRITER_WS = "bigrun-writer"
WRITER_RUN = "run_writer"
PART = "scratch_event_part"


def writer_run() -> Run:
    """The run the concurrent writer appends to (another workspace), made once."""
    workspace = get_or_create_workspace(WRITER_WS)
    found = Run.objects.by_run_id(workspace, WRITER_RUN).first()
    if found is None:
        actions.do_start_run(workspace=workspace, workflow=bd.WORKFLOW, actor="bench", run_id=WRITER_RUN)
        found = Run.objects.by_run_id(workspace, WRITER_RUN).get()
    return found


def writer_main(mode: str, out: Path, stop: Path) -> int:
    """--writer MODE OUT STOP: append batches of 10 events until STOP exists; OUT gets one line
    per append: its start (time.perf_counter, CLOCK_MONOTONIC: comparable across processes) and
    its latency in ms. MODE ``actions``: do_append_events on the writer run (runs_event);
    ``part``: one INSERT of 10 rows into the scratch partitioned table (its newest partition)."""
    run = writer_run()
    lines = []
    n = 0
    while not stop.exists():
        t0 = time.perf_counter()
        if mode == "actions":
            events = [
                {"id": f"w_{os.getpid()}_{n}_{k}", "runId": WRITER_RUN, "ts": bd.stamp(datetime.now(UTC)),
                 "type": "annotation", "text": f"writer {n}.{k}"}
                for k in range(10)
            ]  # fmt: skip
            actions.do_append_events(workspace=run.workspace, run_id=WRITER_RUN, events=events, actor="bench")
        else:
            with connection.cursor() as cursor:
                cursor.execute(
                    f"INSERT INTO {PART} (run_id, seq, event_id, type, ts, step_id, correlation_id, body, actor,"
                    " recorded_at, span_ref) SELECT %s, g, 'w' || g, 'annotation', '', '', '', '{}', '', now(), ''"
                    " FROM generate_series(%s, %s) g",
                    [run.pk, 10 * n + 1, 10 * n + 10],
                )
        lines.append(f"{t0:.6f} {(time.perf_counter() - t0) * 1000:.3f}")
        n += 1
        time.sleep(0.02)
    out.write_text("\n".join(lines) + "\n")
    return 0


def _start_writer(mode: str) -> tuple[subprocess.Popen, Path, Path]:
    writer_run()
    out, stop = VAR / f"writer-{mode}.txt", VAR / f"writer-{mode}.stop"
    out.unlink(missing_ok=True)
    stop.unlink(missing_ok=True)
    args = [sys.executable, __file__, "--blocks", str(BLOCKS), "--writer", mode, str(out), str(stop)]
    return subprocess.Popen(args, cwd=ROOT), out, stop


def _stop_writer(
    proc: subprocess.Popen, out: Path, stop: Path, windows: dict[str, tuple[float, float]]
) -> None:
    stop.touch()
    proc.wait(timeout=120)
    rows = [tuple(map(float, line.split())) for line in out.read_text().split("\n") if line]
    log(
        f"  writer (batches of 10 events, another run): {'window':12} {'appends':>8} {'p50':>8} {'p99':>8} {'max':>8} ms"
    )
    for name, (lo, hi) in windows.items():
        got = sorted(ms for t, ms in rows if lo <= t < hi or (lo <= t + ms / 1000 < hi))
        if got:
            p99 = got[min(len(got) - 1, round(0.99 * (len(got) - 1)))]
            log(f"  {'':44} {name:12} {len(got):8} {statistics.median(got):8.1f} {p99:8.1f} {got[-1]:8.1f}")


def retention(run: Run) -> int:
    """--retention: cancel the run (its clock at its last event: it ended weeks ago) and prune it
    with ``manage.py prune_runs --days 7 --workspace bigrun`` while the writer appends beside it."""
    end = datetime.fromisoformat(
        Event.objects.filter(run=run, seq=run.last_seq).values_list("ts", flat=True).get()
    )
    with bd.fixed_clock(end, "r"):
        actions.do_command(
            workspace=run.workspace, run_id=run.run_id, command=c.CancelRun(reason="done"), actor="bench"
        )
    events = run.last_seq + 1
    proc, out, stop = _start_writer("actions")
    time.sleep(10)
    log(f"pruning {events:,} events (load {_load()})")
    t0, c0 = time.perf_counter(), time.process_time()
    call_command("prune_runs", days=7, workspace="bigrun")
    t1, c1 = time.perf_counter(), time.process_time()
    log(
        f"  prune_runs: {t1 - t0:.1f} s wall, {c1 - c0:.1f} s CPU of this process ({events / (t1 - t0):,.0f} events/s); load {_load()}"
    )
    time.sleep(10)
    _stop_writer(proc, out, stop, {"before": (0, t0), "during": (t0, t1), "after": (t1, 1e12)})
    record_build(None)  # the run is gone: the next run of the bench builds it again
    return 0


def resume_retention() -> int:
    """--retention after an interrupted purge: ``manage.py prune_runs`` finishes it (its first
    step), timed the same way, with the writer beside it."""
    from runs.actions.retention import PURGING_SLUG

    left = Event.objects.filter(run__workspace__slug=PURGING_SLUG).count()
    proc, out, stop = _start_writer("actions")
    time.sleep(10)
    log(f"finishing an interrupted purge: {left:,} events left (load {_load()})")
    t0, c0 = time.perf_counter(), time.process_time()
    call_command("prune_runs", days=7, workspace="bigrun")
    t1, c1 = time.perf_counter(), time.process_time()
    log(
        f"  prune_runs: {t1 - t0:.1f} s wall, {c1 - c0:.1f} s CPU of this process ({left / (t1 - t0):,.0f} events/s);"
        f" load {_load()}"
    )
    time.sleep(10)
    _stop_writer(proc, out, stop, {"before": (0, t0), "during": (t0, t1), "after": (t1, 1e12)})
    record_build(None)
    return 0


def partition(run: Run) -> int:
    """--partition: the alternative (scratch tables only): runs_event's rows of the big run in a
    copy of runs_event partitioned by range of run_id; DETACH ... CONCURRENTLY + DROP of its
    partition while the writer inserts into the other one; the insert cost, plain vs partitioned."""
    big = run.pk
    writer = writer_run()
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {PART} CASCADE")
        cursor.execute("DROP TABLE IF EXISTS scratch_event_old")
        cursor.execute(
            f"CREATE TABLE {PART} (LIKE runs_event INCLUDING DEFAULTS) PARTITION BY RANGE (run_id)"
        )
        cursor.execute(
            f"CREATE TABLE scratch_event_old PARTITION OF {PART} FOR VALUES FROM (MINVALUE) TO ({big + 1})"
        )
        cursor.execute(
            f"CREATE TABLE scratch_event_new PARTITION OF {PART} FOR VALUES FROM ({big + 1}) TO (MAXVALUE)"
        )
        t0 = time.perf_counter()
        cursor.execute(f"INSERT INTO {PART} SELECT * FROM runs_event WHERE run_id = %s", [big])
        log(f"  {PART}: {cursor.rowcount:,} rows copied in {time.perf_counter() - t0:.0f} s")
        cursor.execute("SET maintenance_work_mem = '1GB'")
        t0 = time.perf_counter()
        cursor.execute(f"ALTER TABLE {PART} ADD PRIMARY KEY (run_id, seq)")
        cursor.execute(
            f"ALTER TABLE {PART} ADD FOREIGN KEY (run_id) REFERENCES runs_run (id) DEFERRABLE INITIALLY DEFERRED"
        )
        cursor.execute(
            "SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = 'runs_event'::regclass"
            " AND NOT indisprimary"
        )
        for (definition,) in cursor.fetchall():
            name = definition.split(" INDEX ")[1].split(" ON ")[0]
            if "gin_trgm_ops" in definition:
                continue  # the trigram index of model_io bodies (9 min here): the probes insert annotations
            cursor.execute(
                definition.replace(f"INDEX {name} ON public.runs_event", f"INDEX part_{name} ON {PART}")
            )
        cursor.execute(f"ANALYZE {PART}")
        log(
            f"  {PART}: the same key, foreign key and indexes as runs_event made in {time.perf_counter() - t0:.0f} s"
        )
        cursor.execute("SELECT pg_size_pretty(pg_total_relation_size('scratch_event_old'))")
        log(f"  the partition holding the run: {cursor.fetchone()[0]}")
    log(f"\ninsert cost, plain runs_event vs {PART} (10 rows per INSERT, rolled back; load {_load()})")
    insert_cost(writer.pk)
    proc, out, stop = _start_writer("part")
    time.sleep(10)
    log(f"detaching and dropping the partition (load {_load()})")
    with connection.cursor() as cursor:
        t0 = time.perf_counter()
        cursor.execute(f"ALTER TABLE {PART} DETACH PARTITION scratch_event_old CONCURRENTLY")
        t1 = time.perf_counter()
        cursor.execute("DROP TABLE scratch_event_old")
        t2 = time.perf_counter()
    log(
        f"  DETACH PARTITION CONCURRENTLY {(t1 - t0) * 1000:.0f} ms, DROP TABLE {(t2 - t1) * 1000:.0f} ms; load {_load()}"
    )
    time.sleep(10)
    _stop_writer(proc, out, stop, {"before": (0, t0), "during": (t0, t2), "after": (t2, 1e12)})
    with connection.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {PART} CASCADE")
    return 0


def insert_cost(run_pk: int, rounds: int = 6, per_round: int = 300) -> None:
    """Median ms of one INSERT of 10 rows, plain table and partitioned, rounds alternated (A B A B),
    in one transaction rolled back at the end (nothing stays)."""
    sql = (
        "INSERT INTO {table} (run_id, seq, event_id, type, ts, step_id, correlation_id, body, actor, recorded_at,"
        " span_ref) SELECT %s, g, 'ic' || g, 'annotation', '2026-11-02T00:00:00.000Z', 'work', 'c' || g,"
        ' \'{{"type":"annotation","text":"cost probe \' || g || \'"}}\', \'bench\','
        " now(), '' FROM generate_series(%s, %s) g"
    )
    times: dict[str, list[float]] = {"runs_event": [], PART: []}
    seq = 10_000_000
    from django.db import transaction

    with transaction.atomic(), connection.cursor() as cursor:
        for _ in range(rounds):
            for table in times:
                for _ in range(per_round):
                    t0 = time.perf_counter()
                    cursor.execute(sql.format(table=table), [run_pk, seq + 1, seq + 10])
                    times[table].append((time.perf_counter() - t0) * 1000)
                    seq += 10
        transaction.set_rollback(True)
    for table, values in times.items():
        log(
            f"  {table:22} median {statistics.median(values):.3f} ms, p95 {p95(values):.3f} ms per INSERT of 10 rows"
        )


def main() -> int:
    if connection.vendor != "postgresql":
        log("bench_bigrun needs PostgreSQL (BENCH_BIGRUN_DB)")
        return 1
    call_command("migrate", verbosity=0)
    if CACHED is None:
        run = build()
    else:
        log(
            f"cached: {CACHED['events']:,} events (built {CACHED['built']}; BENCH_BIGRUN_REBUILD=1 builds again)"
        )
        if "--retention" in sys.argv and not Run.objects.by_run_id(
            Workspace.objects.get(slug="bigrun"), bd.RUN_ID
        ):
            return resume_retention()  # a purge was interrupted: prune_runs finishes it
        run = big_run()
        if "--verify" in sys.argv:
            verify(run)
    if "--build-only" in sys.argv:
        return 0
    if "--partition" in sys.argv:
        return partition(run)
    if "--retention" in sys.argv:
        return retention(run)
    return measure_pages(run)


if __name__ == "__main__":
    if WRITER:
        at = sys.argv.index("--writer")
        sys.exit(writer_main(sys.argv[at + 1], Path(sys.argv[at + 2]), Path(sys.argv[at + 3])))
    sys.exit(main())
