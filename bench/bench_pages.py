"""Server time to render the run detail page and timeline pages for runs of 1,000 / 100,000 / 1,000,000
events (in-process Django test Client, median of several requests), and the ratio largest/smallest.

Target: the detail page and a timeline page of the 1,000,000-event run within 1.5x of the 1,000-event
run, and under 150 ms.

The big runs are made FAST, NOT THROUGH THE ACTIONS: the run is started through runs.actions (so its
projection is real), then Event rows are bulk-inserted with executemany and the run's counters
(last_seq, event_count) are set to match. The pages only read the projection and keyset pages of
events, so this is enough to time them; it is not a valid run to fold (the bench says so).

Environment: BENCH_PAGES_SIZES (default "1000,100000,1000000"), BENCH_PAGES_REPEAT (default 15),
BENCH_PAGES_DB (default: a SQLite file in a temporary directory; a postgres:// URL works as well).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SIZES = [int(x) for x in os.environ.get("BENCH_PAGES_SIZES", "1000,100000,1000000").split(",") if x.strip()]
REPEAT = int(os.environ.get("BENCH_PAGES_REPEAT", "15"))
TMP = Path(tempfile.mkdtemp(prefix="bench_pages_"))
os.environ["DATABASE_URL"] = os.environ.get("BENCH_PAGES_DB") or f"sqlite:///{TMP / 'pages.sqlite3'}"
os.environ.setdefault("WORKBENCH_VAR_DIR", str(TMP))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
os.environ.setdefault("DEBUG", "0")
os.environ.setdefault("SECURE_SSL_REDIRECT", "0")  # production settings, served over plain HTTP here
os.environ.setdefault("SECRET_KEY", "bench-pages-not-secret-" + "x" * 40)
os.environ.setdefault("ALLOWED_HOSTS", "testserver")

import django  # noqa: E402

django.setup()

import orjson  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.test import Client  # noqa: E402
from django.utils import timezone  # noqa: E402

from runs import actions  # noqa: E402
from runs.actions.workspaces import add_member, get_or_create_workspace  # noqa: E402
from runs.engine import commands as c  # noqa: E402
from runs.models import Run, span_ref_of  # noqa: E402

WORKFLOW = {
    "id": "wf-bench",
    "version": 1,
    "title": "Bench workflow",
    "steps": [
        {"id": "parse", "gatePolicy": "AUTO"},
        {"id": "work", "gatePolicy": "AUTO"},
        {"id": "review", "gatePolicy": "PAUSE_BEFORE"},
    ],
    "edges": [{"id": "e1", "from": "parse", "to": "work"}, {"id": "e2", "from": "work", "to": "review"}],
}


def event_body(run_id: str, seq: int) -> tuple[str, str, str, str, dict]:
    ts = f"2026-01-01T{(seq // 3_600_000) % 24:02d}:{(seq // 60_000) % 60:02d}:{(seq // 1000) % 60:02d}.{seq % 1000:03d}Z"
    kind = seq % 4
    if kind == 0:
        body = {
            "id": f"evt_b{seq}",
            "runId": run_id,
            "ts": ts,
            "type": "model_io",
            "direction": "response",
            "provider": "anthropic",
            "model": "claude-haiku-4-5",
            "usage": {"inputTokens": 120, "outputTokens": 30, "totalTokens": 150},
            "cost": {"amount": 0.0012, "currency": "USD"},
            "durationMs": 310,
            "stepId": "work",
            "correlationId": f"c{seq // 4}",
        }
    elif kind == 1:
        body = {
            "id": f"evt_b{seq}",
            "runId": run_id,
            "ts": ts,
            "type": "model_io",
            "direction": "stream_chunk",
            "payload": {"delta": f"token {seq} "},
            "stepId": "work",
            "correlationId": f"s{seq // 40}",
        }
    elif kind == 2:
        body = {
            "id": f"evt_b{seq}",
            "runId": run_id,
            "ts": ts,
            "type": "tool_call",
            "name": "search",
            "args": {"q": f"query {seq}"},
            "result": {"hits": seq % 7},
            "stepId": "work",
        }
    else:
        body = {"id": f"evt_b{seq}", "runId": run_id, "ts": ts, "type": "annotation", "text": f"note {seq}"}
    return body["type"], ts, body.get("stepId", ""), body.get("correlationId", ""), body


def build_run(workspace, n: int, *, run_id: str | None = None, body_of=None) -> Run:
    """A run of ``n`` events (``body_of(run_id, seq)`` makes each one; default ``event_body``)."""
    run_id = run_id or f"run_bench_{n}"
    body_of = body_of or event_body
    actions.do_start_run(workspace=workspace, workflow=WORKFLOW, actor="bench", run_id=run_id, tags=["bench"])
    result = actions.do_command(
        workspace=workspace, run_id=run_id, command=c.BeginStep(step_id="parse"), actor="bench"
    )
    start = result.last_seq + 1
    run_pk = Run.objects.by_run_id(workspace, run_id).get().pk  # runs_event.run_id holds the surrogate key
    now = timezone.now()
    sql = (
        "INSERT INTO runs_event (run_id, seq, event_id, type, ts, step_id, correlation_id, body, actor, recorded_at,"
        " span_ref) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
    )
    batch = 20_000
    seq = start
    last = n  # the run ends with exactly n events
    t0 = time.perf_counter()
    with transaction.atomic(), connection.cursor() as cursor:
        while seq <= last:
            rows = []
            for s in range(seq, min(last, seq + batch - 1) + 1):
                etype, ts, step, corr, body = body_of(run_id, s)
                rows.append(
                    (
                        run_pk,
                        s,
                        body["id"],
                        etype,
                        ts,
                        step,
                        corr,
                        orjson.dumps(body).decode(),
                        "bench",
                        now,
                        span_ref_of(body),  # the trace view's index key, as the append path writes it
                    )
                )
            cursor.executemany(sql, rows)
            seq += batch
    Run.objects.filter(pk=run_pk).update(last_seq=last, event_count=last, revision=last)
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    print(
        f"  built {run_id}: {last} events in {time.perf_counter() - t0:.1f} s (bulk insert, bypassing actions)",
        flush=True,
    )
    return Run.objects.get(pk=run_pk)


def measure(client: Client, pages_by_size: dict[int, dict[str, tuple[str, dict]]]) -> tuple[dict, dict]:
    """Median wall and CPU (thread) time per page, sizes interleaved request by request so that load
    from other processes on the machine hits every size alike."""
    wall: dict[int, dict[str, list[float]]] = {n: {k: [] for k in p} for n, p in pages_by_size.items()}
    cpu: dict[int, dict[str, list[float]]] = {n: {k: [] for k in p} for n, p in pages_by_size.items()}
    for round_no in range(REPEAT + 2):
        for n, pages in pages_by_size.items():
            for name, (url, headers) in pages.items():
                w0, c0 = time.perf_counter(), time.thread_time()
                response = client.get(url, **headers)
                w1, c1 = time.perf_counter(), time.thread_time()
                if response.status_code != 200:
                    raise SystemExit(f"{url}: HTTP {response.status_code}")
                if round_no >= 2:  # two warm-up rounds
                    wall[n][name].append((w1 - w0) * 1000)
                    cpu[n][name].append((c1 - c0) * 1000)
    med = lambda d: {n: {k: statistics.median(v) for k, v in p.items()} for n, p in d.items()}  # noqa: E731
    return med(wall), med(cpu)


def bench_workspace() -> tuple[object, Client]:
    """Migrate, make workspace "bench" with an owner, and a test Client signed in as that owner."""
    print(f"database: {connection.vendor} ({os.environ['DATABASE_URL'].split('@')[-1]})")
    call_command("migrate", verbosity=0)
    workspace = get_or_create_workspace("bench")
    user = get_user_model().objects.create_user("bench", password="bench-password-123")
    add_member(workspace, user, "owner")
    client = Client()
    client.force_login(user)
    client.get("/runs/")
    return workspace, client


def main() -> int:
    workspace, client = bench_workspace()
    pages_by_size: dict[int, dict[str, tuple[str, dict]]] = {}
    for n in SIZES:
        run = build_run(workspace, n)
        mid = run.last_seq // 2
        hx = {"HTTP_HX_REQUEST": "true"}
        pages_by_size[n] = {
            "detail": (f"/runs/{run.run_id}/", {}),
            "detail deep link ?at=mid": (f"/runs/{run.run_id}/?at={mid}", {}),
            "timeline@mid": (f"/runs/{run.run_id}/timeline/?after={mid}", hx),
            "timeline@latest": (f"/runs/{run.run_id}/timeline/?before={run.last_seq + 1}", hx),
            "timeline type=tool_call@mid": (f"/runs/{run.run_id}/timeline/?type=tool_call&after={mid}", hx),
            "timeline step=work@mid": (f"/runs/{run.run_id}/timeline/?step=work&after={mid}", hx),
        }
    results, cpu = measure(client, pages_by_size)
    small, large = min(results), max(results)
    print(
        f"\nmedian server time of {REPEAT} requests, wall ms (CPU ms); ratio = {large:,} events / {small:,} events"
    )
    names = list(results[small])
    print(f"{'page':<30}" + "".join(f"{n:>18,}" for n in sorted(results)) + f"{'ratio':>9}")
    worst_ratio = 0.0
    worst_ms = 0.0
    for name in names:
        ratio = results[large][name] / results[small][name]
        worst_ratio = max(worst_ratio, ratio)
        worst_ms = max(worst_ms, results[large][name])
        cells = "".join(f"{results[n][name]:>10.1f} ({cpu[n][name]:>5.1f})" for n in sorted(results))
        print(f"{name:<30}" + cells + f"{ratio:>9.2f}")
    ok = worst_ratio <= 1.5 and worst_ms < 150
    print(
        f"\ntarget (<= 1.5x and < 150 ms at {large:,}): {'met' if ok else 'NOT met'} (worst ratio {worst_ratio:.2f}, worst {worst_ms:.1f} ms)"
    )
    print("note: event rows of the big runs were bulk-inserted by this bench, bypassing runs.actions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
