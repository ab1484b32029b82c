"""A real daphne importing a large bundle over REST: does its memory grow with the body?

    .venv/bin/python bench/bench_upload.py [--events 60000,245000] [--postgres]

For each size: a fresh server (tests/live/cluster.py: one daphne on loopback, SQLite in a temp
dir, or a dedicated PostgreSQL database with --postgres), a bundle generated once to
``var/bench/import_<N>.json`` (bench/bench_import.py's files: bench/gen_bundle.py, ~0.9 KB per
event), posted with ``Content-Length`` from the file in 64 KB pieces (httpx streams it: the client
holds none of it) to ``POST /api/bundles``. Prints the server's resident memory (``VmRSS`` and
the high-water mark ``VmHWM`` from /proc/<pid>/status) after start-up and a first request, after
the ``202`` (the body received by daphne and copied to var/imports), and when the background job
(a ``manage.py worker`` process beside the server) has stored every event; the upload's and the import's
times. ``WORKBENCH_MAX_BODY_BYTES`` stays at 25 MiB: the bundle passes on its own limit
(``WORKBENCH_MAX_BUNDLE_BYTES``). With ``--old-limit`` the body limit is raised to 8 GiB instead,
for a checkout from before the bundle limit existed (the comparison figures). Figures only.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bench.bench_import import bundle_of  # noqa: E402
from tests.conftest import LINEAR_WORKFLOW  # noqa: E402
from tests.live.cluster import Cluster  # noqa: E402

MB = 1024 * 1024


def memory(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of a process, in bytes."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            out[name] = int(value.split()[0]) * 1024
    return out


def _chunks(path: Path, size: int = 64 * 1024):
    with path.open("rb") as f:
        while chunk := f.read(size):
            yield chunk


def measure(path: Path, *, postgres: bool, old_limit: bool) -> dict:
    size = path.stat().st_size
    env: dict[str, str] = {}  # the job runs in a `manage.py worker` process beside the server
    if old_limit:
        env["WORKBENCH_MAX_BODY_BYTES"] = str(8 * 1024**3)
    with Cluster(
        database="postgres" if postgres else "sqlite", servers=1, workers=1, extra_env=env
    ) as cluster:
        seed = cluster.seed(workflow=LINEAR_WORKFLOW)
        pid = cluster.procs[0].pid
        auth = {"Authorization": f"Bearer {seed['token']}"}
        with httpx.Client(headers=auth, timeout=3600) as http:
            assert http.get(cluster.url(0, "/api/runs")).status_code == 200
            idle = memory(pid)
            started = time.monotonic()
            response = http.post(
                cluster.url(0, "/api/bundles"),
                content=_chunks(path),
                headers={"Content-Type": "application/json", "Content-Length": str(size)},
            )
            uploaded = time.monotonic() - started
            after_upload = memory(pid)
            if response.status_code != 202:
                return {"size": size, "status": response.status_code, "error": response.text[:300]}
            url = cluster.url(0, response.json()["url"])
            while (job := http.get(url).json())["status"] in ("queued", "running"):
                if job["status"] == "queued" and time.monotonic() - started > uploaded + 120:
                    raise RuntimeError("the job was never started (no task worker?)")
                time.sleep(0.5)
            imported = time.monotonic() - started - uploaded
            done = memory(pid)
    return {
        "size": size,
        "status": job["status"],
        "events": job["events"],
        "error": job.get("error"),
        "upload_s": uploaded,
        "import_s": imported,
        "idle": idle,
        "after_upload": after_upload,
        "done": done,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", default="60000,245000", help="bundle sizes, in events (comma-separated)")
    parser.add_argument("--postgres", action="store_true", help="PostgreSQL instead of SQLite")
    parser.add_argument(
        "--old-limit", action="store_true", help="raise WORKBENCH_MAX_BODY_BYTES instead (older checkouts)"
    )
    args = parser.parse_args()
    for events in (int(n) for n in args.events.split(",")):
        path = bundle_of(events)
        result = measure(path, postgres=args.postgres, old_limit=args.old_limit)
        print(f"bundle of {events} events, {result['size'] / MB:.0f} MiB: {result['status']}", flush=True)
        if "idle" not in result or result["status"] != "succeeded":
            print(f"  refused or failed: {result.get('error')}")
            continue
        idle, up, done = result["idle"], result["after_upload"], result["done"]
        print(
            f"  server RSS idle {idle['VmRSS'] / MB:.0f} MiB (peak {idle['VmHWM'] / MB:.0f});"
            f" after the 202 {up['VmRSS'] / MB:.0f} MiB (peak {up['VmHWM'] / MB:.0f},"
            f" +{(up['VmHWM'] - idle['VmHWM']) / MB:.0f}) in {result['upload_s']:.1f} s;"
            f" job done ({result['events']} events) {done['VmRSS'] / MB:.0f} MiB"
            f" (peak {done['VmHWM'] / MB:.0f}, +{(done['VmHWM'] - idle['VmHWM']) / MB:.0f})"
            f" in {result['import_s']:.1f} s",
            flush=True,
        )


if __name__ == "__main__":
    main()
