"""Task latency: enqueue to start, p50 / p99, per profile, through real `manage.py worker` processes.

For each profile (embedded: a SQLite file; scaled: a PostgreSQL database of its own, with 2
workers), one worker process per slot with its default flags (4 threads, 0.5 s poll of an idle
thread) runs ``runs.background.worker.ping``; once every worker holds its lease, a process enqueues BENCH_TASKS_N tasks (default
200) one every ~20 ms, and reads each row's ``started_at - enqueued_at`` when all have run.

Environment: BENCH_TASKS_N, BENCH_TASKS_PROFILES (default "embedded,scaled"). Figures only.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.live.cluster import Cluster  # noqa: E402

N = int(os.environ.get("BENCH_TASKS_N", "200"))
PROFILES = os.environ.get("BENCH_TASKS_PROFILES", "embedded,scaled").split(",")

PROBE = r"""
import json, random, time
from django_tasks_db.models import DBTaskResult
from runs.background.worker import ping
from runs.models import WorkerLease
deadline = time.monotonic() + 60
while WorkerLease.objects.count() < WORKERS:  # the workers are up
    assert time.monotonic() < deadline, "no worker started"
    time.sleep(0.2)
time.sleep(1)
ids = []
for i in range(N):
    ids.append(ping.enqueue().id)
    time.sleep(random.uniform(0.005, 0.035))
deadline = time.monotonic() + 120
while DBTaskResult.objects.filter(id__in=ids, status="SUCCESSFUL").count() < len(ids):
    assert time.monotonic() < deadline, "tasks did not run"
    time.sleep(0.2)
rows = DBTaskResult.objects.filter(id__in=ids).values_list("enqueued_at", "started_at")
print("WAITS " + json.dumps([(s - e).total_seconds() for e, s in rows]))
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


def measure(profile: str) -> None:
    database, workers = ("sqlite", 1) if profile == "embedded" else ("postgres", 2)
    with Cluster(database=database, servers=0, workers=workers) as cluster:
        out = cluster.python(f"N = {N}\nWORKERS = {workers}\n" + PROBE, timeout=300)
    line = next(line for line in out.splitlines() if line.startswith("WAITS "))

    waits = json.loads(line[6:])
    print(
        f"{profile:9s} ({workers} worker process(es) x 4 threads, {database}): enqueue -> start over "
        f"{len(waits)} tasks: p50 {statistics.median(waits) * 1e3:.0f} ms, "
        f"p99 {percentile(waits, 0.99) * 1e3:.0f} ms, max {max(waits) * 1e3:.0f} ms"
    )


def main() -> None:
    random.seed(47)
    for profile in PROFILES:
        measure(profile.strip())


if __name__ == "__main__":
    main()
