"""Concurrent writers over REST: N pipelines append to their own runs at once (issue 29).

    .venv/bin/python bench/bench_writers.py

Starts a cluster of daphne processes (tests/live/cluster.py: a dedicated PostgreSQL database,
dropped after, and a Redis db for the channel layer and rate limits) and, per profile, creates
``WRITERS_PIPELINES`` runs; then every pipeline appends ``WRITERS_APPENDS`` events, one
``POST /api/runs/{id}/events`` at a time, to its own run, all pipelines at once, the requests spread
over the servers round-robin (what a proxy in front of them does). Prints appends/s, p50/p99 of an
append (request to response), errors, and lost events (acknowledged seqs missing from the run, or
runs holding more than was acknowledged), and the PostgreSQL/SQLite throughput ratio when both
profiles ran (SQLite: the embedded profile, one daphne).

Environment: WRITERS_PIPELINES (200), WRITERS_APPENDS (10), WRITERS_SERVERS (4, at most 16),
WRITERS_PROFILES (postgres,sqlite), WRITERS_REDIS_DB (13), WRITERS_POOL (both: the PostgreSQL
profile with the connection pool of the scaled profile and without it, then the ratio; on or off
for one). Figures only: nothing is asserted.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bench.live_server import tool_event  # noqa: E402
from tests.conftest import LINEAR_WORKFLOW  # noqa: E402
from tests.live.cluster import Cluster  # noqa: E402

PIPELINES = int(os.environ.get("WRITERS_PIPELINES", "200"))
APPENDS = int(os.environ.get("WRITERS_APPENDS", "10"))
SERVERS = min(16, int(os.environ.get("WRITERS_SERVERS", "4")))
PROFILES = [p for p in os.environ.get("WRITERS_PROFILES", "postgres,sqlite").split(",") if p]
REDIS_DB = int(os.environ.get("WRITERS_REDIS_DB", "13"))
# Requests in flight at once across the servers, as a proxy in front of them caps them (maxconn):
# Django's ASGI handler runs each request in a thread of its own with its own database
# connection, so 200 in flight would need 200 PostgreSQL connections (the server allows 100).
INFLIGHT = int(os.environ.get("WRITERS_INFLIGHT", "32"))


POOL = os.environ.get("WRITERS_POOL", "both")
POOLS = ["on", "off"] if POOL == "both" else [POOL]


class _Cluster(Cluster):
    """The servers take their PostgreSQL connections from a pool per process (``?pool=on``, what
    scripts/scaled.py sets; pool "off": a new connection per request). Not persistent connections
    (``conn_max_age``): one per request thread, they pile up to the server's limit."""

    def __init__(self, *args, pool: str = "on", **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.pool = pool

    @property
    def database_url(self) -> str:
        query = "?pool=on" if self.pool == "on" else ""
        return super().database_url.replace("?conn_max_age=60", query)


_RUNS = """
import json, sys
from runs import actions
from runs.actions.workspaces import get_or_create_workspace
spec = json.loads(sys.argv[-1])
ws = get_or_create_workspace("acme")
for i in range(spec["n"]):
    actions.do_start_run(workspace=ws, workflow=spec["workflow"], actor="user:seed", run_id=f"run_w{i:04d}")
"""

_COUNTS = """
from django.db.models import Count, Max
from runs.models import Event, Run
rows = Run.unscoped.filter(run_id__startswith="run_w").annotate(n=Count("events"), top=Max("events__seq"))
import json
print("COUNTS " + json.dumps({r.run_id: [r.n, r.top, r.last_seq] for r in rows}))
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


async def pipelines(cluster: Cluster, token: str, servers: int) -> dict:
    latencies: list[float] = []
    acked: dict[str, set[int]] = {}
    errors: list[str] = []

    async def pipeline(http: httpx.AsyncClient, p: int) -> None:
        run_id = f"run_w{p:04d}"
        acked[run_id] = set()
        for i in range(APPENDS):
            server = (p + i) % servers
            started = time.perf_counter()
            try:
                response = await http.post(
                    cluster.url(server, f"/api/runs/{run_id}/events"),
                    json={"events": [tool_event(run_id, i)]},
                    headers={"Authorization": f"Bearer {token}"},
                )
            except httpx.HTTPError as exc:
                errors.append(f"{type(exc).__name__}")
                continue
            latencies.append(time.perf_counter() - started)
            if response.status_code != 200:
                errors.append(f"{response.status_code} {response.text[:120]}")
                continue
            acked[run_id].update(response.json()["seqs"])

    limits = httpx.Limits(max_connections=INFLIGHT, max_keepalive_connections=INFLIGHT)
    async with httpx.AsyncClient(timeout=120, limits=limits) as http:
        began = time.perf_counter()
        await asyncio.gather(*(pipeline(http, p) for p in range(PIPELINES)))
        seconds = time.perf_counter() - began
    return {"latencies": latencies, "acked": acked, "errors": errors, "seconds": seconds}


def run_profile(name: str, pool: str = "on") -> dict | None:
    if name == "postgres":
        cluster = _Cluster(database="postgres", redis_db=REDIS_DB, servers=SERVERS, pool=pool)
    else:
        cluster = _Cluster(database="sqlite", servers=1)
    with cluster:
        seed = cluster.seed(workflow=LINEAR_WORKFLOW, run_id="run_seed")
        spec = json.dumps({"n": PIPELINES, "workflow": LINEAR_WORKFLOW})
        subprocess.run(
            [sys.executable, "-c", "import django; django.setup()\n" + _RUNS, spec],
            cwd=ROOT, env=cluster.env(), check=True, capture_output=True, timeout=600,
        )  # fmt: skip
        result = asyncio.run(pipelines(cluster, seed["token"], cluster.n_servers))
        appends = len(result["latencies"])
        label = (
            f"PostgreSQL (pool {pool}), {cluster.n_servers} daphne + Redis"
            if name == "postgres"
            else "SQLite, 1 daphne"
        )
        rate = appends / result["seconds"]
        print(
            f"{label}: {PIPELINES} pipelines x {APPENDS} appends ({INFLIGHT} in flight at most):"
            f" {rate:.0f} appends/s, p50 {percentile(result['latencies'], 0.5) * 1000:.0f} ms,"
            f" p99 {percentile(result['latencies'], 0.99) * 1000:.0f} ms, errors {len(result['errors'])}",
            flush=True,
        )
        for error in result["errors"][:5]:
            print(f"  error: {error}")
        time.sleep(2)
        out = ""
        for _ in range(10):  # the servers' idle connections may hold the server's last slots a while
            try:
                out = cluster.python(_COUNTS, timeout=120)
                break
            except RuntimeError as exc:
                print(f"  counting the stored events failed, retrying: {str(exc)[-120:]}", flush=True)
                time.sleep(5)
        counts = json.loads(next(line for line in out.splitlines() if line.startswith("COUNTS "))[7:])
    lost = 0
    for run_id, seqs in result["acked"].items():
        stored, top, _ = counts.get(run_id, [0, 0, 0])
        lost += sum(1 for s in seqs if s > (top or 0)) + max(0, len(seqs) - stored)
    stored_events = sum(v[0] for v in counts.values())
    print(f"  lost {lost}; {stored_events} events stored in the {len(counts)} runs", flush=True)
    return {"rate": rate, "p99": percentile(result["latencies"], 0.99)}


def main() -> int:
    results: dict[str, dict | None] = {}
    for name in PROFILES:
        if name == "postgres":
            for pool in POOLS:
                results[f"postgres-pool-{pool}"] = run_profile(name, pool)
        else:
            results[name] = run_profile(name)
    pooled, unpooled = results.get("postgres-pool-on"), results.get("postgres-pool-off")
    if pooled and unpooled:
        print(
            f"PostgreSQL pool on / off: appends/s {pooled['rate']:.0f} / {unpooled['rate']:.0f}"
            f" ({pooled['rate'] / unpooled['rate']:.2f}x), p99 {pooled['p99'] * 1000:.0f} ms /"
            f" {unpooled['p99'] * 1000:.0f} ms"
        )
    pg, lite = pooled or unpooled, results.get("sqlite")
    if pg and lite:
        print(f"PostgreSQL / SQLite appends: {pg['rate'] / lite['rate']:.2f}x (target >= 0.6x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
