"""A daphne server with an in-process writer, for bench_live.py.

    python bench/live_server.py PORT CONTROL_DIR
    python bench/live_server.py write CONTROL_DIR      (the writer alone, no server)

Serves workbench.asgi:application like `daphne -b 127.0.0.1 -p PORT`. A writer thread waits for
CONTROL_DIR/start.json ({"workspace", "run_id", "events", "rate", "warmup", "batch"}), appends
`warmup` events (not measured), pauses 1 s, then appends `events` commits of `batch` (default 1)
`tool_call` events each (through the session API, runs.execution.session: one action, one commit per
batch) at `rate` commits per second, and writes CONTROL_DIR/commits.json: {seq: unix time right after the
commit returned}. In-process, because with the in-memory channel layer only a write inside the
serving process can reach its sockets (as with the playground or an embedded host application).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")


def tool_event(run_id: str, i: int) -> dict:
    now = time.time()
    ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z"
    return {
        "id": f"evt_bench_{i}_{uuid.uuid4().hex[:8]}",
        "runId": run_id,
        "ts": ts,
        "type": "tool_call",
        "name": "search",
        "args": {"q": f"bench query {i}"},
        "result": {"hits": i % 7},
    }


def writer(control: Path) -> None:
    start = control / "start.json"
    while not start.exists():
        time.sleep(0.05)
    spec = json.loads(start.read_text())
    from django.db import close_old_connections

    from runs.execution.host import Workbench

    session = Workbench(workspace=spec["workspace"], actor="pipeline:bench").session(spec["run_id"])
    commits: dict[int, float] = {}
    failures = 0
    # Warm-up: a few events first (templates compiled, connections opened), not measured.
    warmup = int(spec.get("warmup", 0))
    for i in range(warmup):
        session.append_events([tool_event(spec["run_id"], -1 - i)])
        time.sleep(1 / spec["rate"])
    first_measured = (session.run.last_seq + 1) if warmup else 1
    time.sleep(1.0 if warmup else 0)
    batch = int(spec.get("batch", 1))
    t0 = time.monotonic()
    for i in range(spec["events"]):
        delay = t0 + i / spec["rate"] - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        try:
            result = session.append_events([tool_event(spec["run_id"], i * batch + j) for j in range(batch)])
        except Exception:
            failures += 1
            close_old_connections()
            continue
        committed = time.time()
        for seq in result.seqs:
            commits[seq] = committed
    elapsed = time.monotonic() - t0
    out = {
        "commits": commits,
        "failures": failures,
        "seconds": elapsed,
        "first_measured": first_measured,
        "warmup_commits": warmup,
    }
    (control / "commits.tmp").write_text(json.dumps(out))
    (control / "commits.tmp").rename(control / "commits.json")


def apply_overrides() -> None:
    """LIVE_BENCH_SETTINGS='{"LIVE_MIN_UPDATE_SECONDS": 0.03}': try other live knobs in a bench run."""
    raw = os.environ.get("LIVE_BENCH_SETTINGS")
    if raw:
        from django.conf import settings

        for name, value in json.loads(raw).items():
            setattr(settings, name, value)


def main() -> None:
    if sys.argv[1] == "write":  # writer-only process (scaled profile: broadcasts travel through Redis)
        import django

        django.setup()
        apply_overrides()
        control = Path(sys.argv[2])
        control.mkdir(parents=True, exist_ok=True)
        writer(control)
        from runs.live.publisher import publisher

        publisher.flush(5.0)
        return
    port, control = sys.argv[1], Path(sys.argv[2])
    control.mkdir(parents=True, exist_ok=True)
    import django

    django.setup()
    apply_overrides()
    threading.Thread(target=writer, args=(control,), name="bench-writer", daemon=True).start()
    from daphne.cli import CommandLineInterface

    args = ["-b", "127.0.0.1", "-p", port, "workbench.asgi:application"]
    profile = os.environ.get("LIVE_SERVER_PROFILE")  # a path: cProfile the server, dumped on exit
    if profile:  # dumped on SIGUSR2 (bench_live.py sends it when the writes are done) and on exit
        import cProfile
        import signal

        profiler = cProfile.Profile()

        def dump(*_):
            profiler.disable()
            profiler.dump_stats(f"{profile}.{port}")
            profiler.enable()

        signal.signal(signal.SIGUSR2, dump)
        profiler.enable()
        try:
            CommandLineInterface().run(args)
        finally:
            dump()
    else:
        CommandLineInterface().run(args)


if __name__ == "__main__":
    main()
