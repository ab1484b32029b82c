"""Bundle-check benchmark: our ``check_bundle_file`` vs a Node.js verifier of the same file.

    .venv/bin/python bench/bench_bundle_check.py [BUNDLE] [--repeat 3]

Generates ``/tmp/bench_bundle.json`` (bench/gen_bundle.py) when no bundle is given and it
does not exist. Each run is a fresh subprocess, Python and Node alternating so that a
change in the machine's load hits both sides; peak RSS comes from
``resource.getrusage(RUSAGE_CHILDREN)`` of a child that only runs the check (the check's
canonicalizer thread included). Prints the best wall time of each side, the ratio of the
bests and the median of the per-pair ratios (target <= 0.4x Node), and peak memory / file
size (target <= 6x). Figures only: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_BUNDLE = Path("/tmp/bench_bundle.json")

_CHILD = """
import sys, time
sys.path.insert(0, sys.argv[2])
from runs.protocol.bundle import check_bundle_file
t = time.perf_counter()
result = check_bundle_file(sys.argv[1])
elapsed = time.perf_counter() - t
print(f"{elapsed} {result.ok} {result.code} {result.integrity}")
"""


def _run_python(bundle: Path) -> tuple[float, float, str]:
    """(wall seconds incl. interpreter start, check seconds, peak RSS bytes) of one child."""
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(bundle), str(ROOT)], check=True, capture_output=True, text=True
    ).stdout.split()
    wall = time.perf_counter() - started
    return wall, float(out[0]), " ".join(out[1:])


def _run_node(node: str, bundle: Path) -> tuple[float, float, str]:
    started = time.perf_counter()
    out = subprocess.run(
        [node, str(ROOT / "bench" / "verify.mjs"), str(bundle)], check=True, capture_output=True, text=True
    ).stdout
    wall = time.perf_counter() - started
    report = json.loads(out)
    return wall, report["seconds"], report["integrity"]


def _python_peak_rss(bundle: Path) -> int:
    """Peak RSS in bytes of one more check, in a child of a child (so no Node run is counted)."""
    probe = (
        "import resource, subprocess, sys; "
        f"subprocess.run([sys.executable, '-c', {_CHILD!r}, {str(bundle)!r}, {str(ROOT)!r}], check=True, "
        "capture_output=True); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)"
    )
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True).stdout
    return int(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", nargs="?", type=Path, default=DEFAULT_BUNDLE)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not args.bundle.exists():
        subprocess.run(
            [sys.executable, str(ROOT / "bench" / "gen_bundle.py"), "--out", str(args.bundle)], check=True
        )
    size = args.bundle.stat().st_size

    node = shutil.which("node")
    python_runs = []
    node_runs = []
    for _ in range(args.repeat):
        python_runs.append(_run_python(args.bundle))
        if node:
            node_runs.append(_run_node(node, args.bundle))
    # ru_maxrss of RUSAGE_CHILDREN is the largest child so far (KiB on Linux). The Node children
    # count too, so take Python's own peak from a last run on its own.
    peak_rss = _python_peak_rss(args.bundle)

    py_wall = min(r[0] for r in python_runs)
    py_check = min(r[1] for r in python_runs)
    print(f"bundle            {args.bundle} ({size / 1e6:.1f} MB)")
    print(
        f"python check      {py_check:.3f} s in-process, {py_wall:.3f} s with interpreter start  [{python_runs[0][2]}]"
    )
    if node_runs:
        node_wall = min(r[0] for r in node_runs)
        node_check = min(r[1] for r in node_runs)
        print(
            f"node verify       {node_check:.3f} s in-process, {node_wall:.3f} s with node start  [{node_runs[0][2]}]"
        )
        pairs = sorted(p[1] / n[1] for p, n in zip(python_runs, node_runs, strict=True))
        print(
            f"ratio             {py_check / node_check:.2f}x Node in-process (best of each), "
            f"median pair {pairs[len(pairs) // 2]:.2f}x, {py_wall / node_wall:.2f}x wall (target <= 0.4x)"
        )
    else:
        print("node verify       node not found")
    print(f"peak memory       {peak_rss / 1e6:.0f} MB = {peak_rss / size:.2f}x file size (target <= 6x)")


if __name__ == "__main__":
    main()
