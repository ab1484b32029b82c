"""The trace view and the light timeline on big runs: the run page's HTML bytes and server time,
one 100-event timeline fragment, and the span tree's first levels (the roots, then the first page of
the children of a root with a third of the run's events as its child spans), for runs of 10,000,
100,000, 300,002 (100,000 spans) and 1,000,000 events (a third of them span starts, a third span
ends); then each target with the figure it is checked against and "ok" or "MISSED".

Targets (issue 27): a 100-event fragment < 60 KB, the run page of a 10k run < 150 KB, the tree's
first level < 50 ms server time at 100,000 spans.
Environment: BENCH_TRACE_SIZES (default "10000,100000,300002,1000000"), BENCH_PAGES_REPEAT (default 15),
BENCH_PAGES_DB (default: a SQLite file in a temporary directory).

    .venv/bin/python bench/bench_trace.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_pages as bp  # noqa: E402  (sets up Django and the database)
from bench_waterfall import span_body  # noqa: E402

SIZES = [
    int(x) for x in os.environ.get("BENCH_TRACE_SIZES", "10000,100000,300002,1000000").split(",") if x.strip()
]


def main() -> int:
    workspace, client = bp.bench_workspace()
    pages = {}
    size = {}
    for n in SIZES:
        run = bp.build_run(workspace, n, run_id=f"run_trace_{n}", body_of=span_body)
        hx = {"HTTP_HX_REQUEST": "true"}
        mid = n // 2
        pages[n] = {
            "run page": (f"/runs/{run.run_id}/", {}),
            "timeline fragment @mid": (f"/runs/{run.run_id}/timeline/?after={mid}", hx),
            "tree: roots": (f"/runs/{run.run_id}/spans/tree/", hx),
            "tree: children of root": (f"/runs/{run.run_id}/spans/tree/?span=2&depth=2", hx),
            "failed spans": (f"/runs/{run.run_id}/spans/tree/?view=failed", hx),
            "span detail @mid": (f"/runs/{run.run_id}/spans/{mid - mid % 3}/", hx),
        }
        size[n] = {name: len(client.get(url, **h).content) for name, (url, h) in pages[n].items()}
    wall, cpu = bp.measure(client, pages)
    print(f"\nmedian server time of {bp.REPEAT} requests, wall ms (CPU ms), response bytes")
    for n in SIZES:
        spans = _spans(n)
        for name in pages[n]:
            print(
                f"  {n:>9,} events ({spans:>7,} spans)  {name:<24} {wall[n][name]:7.1f} ({cpu[n][name]:5.1f})"
                f"  {size[n][name]:>8,} B"
            )
    return report_targets(wall, cpu, size)


KB = 1000


def _spans(n: int) -> int:
    return (n - 2) // 3 + 1  # the root span, then one span every third event


def report_targets(wall: dict, cpu: dict, size: dict) -> int:
    """Each target of issue 27 beside its figure (the smallest run that has the target's size)."""
    checks = []
    small = min((n for n in SIZES if n >= 10_000), default=None)
    if small is not None:
        checks.append(
            (f"run page of the {small:,}-event run < 150 KB", size[small]["run page"] / KB, 150, "KB")
        )
        checks.append(
            (
                f"100-event timeline fragment ({small:,} events) < 60 KB",
                size[small]["timeline fragment @mid"] / KB,
                60,
                "KB",
            )
        )
    big = min((n for n in SIZES if _spans(n) >= 100_000), default=None)
    if big is not None:
        for name in ("tree: roots", "tree: children of root"):
            checks.append(
                (
                    f"{name} at {_spans(big):,} spans < 50 ms",
                    wall[big][name],
                    50,
                    f"ms server time ({cpu[big][name]:.1f} ms CPU)",
                )
            )
    print("\ntargets (issue 27)")
    missed = 0
    for label, figure, limit, unit in checks:
        ok = figure < limit
        missed += not ok
        print(f"  {'ok    ' if ok else 'MISSED'}  {label:<58} {figure:8.1f} {unit}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
