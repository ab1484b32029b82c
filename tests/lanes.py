"""Which files of the SQLite suite `make test` runs in its second lane.

`make test` runs two lanes at once (the Makefile's test-lanes): lane 1 the SQLite suite, lane 2 the
PostgreSQL phase, then the Chromium phase. The SQLite suite is the longer of the two, so lane 2 ends
with a third phase, test-sqlite-b: a share of the SQLite suite's files (marker ``lane2``), which
lane 1 then leaves out (test-sqlite-a). Which files: from tests/durations.json (each file's test
time, summed from a junit report of the SQLite suite by `scripts/test_durations.py`), the slowest
files up to SECOND_LANE_SHARE of the recorded time, skipping any file over half of that share (one
long file at a lane's end would leave a worker idle). A file not in the record stays in lane 1.
Outside `make test` (test-sqlite alone, SERIAL=1, a file named by hand) every test runs.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DURATIONS = REPO / "tests" / "durations.json"
# Fresh-clone CI with 14 %: lane 1 (SQLite a) 1,043 s, lane 2 (PostgreSQL 467, Chromium 621, SQLite b
# 128) 1,216 s: lane 2 ended last, so it now takes about a third of that share.
SECOND_LANE_SHARE = 0.05


@cache
def second_lane_files() -> frozenset[str]:
    try:
        durations: dict[str, float] = json.loads(DURATIONS.read_text())
    except FileNotFoundError:
        return frozenset()
    budget = SECOND_LANE_SHARE * sum(durations.values())
    chosen: set[str] = set()
    total = 0.0
    for path, seconds in sorted(durations.items(), key=lambda kv: (-kv[1], kv[0])):
        if seconds > budget / 2 or total + seconds > budget:
            continue
        chosen.add(path)
        total += seconds
    return frozenset(chosen)
