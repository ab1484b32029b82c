"""Bundle-check benchmark: our ``check_bundle_file`` vs a Node.js verifier of the same file.

    .venv/bin/python bench/bench_bundle_check.py [BUNDLE] [--repeat 3]

Generates ``/tmp/bench_bundle.json`` (bench/gen_bundle.py) when no bundle is given and it
does not exist. Each run is a fresh subprocess, Python and Node alternating so that a
change in the machine's load hits both sides; peak RSS comes from
``resource.getrusage(RUSAGE_CHILDREN)`` of a child that only runs the check (the check's
canonicalizer thread included). Two figures, as the issue asks:

* end to end, as a user runs it: ``manage.py bundle check FILE`` (and ``workbench-verify``)
  against ``node bench/verify.mjs FILE``, whole processes, wall clock (target <= 0.4x);
* in process: the check's own time against the Node verifier's own (target <= 0.35x).

Best of each side and the median of per-pair ratios, plus CPU seconds (user + sys, less
sensitive to a busy machine than wall time), and peak memory / file size (target <= 6x).
Figures only: nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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


def _run_cli(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one whole process, as a user starts it."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, check=False, capture_output=True, cwd=ROOT)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


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
    load_before = os.getloadavg()

    node = shutil.which("node")
    python_runs = []
    node_runs = []
    manage_runs = []
    verify_runs = []
    node_cli_runs = []
    verify_script = Path(sys.executable).parent / "workbench-verify"
    for _ in range(args.repeat):
        python_runs.append(_run_python(args.bundle))
        manage_runs.append(_run_cli([sys.executable, "manage.py", "bundle", "check", str(args.bundle)]))
        if verify_script.exists():
            verify_runs.append(_run_cli([str(verify_script), str(args.bundle)]))
        if node:
            node_runs.append(_run_node(node, args.bundle))
            node_cli_runs.append(_run_cli([node, str(ROOT / "bench" / "verify.mjs"), str(args.bundle)]))
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
            f"median pair {pairs[len(pairs) // 2]:.2f}x, {py_wall / node_wall:.2f}x wall incl. interpreter start"
        )
    else:
        print("node verify       node not found")
    manage_wall = min(r[0] for r in manage_runs)
    manage_cpu = min(r[1] for r in manage_runs)
    print(f"manage.py check   {manage_wall:.3f} s wall, {manage_cpu:.3f} s CPU (whole process)")
    if verify_runs:
        print(
            f"workbench-verify  {min(r[0] for r in verify_runs):.3f} s wall, "
            f"{min(r[1] for r in verify_runs):.3f} s CPU (whole process)"
        )
    if node_cli_runs:
        node_wall = min(r[0] for r in node_cli_runs)
        node_cpu = min(r[1] for r in node_cli_runs)
        pairs = sorted(m[0] / n[0] for m, n in zip(manage_runs, node_cli_runs, strict=True))
        print(f"node process      {node_wall:.3f} s wall, {node_cpu:.3f} s CPU (whole process)")
        print(
            f"end to end        {manage_wall / node_wall:.2f}x Node wall (best of each), median pair "
            f"{pairs[len(pairs) // 2]:.2f}x, {manage_cpu / node_cpu:.2f}x Node CPU (target <= 0.4x)"
        )
    if node_runs:
        print(f"in process        {py_check / node_check:.2f}x Node (target <= 0.35x)")
    print(f"peak memory       {peak_rss / 1e6:.0f} MB = {peak_rss / size:.2f}x file size (target <= 6x)")
    # The machine may be shared: wall ratios hold only on an idle one (CPU ratios are steadier).
    load_after = os.getloadavg()
    print(
        f"load average      {load_before[0]:.2f} before, {load_after[0]:.2f} after "
        f"({os.cpu_count()} CPUs; wall ratios are meaningful only well below that)"
    )


if __name__ == "__main__":
    main()
