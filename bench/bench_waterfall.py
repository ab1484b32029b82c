"""Server time of the run page with its span waterfall, for runs of 10,000 and 100,000 events of
which a third are span starts (a third span ends, a third tool calls), next to a run of the same
size without spans. Also the htmx window of spans in the middle of the run.

The runs are bulk-inserted like bench_pages.py does (not through the actions: a bench of page reads).
Environment: BENCH_WATERFALL_SIZES (default "10000,100000"), BENCH_PAGES_REPEAT (default 15),
BENCH_PAGES_DB (default: a SQLite file in a temporary directory).

    .venv/bin/python bench/bench_waterfall.py
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_pages as bp  # noqa: E402  (sets up Django and the database)

SIZES = [int(x) for x in os.environ.get("BENCH_WATERFALL_SIZES", "10000,100000").split(",") if x.strip()]


def span_body(run_id: str, seq: int):
    ts = f"2026-01-01T{(seq // 3_600_000) % 24:02d}:{(seq // 60_000) % 60:02d}:{(seq // 1000) % 60:02d}.{seq % 1000:03d}Z"
    base = {"id": f"evt_w{seq}", "runId": run_id, "ts": ts, "stepId": "parse"}
    if seq == 2:
        body = {**base, "type": "span_started", "spanId": "root", "name": "pipeline"}
    else:
        k = (seq - 3) % 3
        if k == 0:
            body = {
                **base,
                "type": "span_started",
                "spanId": f"s{seq}",
                "parentSpanId": "root",
                "name": f"call {seq}",
            }
        elif k == 1:
            body = {**base, "type": "tool_call", "name": "search", "args": {"q": seq}}
        else:
            failed = (seq // 3) % 50 == 0
            body = {
                **base,
                "type": "span_ended",
                "spanId": f"s{seq - 2}",
                "status": "error" if failed else "ok",
            }
            if failed:
                body["error"] = {"message": "timeout"}
    return body["type"], ts, "parse", "", body


def main() -> int:
    bp.call_command("migrate", verbosity=0)
    workspace = bp.get_or_create_workspace("bench")
    user = bp.get_user_model().objects.create_user("bench", password="bench-password-123")
    bp.add_member(workspace, user, "owner")
    client = bp.Client()
    client.force_login(user)
    client.get("/runs/")
    pages = {}
    for n in SIZES:
        spans = bp.build_run(workspace, n, run_id=f"run_spans_{n}", body_of=span_body)
        plain = bp.build_run(workspace, n, run_id=f"run_plain_{n}")
        mid = n // 2
        hx = {"HTTP_HX_REQUEST": "true"}
        pages[n] = {
            "detail, no spans": (f"/runs/{plain.run_id}/", {}),
            "detail with waterfall": (f"/runs/{spans.run_id}/?view=waterfall", {}),
            "spans window @mid (htmx)": (f"/runs/{spans.run_id}/spans/?after={mid}", hx),
        }
        html = client.get(f"/runs/{spans.run_id}/?view=waterfall").content.decode()
        assert html.count('class="span-row') == 200, "the page shows one window of 200 spans"
    wall, cpu = bp.measure(client, pages)
    print(f"\nmedian server time of {bp.REPEAT} requests, wall ms (CPU ms)")
    for n in SIZES:
        for name in pages[n]:
            print(f"  {n:>7,} events  {name:<28} {wall[n][name]:7.1f} ({cpu[n][name]:.1f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
