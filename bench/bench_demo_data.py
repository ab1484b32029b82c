"""`manage.py demo_data` (what `make run` does before serving): fresh and again (nothing to do).

Each round migrates a new SQLite database in a temporary folder (untimed), then times the command
on it twice: the first builds the job-search runs, imports the 10k-event nightly batch bundle and
publishes the read-only public demo; the second finds them and only prints the login.

Target: a fresh load in a few seconds, a repeated one as fast as any manage.py start.

Env: DEMO_BENCH_RUNS (3).
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from bench_startup import sqlite_env, timed

RUNS = int(os.environ.get("DEMO_BENCH_RUNS", "3"))


def main() -> int:
    fresh, again = [], []
    for _ in range(RUNS):
        tmp = Path(tempfile.mkdtemp(prefix="wb-demo-"))
        try:
            env = sqlite_env(tmp)
            if timed(["migrate", "--noinput", "-v", "0"], env)[2]:
                print("migrate failed")
                return 1
            for samples in (fresh, again):
                wall, cpu, code = timed(["demo_data"], env)
                if code:
                    print("demo_data failed")
                    return 1
                samples.append((wall, cpu))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"manage.py demo_data on SQLite, median of {RUNS} runs")
    for label, samples in (("fresh database", fresh), ("again (nothing to do)", again)):
        wall = statistics.median(s[0] for s in samples)
        cpu = statistics.median(s[1] for s in samples)
        print(f"  {label:24s} {wall:6.2f}s wall {cpu:6.2f}s cpu")
    print(f"  (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs while measuring)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
