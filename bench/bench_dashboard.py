"""The dashboard's server time at 1,000 and 1,000,000 runs (issue 52: "under 200 ms at 1,000,000
runs"), for a 30-day range, with a workflow filter, with a model filter and over 60 days; median and
p95 of BENCH_DASHBOARD_REPEAT requests through Django's test Client, the load average beside.

What is built (once, cached), set-wise in SQL (INSERT ... SELECT over a generated series, minutes
instead of bench_scale's hour), in two workspaces of one database (dash-1k and dash-1m):

- the run rows (runs_run): BENCH_DASHBOARD_DAYS days (default 60) ending on the build day, in
  6 workflows; 88 % completed, 6 % failed, 3 % cancelled, 3 % running (2 % of all runs waiting on
  a gate); durations from 0.8 s to 90 s;
- the rollup rows the dashboard reads, summed from the same per-run recipe as the write path would
  (runs.actions.rollups): RunRollup (day x workflow x shard: runs by status, waiting gates),
  MetricRollup (run latency by status and bucket, model latency of 5 model calls a run over 4
  models, decision latency and decisions of the half of the runs that had a gate, 2 gate steps, 5
  reviewers), CostRollup (the 5 calls by day x shard x workflow x provider x model x step x subject
  of BENCH_DASHBOARD_SUBJECTS users (default 10) in 5 tenants, USD, exact decimal cost).

No events are built: the dashboard reads only the rollups (runs.selectors.dashboard) and the
navigation's inbox count (RunRollup too), never runs_event; the run rows are there so any read of
runs_run would show at its real size. bench_scale measures the same page beside the other pages on
workspaces built through the actions (100,000 runs with their 1.2M events). The rollups'
row counts are printed with the figures: they, not the runs, bound the page's work.

Cache: BENCH_DASHBOARD_DB (default postgres://postgres@127.0.0.1:5432/workbench_bench_dashboard)
holds the data; its COMMENT (and var/bench/bench_dashboard-pg.json) records the recipe, so a second
run only measures; BENCH_DASHBOARD_REBUILD=1 builds again. ``--sqlite`` measures the same on SQLite
(var/bench/bench_dashboard.sqlite3; BENCH_DASHBOARD_SQLITE=0 skips it from the PostgreSQL run).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from pg_cache import db_record

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SQLITE = "--sqlite" in sys.argv
BIG = int(os.environ.get("BENCH_DASHBOARD_RUNS", "1000000"))  # fewer only to try the build quickly
SIZES = {"dash-1k": 1000, "dash-1m": BIG}
BIG_LABEL = "1M" if BIG == 1_000_000 else f"{BIG // 1000}k"
DAYS = int(os.environ.get("BENCH_DASHBOARD_DAYS", "60"))
SUBJECTS = int(os.environ.get("BENCH_DASHBOARD_SUBJECTS", "10"))
REPEAT = int(os.environ.get("BENCH_DASHBOARD_REPEAT", "15"))
RECIPE = 1  # bump when the build changes
WORKFLOWS = 6
MODELS = [
    ("openai", "gpt-4o-mini", "0.0000006"),
    ("anthropic", "claude-sonnet-4", "0.000015"),
    ("google", "gemini-2.0-flash", "0.0000004"),
    ("meta", "llama-3.3-70b", "0.0000009"),
]
RUN_MS = [800, 1200, 2500, 4000, 7000, 12000, 30000, 90000]
CALL_MS = [150, 300, 600, 900, 1500, 2400, 4000, 9000]
DECISION_MS = [20_000, 60_000, 300_000, 900_000, 3_600_000, 14_400_000, 86_400_000, 200_000]
CALLS = 5  # model calls a run
SHARDS = 4  # runs.actions.rollup_labels.ROLLUP_SHARDS (checked below)

BASE_DB = (
    os.environ.get("BENCH_DASHBOARD_DB", "postgres://postgres@127.0.0.1:5432/workbench_bench_dashboard")
    + ("" if BIG == 1_000_000 else f"_{BIG}")
    + ("" if SUBJECTS == 10 else f"_s{SUBJECTS}")
)
# other sizes and subject counts have their own database and files, beside the default one
SUFFIX = ("" if BIG == 1_000_000 else f"-{BIG}") + ("" if SUBJECTS == 10 else f"-s{SUBJECTS}")
SQLITE_FILE = ROOT / "var" / "bench" / f"bench_dashboard{SUFFIX}.sqlite3"
CACHE = ROOT / "var" / "bench" / f"bench_dashboard{SUFFIX}-{'sqlite' if SQLITE else 'pg'}.json"
TMP = Path(tempfile.mkdtemp(prefix="bench_dashboard_"))
os.environ["DATABASE_URL"] = f"sqlite:///{SQLITE_FILE}" if SQLITE else BASE_DB
os.environ.setdefault("WORKBENCH_VAR_DIR", str(TMP))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
os.environ.setdefault("DEBUG", "0")
os.environ.setdefault("SECURE_SSL_REDIRECT", "0")
os.environ.setdefault("SECRET_KEY", "bench-dashboard-not-secret-" + "x" * 40)
os.environ.setdefault("ALLOWED_HOSTS", "testserver")


def _wanted() -> dict:
    return {"recipe": RECIPE, "sizes": SIZES, "days": DAYS, "subjects": SUBJECTS}


def _cached() -> dict | None:
    if os.environ.get("BENCH_DASHBOARD_REBUILD") == "1":
        return None
    if CACHE.exists():
        cached = json.loads(CACHE.read_text())
    elif SQLITE:
        cached = None
    else:
        cached = db_record(BASE_DB)
    return cached if cached and {k: cached.get(k) for k in _wanted()} == _wanted() else None


def _ensure_database(fresh: bool) -> None:
    if SQLITE:
        if fresh:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{SQLITE_FILE}{suffix}").unlink(missing_ok=True)
        SQLITE_FILE.parent.mkdir(parents=True, exist_ok=True)
        return
    from pg_cache import admin

    name, conn = admin(BASE_DB)
    with conn:
        if fresh:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is None:
            conn.execute(f'CREATE DATABASE "{name}"')


# the in-process client serves no static files: WhiteNoise's note about their directory is noise
warnings.filterwarnings("ignore", message="No directory at")
CACHED = _cached()
_ensure_database(fresh=CACHED is None)

import django  # noqa: E402

django.setup()

import scale_data  # noqa: E402  (Django models: after django.setup())
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from runs.actions.rollup_labels import ROLLUP_SHARDS  # noqa: E402
from runs.actions.workspaces import add_member, get_or_create_workspace  # noqa: E402
from runs.models import CostRollup, MetricRollup, Run, RunRollup, Workspace  # noqa: E402
from runs.presenters.histogram import bucket_of  # noqa: E402

assert ROLLUP_SHARDS == SHARDS, "bench_dashboard: ROLLUP_SHARDS changed"
PG = connection.vendor == "postgresql"


def _case(expr: str, values: list) -> str:
    """``values[expr]`` as a portable CASE (numbers as numbers, text quoted)."""
    spelled = [str(v) if isinstance(v, int) else "'" + str(v).replace("'", "''") + "'" for v in values]
    whens = " ".join(f"WHEN {n} THEN {v}" for n, v in enumerate(spelled))
    return f"(CASE {expr} {whens} END)"


def _series(count: int) -> tuple[str, str]:
    """(a WITH prefix, a FROM item) giving the column ``i`` = 1 .. count."""
    if PG:
        return "", f"generate_series(CAST(1 AS bigint), {count}) AS g(i)"
    return f"WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < {count}) ", "g"


def _run_columns(base: int, today: date) -> dict[str, str]:
    """Each run i's values (SQL over ``i``): day offset d, status, workflow, ..."""
    day = f"((i - 1) * {DAYS} / :count)"  # run 1 the newest: contiguous days
    status = (
        "(CASE WHEN (i * 13) % 100 < 6 THEN 'failed' WHEN (i * 13) % 100 < 9 THEN 'cancelled'"
        " WHEN (i * 13) % 100 < 12 THEN 'running' ELSE 'completed' END)"
    )
    second = "((i * 7919) % 86400)"
    if PG:
        started = (
            f"(TIMESTAMPTZ '{today.isoformat()} 00:00:00+00' - make_interval(days => {day}::int)"
            f" + make_interval(secs => {second}))"
        )
        run_day = f"(DATE '{today.isoformat()}' - {day}::int)"
    else:
        started = f"datetime('{today.isoformat()} 00:00:00', '-' || {day} || ' days', '+' || {second} || ' seconds')"
        run_day = f"date('{today.isoformat()}', '-' || {day} || ' days')"
    return {
        "id": f"({base} + i)",
        "shard": f"(({base} + i) % {SHARDS})",
        "run_day": run_day,
        "started": started,
        "status": status,
        "workflow": "('wf-' || ((i / 3) % " + str(WORKFLOWS) + "))",
        "run_ms": _case("((i * 11) % 8)", RUN_MS),
        "waiting": "(CASE WHEN (i * 13) % 100 < 11 AND (i * 13) % 100 >= 9 THEN 1 ELSE 0 END)",
        "gated": "(i % 2 = 0)",
        "step": "(CASE WHEN i % 4 = 0 THEN 'review' ELSE 'legal-review' END)",
        "reviewer": "('reviewer-' || (i % 5))",
        "decision": "(CASE WHEN (i * 17) % 10 = 0 THEN 'reject' ELSE 'approve' END)",
        "decision_ms": _case("((i * 3) % 8)", DECISION_MS),
        "user": f"('user-' || (i % {SUBJECTS}))",
        "tenant": f"('tenant-' || ((i % {SUBJECTS}) % 5))",
        "plan": f"(CASE WHEN (i % {SUBJECTS}) % 5 < 2 THEN 'pro' ELSE 'team' END)",
    }


def _buckets(values: list[int]) -> list[int]:
    return [bucket_of(ms) for ms in values]


def _hash(expr: str) -> str:
    return f"md5({expr})" if PG else f"substr({expr}, 1, 64)"


def _exec(sql: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return cursor.rowcount


def build(workspace: Workspace, count: int, today: date) -> None:
    """The workspace's runs and rollups (see the module's docstring), set-wise."""
    t0 = time.perf_counter()
    base = (Run.unscoped.order_by("-id").values_list("id", flat=True).first() or 0) + 10
    c = {k: v.replace(":count", str(count)) for k, v in _run_columns(base, today).items()}
    ws = workspace.pk
    with_, series = _series(count)
    json_empty = "'[]'::jsonb" if PG else "'[]'"
    json_obj = '\'{"USD": "0.01"}\'::jsonb' if PG else '\'{"USD": "0.01"}\''
    now = "now()" if PG else "datetime('now')"
    finished = f"{c['status']} <> 'running'"
    ended = (
        f"(CASE WHEN {finished} THEN {c['started']} + make_interval(secs => {c['run_ms']} / 1000.0) END)"
        if PG
        else f"(CASE WHEN {finished} THEN datetime({c['started']}, '+' || ({c['run_ms']} / 1000) || ' seconds') END)"
    )
    _exec(
        f"{with_}INSERT INTO runs_run (id, workspace_id, run_id, workflow_id, workflow_version, title, status,"
        " started_at, ended_at, tags, subject, doc, state, revision, last_seq, has_engine, pending_gates,"
        " rejected_gates, event_count, model_calls, total_tokens, cost_totals, duration_ms, cost_amount,"
        " error_count, created_by, created_at, updated_at)"
        f" SELECT {c['id']}, {ws}, 'run-' || i, {c['workflow']}, 0, 'dashboard run ' || i, {c['status']},"
        f" {c['started']}, {ended}, {json_empty}, NULL, '{{}}', '{{}}', 0, 12, TRUE, {c['waiting']}, 0, 12,"
        f" {CALLS}, 0, {json_obj}, CASE WHEN {finished} THEN {c['run_ms']} ELSE -1 END, 0.01,"
        f" CASE WHEN {c['status']} = 'failed' THEN 1 ELSE 0 END, 'bench', {now}, {now} FROM {series}"
    )
    if PG:
        _exec("SELECT setval(pg_get_serial_sequence('runs_run', 'id'), (SELECT max(id) FROM runs_run))")
    t_runs = time.perf_counter() - t0
    done = lambda s: f"SUM(CASE WHEN {c['status']} = '{s}' THEN 1 ELSE 0 END)"  # noqa: E731
    _exec(
        f"{with_}INSERT INTO runs_runrollup (workspace_id, run_day, workflow_id, workflow_version, shard, runs,"
        " waiting_gates, completed, failed, cancelled)"
        f" SELECT {ws}, {c['run_day']}, {c['workflow']}, 0, {c['shard']}, COUNT(*), SUM({c['waiting']}),"
        f" {done('completed')}, {done('failed')}, {done('cancelled')} FROM {series}"
        f" GROUP BY {c['run_day']}, {c['workflow']}, {c['shard']}"
    )
    # MetricRollup: (day, workflow, shard, kind, label, reviewer, decision, bucket) -> count
    calls = f"{series} CROSS JOIN (SELECT 0 AS k UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4) AS c"
    model_of = "((i + k) % 4)"
    metric_sources = [
        (
            "'run_latency'",
            c["status"],
            "''",
            "''",
            _case("((i * 11) % 8)", _buckets(RUN_MS)),
            series,
            finished,
        ),
        (
            "'model_latency'",
            _case(model_of, [m for _, m, _ in MODELS]),
            "''",
            "''",
            _case("((i * 5 + k * 3) % 8)", _buckets(CALL_MS)),
            calls,
            "1 = 1",
        ),
        (
            "'decision_latency'",
            c["step"],
            "''",
            "''",
            _case("((i * 3) % 8)", _buckets(DECISION_MS)),
            series,
            f"{c['gated']} AND {finished}",
        ),
        ("'decision'", c["step"], c["reviewer"], c["decision"], "0", series, f"{c['gated']} AND {finished}"),
    ]
    for kind, label, reviewer, decision, bucket, source, where in metric_sources:
        grouped = [c["run_day"], c["workflow"], c["shard"], label, reviewer, decision, bucket]
        key = f"{kind} || '|' || {c['workflow']} || '|' || {c['shard']} || '|' || {label} || '|' || {reviewer} || '|' || {decision} || '|' || {bucket}"
        _exec(
            f"{with_}INSERT INTO runs_metricrollup (workspace_id, run_day, key_hash, workflow_id, shard, kind,"
            " label, reviewer, decision, bucket, count)"
            f" SELECT {ws}, {c['run_day']}, {_hash(key)}, {c['workflow']}, {c['shard']}, {kind}, {label},"
            f" {reviewer}, {decision}, {bucket}, COUNT(*) FROM {source} WHERE {where}"
            f" GROUP BY {', '.join(x for x in grouped if x not in ("''", '0'))}"
        )
    provider = _case(model_of, [p for p, _, _ in MODELS])
    model = _case(model_of, [m for _, m, _ in MODELS])
    price = (
        "(CASE "
        + model_of
        + " "
        + " ".join(f"WHEN {n} THEN {p}" for n, (_, _, p) in enumerate(MODELS))
        + " END)"
    )
    step = "(CASE WHEN k < 3 THEN 'draft' ELSE 'check' END)"
    tokens = "(400 + (i + k) % 700)"
    inp = "(300 + (i + k) % 500)"
    call_ms = _case("((i * 5 + k * 3) % 8)", CALL_MS)
    day_text = f"CAST({c['run_day']} AS TEXT)" if PG else c["run_day"]
    labels = [
        c["run_day"],
        c["shard"],
        c["workflow"],
        provider,
        model,
        step,
        c["user"],
        c["tenant"],
        c["plan"],
    ]
    key = " || '|' || ".join(f"{x}" if x != c["shard"] else f"CAST({x} AS TEXT)" for x in labels[1:])
    cost_sum = f"CAST(SUM({tokens} * {price}) AS TEXT)" if PG else f"CAST(SUM({tokens} * {price}) AS TEXT)"
    ms_sum = f"CAST(SUM({call_ms}) AS TEXT)"
    _exec(
        f"{with_}INSERT INTO runs_costrollup (workspace_id, run_day, key_hash, shard, call_day, workflow_id,"
        " provider, model, step_id, subject_user, subject_tenant, subject_plan, currency, pricing,"
        " pricing_label, prompt, calls, input_tokens, output_tokens, total_tokens, cached_input_tokens,"
        " reasoning_tokens, duration_ms, cost)"
        f" SELECT {ws}, {c['run_day']}, {_hash(key)}, {c['shard']}, {day_text}, {c['workflow']}, {provider},"
        f" {model}, {step}, {c['user']}, {c['tenant']}, {c['plan']}, 'USD', 'catalog', 'price catalog', '',"
        f" COUNT(*), SUM({inp}), SUM({tokens} - {inp}), SUM({tokens}), 0, 0, {ms_sum}, {cost_sum} FROM {calls}"
        f" GROUP BY {', '.join(labels)}"
    )
    print(
        f"  {workspace.slug}: {count:,} runs in {t_runs:.0f} s, rollups in {time.perf_counter() - t0 - t_runs:.0f} s",
        flush=True,
    )


def _build_all() -> None:
    today = datetime.now(UTC).date()
    print(
        f"building ({connection.vendor}): {', '.join(f'{n:,} runs' for n in SIZES.values())}"
        f" over {DAYS} days, set-wise",
        flush=True,
    )
    for slug, count in SIZES.items():
        workspace = get_or_create_workspace(slug)
        if count >= 100_000 and PG:
            with scale_data.bulk_load(log=lambda text: print(text, flush=True)), transaction.atomic():
                build(workspace, count, today)
        else:
            with transaction.atomic():
                build(workspace, count, today)
    if PG:
        _exec("ANALYZE")
    record = {**_wanted(), "newest": today.isoformat(), "built": datetime.now(UTC).isoformat()}
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    CACHE.write_text(json.dumps(record))
    if PG:
        name = connection.settings_dict["NAME"]
        with connection.cursor() as cursor:
            cursor.execute(f'COMMENT ON DATABASE "{name}" IS %s', [json.dumps(record)])


def _client(workspace: Workspace) -> Client:
    name = f"{workspace.slug}-owner"
    User = get_user_model()
    user = User.objects.filter(username=name).first() or User.objects.create_user(
        name, password="bench-pw-123456"
    )
    add_member(workspace, user, "owner")
    client = Client()
    client.force_login(user)
    return client


def _pages(newest: date) -> dict[str, str]:
    first, last = newest - timedelta(days=29), newest
    span = f"from={first}&to={last}"
    return {
        "30 days (default range)": f"/dashboard/?{span}",
        "30 days, one workflow": f"/dashboard/?{span}&workflow=wf-2",
        "30 days, one model": f"/dashboard/?{span}&model=claude-sonnet-4",
        f"{DAYS} days": f"/dashboard/?from={newest - timedelta(days=DAYS - 1)}&to={last}",
    }


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def _rows(workspace: Workspace) -> str:
    runs = Run.objects.for_workspace(workspace).count()
    counts = [
        RunRollup.objects.filter(workspace=workspace).count(),
        MetricRollup.objects.filter(workspace=workspace).count(),
        CostRollup.objects.filter(workspace=workspace).count(),
    ]
    return f"{runs:,} runs; rollup rows: {counts[0]:,} RunRollup, {counts[1]:,} MetricRollup, {counts[2]:,} CostRollup"


def main() -> int:
    call_command("migrate", verbosity=0)
    if CACHED is None:
        _build_all()
        record = json.loads(CACHE.read_text())
    else:
        record = CACHED
        print(
            f"cached ({connection.vendor}): built {record['built']} (BENCH_DASHBOARD_REBUILD=1 builds again)"
        )
    newest = date.fromisoformat(record["newest"])
    workspaces = {slug: Workspace.objects.get(slug=slug) for slug in SIZES}
    for slug, count in SIZES.items():
        if Run.objects.for_workspace(workspaces[slug]).count() != count:
            raise SystemExit(f"{slug} does not hold {count:,} runs: BENCH_DASHBOARD_REBUILD=1")
    print(
        f"built {DAYS} days ending {newest}, {WORKFLOWS} workflows, {len(MODELS)} models, {SUBJECTS} subjects;"
        " no events (the dashboard reads the rollups only):"
    )
    for slug in SIZES:
        print(f"  {slug}: {_rows(workspaces[slug])}")
    pages = _pages(newest)
    clients = {slug: _client(ws) for slug, ws in workspaces.items()}
    times: dict[str, dict[str, list[float]]] = {s: {p: [] for p in pages} for s in SIZES}
    queries: dict[str, dict[str, int]] = {s: {} for s in SIZES}
    load_before = _load()
    for round_no in range(REPEAT + 2):
        for slug, client in clients.items():
            for name, url in pages.items():
                with CaptureQueriesContext(connection) as captured:
                    t0 = time.perf_counter()
                    response = client.get(url)
                    elapsed = (time.perf_counter() - t0) * 1000
                if response.status_code != 200:
                    raise SystemExit(f"{slug} {url}: HTTP {response.status_code}")
                if round_no >= 2:
                    times[slug][name].append(elapsed)
                    queries[slug][name] = len(captured)
    print(
        f"\ndashboard server time ({connection.vendor}), in-process client, {REPEAT} requests each (ms);"
        f" load average {load_before} before, {_load()} after (2 cores)"
    )
    print(
        f"{'range':26} {'1k median':>10} {'1k p95':>8} {BIG_LABEL + ' median':>10} {BIG_LABEL + ' p95':>8} {'ratio':>6} {'SQL':>4}"
    )
    worst = 0.0
    for name in pages:
        small, big = times["dash-1k"][name], times["dash-1m"][name]
        worst = max(worst, statistics.median(big))
        print(
            f"{name:26} {statistics.median(small):10.1f} {p95(small):8.1f} {statistics.median(big):10.1f}"
            f" {p95(big):8.1f} {statistics.median(big) / statistics.median(small):6.2f}"
            f" {queries['dash-1m'][name]:4}"
        )
    print(
        f"target: < 200 ms at 1,000,000 runs; slowest median at {BIG:,} runs {worst:.1f} ms ({connection.vendor})"
    )
    if PG and os.environ.get("BENCH_DASHBOARD_SQLITE", "1") == "1":
        print("\n--- the same on SQLite ---", flush=True)
        code = subprocess.call([sys.executable, __file__, "--sqlite"], cwd=ROOT)
        if code:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
