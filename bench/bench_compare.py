"""Server time and peak memory of the compare page (/compare/) for two runs of N events each
(default 10,000): the first page, a page in the middle (?pos=), and the jump to the first divergence
(?at=divergence), median wall and CPU (thread) time, with the divergence placed near the end (the search reads almost both whole traces:
the worst case within its budget). Cold: the cache dropped before the request (the search for the
divergence and the usage totals are computed); warm: a later page of the same comparison. Pairs over
50,000 events leave totals, steps and artifacts to ``?part=summary`` (its own row).

Runs are built like bench_pages (bulk-inserted events, NOT through the actions). Memory is the peak
of Python allocations (tracemalloc) during one request, beside the size of the two traces' bodies.

Environment: BENCH_COMPARE_SIZES (default "10000"), BENCH_COMPARE_REPEAT (default 7),
BENCH_PAGES_DB (as bench_pages).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_pages  # noqa: E402  (sets up Django on its own temporary database)
from django.core.cache import cache  # noqa: E402
from django.db.models import Sum  # noqa: E402
from django.db.models.functions import Length  # noqa: E402
from django.test import Client  # noqa: E402

from runs.models import Event  # noqa: E402
from runs.selectors.compare import SCAN_BUDGET  # noqa: E402

SIZES = [int(x) for x in os.environ.get("BENCH_COMPARE_SIZES", "10000").split(",") if x.strip()]
REPEAT = int(os.environ.get("BENCH_COMPARE_REPEAT", "7"))


def changed_near_end(n: int):
    """Run B: the same events as A, except one tool result at 90% of the trace."""
    at = n * 9 // 10
    at -= (at % 4) - 2  # a tool_call (seq % 4 == 2)

    def body_of(run_id: str, seq: int):
        etype, ts, step, corr, body = bench_pages.event_body(run_id, seq)
        if seq == at:
            body = {**body, "result": {"hits": -1}}
        return etype, ts, step, corr, body

    return at, body_of


def timed(client: Client, url: str, *, cold: bool) -> tuple[float, float, float]:
    """Wall ms, CPU ms and peak MB of one request; ``cold``: with the cached search and usage dropped."""
    if cold:
        cache.clear()
    t0, c0 = time.perf_counter(), time.thread_time()
    response = client.get(url)
    wall, cpu = (time.perf_counter() - t0) * 1000, (time.thread_time() - c0) * 1000
    if response.status_code != 200:
        raise SystemExit(f"{url}: HTTP {response.status_code}")
    if cold:
        cache.clear()
    tracemalloc.start()
    client.get(url)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return wall, cpu, peak / 2**20


def main() -> int:
    workspace, client = bench_pages.bench_workspace()
    for n in SIZES:
        a = bench_pages.build_run(workspace, n, run_id=f"run_cmp_a_{n}")
        at, body_of = changed_near_end(n)
        b = bench_pages.build_run(workspace, n, run_id=f"run_cmp_b_{n}", body_of=body_of)
        trace_mb = Event.objects.filter(run__in=[a, b]).aggregate(s=Sum(Length("body")))["s"] / 2**20
        base = f"/compare/?a={a.run_id}&b={b.run_id}"
        pages = {
            "first page (+ divergence search)": base,
            "page in the middle (?pos=)": f"{base}&pos={n // 2}.{n // 2}",
            "jump to the divergence": f"{base}&at=divergence",
            "totals, steps, artifacts (?part=)": f"{base}&part=summary",
        }
        page = client.get(pages["jump to the divergence"]).content.decode()
        if at <= SCAN_BUDGET:
            assert 'id="first-divergence"' in page and f">{at}</a>" in page, "the divergence was not found"
        else:  # beyond one request's search budget: the page says where the search stopped
            assert "No difference in the events read so far" in page, "the search did not stop at its budget"
        print(
            f"\n{n:,} events per run ({trace_mb:.1f} MB of event bodies in the pair), divergence at seq {at:,}"
        )
        print(f"{'page':<36}{'cold ms (CPU)':>16}{'peak MB':>9}{'warm ms (CPU)':>16}{'peak MB':>9}")
        for name, url in pages.items():
            cells = ""
            for cold in (True, False):
                walls, cpus, peaks = zip(*(timed(client, url, cold=cold) for _ in range(REPEAT)), strict=True)
                cells += (
                    f"{statistics.median(walls):>8.1f} ({statistics.median(cpus):>5.1f}){max(peaks):>9.1f}"
                )
            print(f"{name:<36}{cells}")
    print("cold: the first view of a pair (divergence search and usage totals computed); warm: later pages")
    print("note: event rows were bulk-inserted by this bench, bypassing runs.actions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
