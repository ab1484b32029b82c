"""A workspace at scale on PostgreSQL: server time of the runs list (newest first and by cost), a
filtered search, the inbox, the workspace ledger and the dashboard (30 days), a run's ledger and a
run page, in a workspace of BENCH_SCALE_RUNS runs
(about 12 events each: the start, a step, 5 priced model calls of request + response, a gate
request or a cancel for half of them) next to one of 1,000 runs built the same way; median and p95
of each, and the ratio big / small.

How the workspaces are built (once; cached, see below), bench/scale_data.py:

1. TEMPLATES runs are made through the actions (do_start_run, do_append_events, a wait at the
   review gate for some, a cancel for others) with the clock fixed and ids numbered per run.
2. Each run of a workspace is its template's rows, read back in COPY text and written with COPY
   with the run id, the start time (run i starts i * spacing seconds before the newest, over
   BENCH_SCALE_DAYS days) and the row keys replaced: event bodies byte for byte what the actions
   store for that run. The rollups (CostRollup, RunRollup) are the templates' own, moved to each
   run's start day and shard and summed. For 50,000 runs and more, the secondary indexes of runs_run
   and runs_event (the trigram ones too) are dropped during the COPY and made again after it.
3. Equivalence: tests/storage/test_scale_build.py (in `make test`, PostgreSQL) makes 200 runs
   through the actions and the same 200 with COPY and finds the rows the pages read equal (run
   rows, events with the sha256 of their canonical bytes, rollups, inbox and search). Here, for a
   sample of each built workspace, (a) the projection equals the fold of the copied events
   (runs.actions.projection_matches_fold), (b) the exported bundle verifies, and (c) the bundle
   imported through the actions (do_import_bundle) holds the same event bodies; and the 1,000-run
   workspace's rollups equal a recomputation from its events (rollups_match).

--explain plans the EXPLAIN test's page queries (tests/storage/test_query_plans.py) against the
cached workspace instead of measuring, and lists any sequential scan of runs_run or runs_event.

Cache: the database BENCH_SCALE_DB (default postgres://postgres@127.0.0.1:5432/workbench_bench_scale,
suffixed _<runs> for sizes other than 100,000; created when missing) keeps the data;
var/bench/bench_scale-<runs>.json records what was built (runs, events, recipe version). A second
run with the same settings only measures.

Size: ``--runs N`` or BENCH_SCALE_RUNS; without either, the acceptance size (1,000,000 runs, 12M
events) when its build is cached, else 100,000 runs and a note of how long the 1M build takes. Each
size has its own database (BENCH_SCALE_DB, suffixed ``_<runs>`` except for 100,000) and cache file
(var/bench/bench_scale-<runs>.json), so a 1M build stays cached beside the quick one.

Environment: BENCH_SCALE_DAYS (default 90), BENCH_SCALE_REPEAT
(default 15), BENCH_SCALE_REBUILD=1 (build again).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from pg_cache import db_record

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ACCEPTANCE = 1_000_000  # issue 29: 1M runs / 10M+ events (12 events a run: 12M)
FALLBACK = 100_000  # what `make bench` builds when the acceptance size is not cached yet
SMALL = 1000
DAYS = int(os.environ.get("BENCH_SCALE_DAYS", "90"))
REPEAT = int(os.environ.get("BENCH_SCALE_REPEAT", "15"))
TEMPLATES = 8  # scale_data.TEMPLATES
RECIPE = 6  # bump when the build changes: a cached workspace of another recipe is built again
BASE_DB = os.environ.get("BENCH_SCALE_DB", "postgres://postgres@127.0.0.1:5432/workbench_bench_scale")
# seconds per 1,000 runs of a build on the shared 2-core machine (measured 2026-11-26 at 1M, load
# 11-17: COPY without the secondary indexes 0.73 s, the B-tree indexes made again 0.25 s, the
# trigram index of the model_io bodies ~3 s)
BUILD_SECONDS_PER_1K = 4.0


def _cache_file(runs: int) -> Path:
    return ROOT / "var" / "bench" / f"bench_scale-{runs}.json"


def _db_url(runs: int) -> str:
    """One database per size, so the 1M workspace stays cached beside a smaller one."""
    return BASE_DB if runs == FALLBACK else f"{BASE_DB}_{runs}"


def _size() -> int:
    """--runs N, else BENCH_SCALE_RUNS, else the acceptance size when it is built (cached), else
    FALLBACK with a note of how long the acceptance build takes."""
    args = sys.argv[1:]
    if "--runs" in args:
        return int(args[args.index("--runs") + 1].replace("_", "").replace(",", ""))
    if os.environ.get("BENCH_SCALE_RUNS"):
        return int(os.environ["BENCH_SCALE_RUNS"])
    if _cache_file(ACCEPTANCE).exists() or db_record(_db_url(ACCEPTANCE)):
        return ACCEPTANCE
    minutes = ACCEPTANCE / 1000 * BUILD_SECONDS_PER_1K / 60
    print(
        f"bench_scale: the acceptance workspace ({ACCEPTANCE:,} runs) is not built yet; measuring"
        f" {FALLBACK:,} runs. Build it once (about {minutes:.0f} min on 2 cores, ~12 GB of PostgreSQL):"
        f" .venv/bin/python bench/bench_scale.py --runs {ACCEPTANCE}",
        flush=True,
    )
    return FALLBACK


RUNS = _size()
DB_URL = _db_url(RUNS)
CACHE = _cache_file(RUNS)
TMP = Path(tempfile.mkdtemp(prefix="bench_scale_"))
os.environ["DATABASE_URL"] = DB_URL
os.environ.setdefault("WORKBENCH_VAR_DIR", str(TMP))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
os.environ.setdefault("DEBUG", "0")
os.environ.setdefault("SECURE_SSL_REDIRECT", "0")
os.environ.setdefault("SECRET_KEY", "bench-scale-not-secret-" + "x" * 40)
os.environ.setdefault("ALLOWED_HOSTS", "testserver")


def _wanted() -> dict:
    return {"recipe": RECIPE, "runs": RUNS, "small": SMALL, "days": DAYS, "templates": TEMPLATES}


def _cached() -> dict | None:
    if os.environ.get("BENCH_SCALE_REBUILD") == "1":
        return None
    cached = json.loads(CACHE.read_text()) if CACHE.exists() else db_record(DB_URL)
    if cached is not None and not CACHE.exists():
        CACHE.parent.mkdir(parents=True, exist_ok=True)
        CACHE.write_text(json.dumps(cached))
    return cached if cached and {k: cached.get(k) for k in _wanted()} == _wanted() else None


def record_build(record: dict) -> None:
    """The cache file, and the same record as the database's COMMENT."""
    from urllib.parse import urlparse

    CACHE.parent.mkdir(parents=True, exist_ok=True)
    CACHE.write_text(json.dumps(record))
    name = urlparse(DB_URL).path.lstrip("/")
    with connection.cursor() as cursor:
        cursor.execute(f'COMMENT ON DATABASE "{name}" IS %s', [json.dumps(record)])


def _ensure_database(fresh: bool) -> None:
    """The bench's own database (dropped and made again when a build is due)."""
    from urllib.parse import urlparse

    import psycopg

    name = urlparse(DB_URL).path.lstrip("/")
    with psycopg.connect(DB_URL.replace(f"/{name}", "/postgres", 1), autocommit=True) as conn:
        if fresh:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is None:
            conn.execute(f'CREATE DATABASE "{name}"')


CACHED = _cached()
_ensure_database(fresh=CACHED is None)

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402

from runs import actions  # noqa: E402
from runs.actions.workspaces import add_member, get_or_create_workspace  # noqa: E402
from runs.models import Event, Run, Workspace  # noqa: E402
from runs.protocol.bundle import check_bundle  # noqa: E402
from runs.protocol.values import loads  # noqa: E402
from runs.selectors.bundles import export_bundle_bytes  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
import scale_data  # noqa: E402


def build(workspace: Workspace, count: int, templates: list, newest: datetime, prefix: str) -> None:
    """``count`` runs of the templates in ``workspace`` with COPY (bench/scale_data.py); a big
    workspace with the secondary indexes made again after the COPY (scale_data.bulk_load)."""
    spacing = DAYS * 86400 / max(count, 1)
    t0 = time.perf_counter()
    if count >= 50_000:
        with scale_data.bulk_load(log=lambda text: print(text, flush=True)):
            events = scale_data.copy_runs(
                workspace, count, templates, newest, spacing, prefix, log=lambda text: print(text, flush=True)
            )
            t1 = time.perf_counter()
            print(
                f"  {workspace.slug}: {count:,} runs / {events:,} events copied in {t1 - t0:.0f} s",
                flush=True,
            )
    else:
        events = scale_data.copy_runs(workspace, count, templates, newest, spacing, prefix)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE runs_run")
        cursor.execute("ANALYZE runs_event")
    print(
        f"  {workspace.slug}: {count:,} runs / {events:,} events with indexes and rollups in"
        f" {time.perf_counter() - t0:.0f} s",
        flush=True,
    )


def check_equivalence(workspace: Workspace, sample: int = 12) -> None:
    """Clones are runs the actions would have stored (module docstring, step 3)."""
    check_ws = get_or_create_workspace("scale-check")
    runs = list(Run.objects.for_workspace(workspace).order_by("?")[:sample])
    for run in runs:
        assert actions.projection_matches_fold(run), f"{run.run_id}: projection != fold"
        data = export_bundle_bytes(run)
        assert check_bundle(data).ok, f"{run.run_id}: exported bundle does not verify"
        Run.objects.by_run_id(check_ws, run.run_id).delete()
        imported = actions.do_import_bundle(workspace=check_ws, data=data)
        mine = list(Event.objects.filter(run=run).order_by("seq").values_list("body", flat=True))
        theirs = list(Event.objects.filter(run=imported).order_by("seq").values_list("body", flat=True))
        assert [loads(b) for b in mine] == [loads(b) for b in theirs], f"{run.run_id}: import differs"
    assert actions.rollups_match(workspace) if workspace.runs.count() <= 5000 else True
    print(f"  equivalence: {len(runs)} sampled clones fold, verify and re-import identically", flush=True)


def _client(workspace: Workspace, name: str) -> Client:
    User = get_user_model()
    user = User.objects.filter(username=name).first() or User.objects.create_user(
        name, password="bench-pw-123456"
    )
    add_member(workspace, user, "owner")
    client = Client()
    client.force_login(user)
    return client


def _pages(workspace: Workspace) -> dict[str, str]:
    run = Run.objects.for_workspace(workspace).order_by("-started_at").only("run_id")[7]
    newest = Run.objects.for_workspace(workspace).order_by("-started_at").only("started_at")[0].started_at
    last = newest.date()
    first = last - timedelta(days=29)
    return {
        "runs list": "/runs/",
        # a phrase of 1 template in 8: every 8th run matches (a broad search, O(matches))
        "filtered search": "/runs/?status=running&q=invoice+701",
        "rare-word search": "/runs/?q=zebra+invoice",
        "inbox": "/runs/inbox/",
        "workspace ledger (30 days)": f"/ledger/?from={first}&to={last}",
        "dashboard (30 days)": f"/dashboard/?from={first}&to={last}",
        "runs list by cost": "/runs/?sort=cost",
        "run ledger": f"/runs/{run.run_id}/ledger/",
        "run page": f"/runs/{run.run_id}/",
    }


def measure(clients: dict[str, tuple[Client, dict[str, str]]]) -> tuple[dict, dict]:
    """Wall-clock server time and this process's CPU time (the Django side, without PostgreSQL's)
    of each page, in ms, the two workspaces alternating (the same load for both)."""
    times: dict[str, dict[str, list[float]]] = {
        k: {p: [] for p in pages} for k, (_, pages) in clients.items()
    }
    cpu: dict[str, dict[str, list[float]]] = {k: {p: [] for p in pages} for k, (_, pages) in clients.items()}
    for round_no in range(REPEAT + 2):
        for key, (client, pages) in clients.items():
            for name, url in pages.items():
                c0, t0 = time.process_time(), time.perf_counter()
                response = client.get(url)
                elapsed = (time.perf_counter() - t0) * 1000
                used = (time.process_time() - c0) * 1000
                if response.status_code != 200:
                    raise SystemExit(f"{key} {url}: HTTP {response.status_code}")
                if round_no >= 2:
                    times[key][name].append(elapsed)
                    cpu[key][name].append(used)
    return times, cpu


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def explain(workspace: Workspace) -> int:
    """--explain: the EXPLAIN test's page queries (tests/storage/test_query_plans.py) planned against
    this workspace; lists any that reads runs_run or runs_event with a sequential scan."""
    import re

    sys.path.insert(0, str(ROOT / "tests" / "storage"))
    import test_query_plans as plans

    pages = _pages(workspace)
    run_id = pages["run page"].strip("/").split("/")[1]
    first, last = (
        date.fromisoformat(v) for v in re.findall(r"\d{4}-\d\d-\d\d", pages["workspace ledger (30 days)"])
    )
    queries = plans._queries(
        workspace,
        run_id=run_id,
        workflow="wf-scale",
        tag="t7",
        ledger=(first, last),
        words=("invoice 701 for tenant", "invoice", "zebra invoice"),
    )
    bad = plans.sequential_scans(queries)
    scans = re.compile(
        r"((?:Parallel )?(?:Seq Scan|Index Only Scan|Index Scan|Bitmap Index Scan)(?: Backward)?(?: using \S+)? on \S+)"
    )
    with connection.cursor() as cursor:
        for name, statements in queries:
            used = []
            for sql in statements:
                cursor.execute("EXPLAIN " + sql)
                plan = "\n".join(row[0] for row in cursor.fetchall())
                used += [
                    m
                    for m in scans.findall(plan)
                    if "runs_run" in m or "runs_event" in m or " on run_" in m or " on event_" in m
                ]
            print(f"  {name}: {'; '.join(dict.fromkeys(used)) or '(no run/event scan)'}")
    statements = sum(len(s) for _, s in queries)
    print(
        f"EXPLAIN at {RUNS:,} runs: {statements} statements of {len(queries)} page queries,"
        f" {len(bad)} with a sequential scan of runs_run or runs_event"
    )
    for text in bad:
        print(text)
    return 1 if bad else 0


def main() -> int:
    if connection.vendor != "postgresql":
        print("bench_scale needs PostgreSQL (BENCH_SCALE_DB)")
        return 1
    call_command("migrate", verbosity=0)
    if CACHED is None:
        print(
            f"building: {RUNS:,} runs (and {SMALL:,} beside them) in {connection.settings_dict['NAME']}",
            flush=True,
        )
        big_ws = get_or_create_workspace("scale-big")
        small_ws = get_or_create_workspace("scale-small")
        tpl_ws = get_or_create_workspace("scale-templates")
        templates = scale_data.make_templates(tpl_ws)
        newest = datetime.now(UTC).replace(microsecond=0)
        build(small_ws, SMALL, templates, newest, "s")
        build(big_ws, RUNS, templates, newest, "b")
        check_equivalence(small_ws)
        check_equivalence(big_ws)
        record_build({**_wanted(), "built": datetime.now(UTC).isoformat()})
    else:
        print(f"cached: {RUNS:,} runs (built {CACHED['built']}; BENCH_SCALE_REBUILD=1 builds again)")
        big_ws = Workspace.objects.get(slug="scale-big")
        small_ws = Workspace.objects.get(slug="scale-small")
        if Run.objects.for_workspace(big_ws).count() != RUNS:
            raise SystemExit(f"the cached database does not hold {RUNS:,} runs: BENCH_SCALE_REBUILD=1")
    if "--explain" in sys.argv:
        return explain(big_ws)
    events = RUNS * Event.objects.filter(run=Run.objects.for_workspace(big_ws).first()).count()
    clients = {
        "1k": (_client(small_ws, "scale-small-owner"), _pages(small_ws)),
        "big": (_client(big_ws, "scale-big-owner"), _pages(big_ws)),
    }
    load_before = _load()
    times, cpu = measure(clients)
    print(
        f"\nserver time, in-process client, {REPEAT} requests each (ms): {SMALL:,} runs vs {RUNS:,} runs"
        f" / ~{events:,} events; load average {load_before} before, {_load()} after (2 cores)"
    )
    print(
        f"{'page':30} {'1k median':>10} {'1k p95':>8} {'big median':>11} {'big p95':>8} {'ratio':>6}"
        f" {'1k cpu':>7} {'big cpu':>8}"
    )
    worst = 0.0
    for name in times["big"]:
        small, big = times["1k"][name], times["big"][name]
        ratio = statistics.median(big) / statistics.median(small)
        worst = max(worst, statistics.median(big))
        print(
            f"{name:30} {statistics.median(small):10.1f} {p95(small):8.1f} {statistics.median(big):11.1f}"
            f" {p95(big):8.1f} {ratio:6.2f} {statistics.median(cpu['1k'][name]):7.1f}"
            f" {statistics.median(cpu['big'][name]):8.1f}"
        )
    print(
        f"\ntarget: each < 200 ms at scale; slowest median {worst:.1f} ms (cpu: median CPU ms of this"
        " process, the Django side without PostgreSQL's)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
