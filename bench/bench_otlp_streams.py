"""The scaled profile's OTLP storers (issue 47): stored spans/s with 2 storer processes vs 1.

    .venv/bin/python bench/bench_otlp_streams.py [--repeat 3]

PostgreSQL (a database of its own, tests/live/cluster.py, dropped after) and Redis (db
``STREAMS_BENCH_REDIS_DB``, 15, a stream key of its own; nothing is flushed). Each run: a new
workspace; bench_otlp's ``traces1000`` shape (1,000 traces of 10 spans: roots, GenAI chat spans
with usage, tool spans; protobuf bodies of 512 spans) added by the receiver's code (clean bodies
as they came, ``do_stream_body``: the storers decode and map them) into a template stream; then N
``manage.py otlp_storer`` processes are started and, once each says it reads, the template's entries are copied into the stream they read
(one pipeline, milliseconds) and the clock runs until the stream is empty and nothing is pending
(every batch stored, committed and acknowledged). stored spans/s = spans / that time; the spans
found in the database are checked. Runs alternate 1 and 2 storers (a shared machine's load falls on
both alike); medians of ``--repeat``. Also the receiver's CPU per span before its 2xx, clean
bodies as they came vs decoded, checked and mapped first. Figures only: nothing is asserted. On a machine whose cores
are busy with other work, a second storer has no core of its own to run on: the ratio says so.

Why the ratio is what it is: for each storer count, the CPU per stored span of the storer
processes and of their PostgreSQL backends (``/proc/<pid>/stat`` over the timed window; CPU the
machine lacks shows as a ratio under 1 with no lock waits), and what the storers' backends were
doing, sampled every 50 ms in ``pg_stat_activity``: waiting on a lock (a row another storer's
transaction holds: the rollup rows before runs.actions.rollups.deferred), working in PostgreSQL,
waiting on IO, idle inside a transaction (the storer's Python between statements) or outside one.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_otlp import build_bodies  # noqa: E402
from tests.live.cluster import REDIS_BASE, Cluster  # noqa: E402

REDIS_DB = int(os.environ.get("STREAMS_BENCH_REDIS_DB", "15"))
PROTOBUF = "application/x-protobuf"
SAMPLE_EVERY = 0.05  # seconds between looks at pg_stat_activity
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process of this machine (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


@dataclass
class Activity:
    """What the storers' PostgreSQL backends did, sampled in pg_stat_activity, and their CPU."""

    states: Counter = field(default_factory=Counter)
    locks: Counter = field(default_factory=Counter)  # the statement that waited, by table
    cpu_first: dict[int, float] = field(default_factory=dict)
    cpu_last: dict[int, float] = field(default_factory=dict)

    @property
    def backend_cpu(self) -> float:
        return sum(self.cpu_last[pid] - self.cpu_first[pid] for pid in self.cpu_last)


def state_of(state: str | None, wait_type: str | None) -> str:
    if state == "active":
        if wait_type == "Lock":
            return "lock"
        return "io" if wait_type in ("IO", "LWLock") else "postgres"
    return (
        "python in transaction"
        if (state or "").startswith("idle in transaction")
        else "outside a transaction"
    )


def sample(url: str, skip: set[int], stop: threading.Event, into: Activity) -> None:
    """Every :data:`SAMPLE_EVERY` s until ``stop``: each backend of the database but ``skip`` and
    this one (the storers'), its state, its wait and, for a lock wait, the table it writes."""
    with psycopg.connect(url, autocommit=True) as conn:
        while not stop.is_set():
            rows = conn.execute(
                "SELECT pid, state, wait_event_type, left(query, 40) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
                " AND backend_type = 'client backend'"
            ).fetchall()
            for pid, state, wait_type, query in rows:
                if pid in skip:
                    continue
                kind = state_of(state, wait_type)
                into.states[kind] += 1
                if kind == "lock":
                    into.locks[" ".join(query.split()[:3])] += 1
                into.cpu_last[pid] = cpu_seconds(pid)
                into.cpu_first.setdefault(pid, into.cpu_last[pid])
            time.sleep(SAMPLE_EVERY)


def start_storers(cluster: Cluster, key: str, n: int, tag: str) -> list[tuple[subprocess.Popen, Path]]:
    env = {**cluster.env(), "WORKBENCH_OTLP_STREAM": key}
    out = []
    for i in range(n):
        log = cluster.tmp / f"storer-{tag}-{i}.log"
        journal = cluster.tmp / f"storer-{tag}-{i}.journal"
        with log.open("ab") as handle:
            proc = subprocess.Popen(
                [sys.executable, str(ROOT / "manage.py"), "otlp_storer", "--consumer", f"bench-{tag}-{i}"]
                + ["--journal", str(journal)],
                cwd=ROOT,
                env=env,
                stdout=handle,
                stderr=subprocess.STDOUT,
            )
        out.append((proc, log))
        cluster.logs.append(log)  # kept with CLUSTER_KEEP_LOGS=DIR
    deadline = time.monotonic() + 180
    while not all(": stream " in log.read_text() for _, log in out):
        if time.monotonic() > deadline or any(p.poll() is not None for p, _ in out):
            raise SystemExit("a storer did not start: " + " | ".join(log.read_text() for _, log in out))
        time.sleep(0.05)
    return out


def receive(workspace, bodies: list[bytes], buffer, checked: bool) -> float:
    """What a receiver does with each body before its 2xx (runs/api/otlp.py): ``checked``, decode,
    check and map it (any body not clean); else the cheap check and the body as it came. Returns
    spans per CPU second of the receiver's process (Redis's own work not counted)."""
    from runs.actions.otlp_streams import do_stream_body, do_stream_spans
    from runs.telemetry.otlp_ingest import spans_from_protobuf, spoolable_protobuf_spans

    spans = 0
    started = time.process_time()
    for body in bodies:
        count = None if checked else spoolable_protobuf_spans(body)
        if count is None:
            report = do_stream_spans(
                workspace=workspace,
                spans=spans_from_protobuf(body),
                body=body,
                content_type=PROTOBUF,
                buffer=buffer,
            )
        else:
            report = do_stream_body(
                workspace=workspace, body=body, content_type=PROTOBUF, spans=count, buffer=buffer
            )
        spans += report.accepted
    return spans / (time.process_time() - started)


@dataclass
class Result:
    rate: float  # stored spans/s
    storer_cpu: list[float]  # CPU seconds of each storer process over the timed window
    spans: list[int]  # spans each storer stored
    activity: Activity


def one_run(cluster: Cluster, bodies: list[bytes], total: int, storers: int) -> Result:
    from django.db import connection

    from runs.actions.otlp_streams import GROUP, StreamBuffer
    from runs.models import Event, Workspace

    tag = uuid.uuid4().hex[:8]
    workspace = Workspace.objects.create(slug=f"bench-{tag}", name="Bench")
    template = StreamBuffer(key=f"wbbench:otlp-template:{tag}")
    receive(workspace, bodies, template, checked=False)  # what receivers add: clean bodies as they came
    key = f"wbbench:otlp:{tag}"
    target = StreamBuffer(key=key)
    target.ensure_group()
    procs = start_storers(cluster, key, storers, tag)
    client = target.client
    activity, stop = Activity(), threading.Event()
    connection.ensure_connection()
    own = {connection.connection.info.backend_pid}  # the bench's own connection
    sampler = threading.Thread(
        target=sample, args=(cluster.database_url.split("?")[0], own, stop, activity), daemon=True
    )
    try:
        entries = client.xrange(template.key)
        cpu = [cpu_seconds(proc.pid) for proc, _ in procs]
        sampler.start()
        started = time.perf_counter()
        pipe = client.pipeline(transaction=False)
        for _id, fields in entries:
            pipe.xadd(key, fields)
        pipe.execute()
        while client.xlen(key) or client.xpending(key, GROUP)["pending"]:
            time.sleep(0.005)
        took = time.perf_counter() - started
        cpu = [cpu_seconds(proc.pid) - was for (proc, _), was in zip(procs, cpu, strict=True)]
        stop.set()
        sampler.join()
    finally:
        stop.set()
        for proc, _ in procs:
            proc.terminate()
        for proc, _ in procs:
            proc.wait(timeout=30)
        client.delete(key, template.key, f"{key}:failed")
    found = Event.objects.filter(run__workspace=workspace, type="span_started").count()
    if found != total:
        raise SystemExit(f"stored {found} spans of {total}")
    spans = [journal_spans(cluster.tmp / f"storer-{tag}-{i}.journal") for i in range(storers)]
    return Result(total / took, cpu, spans, activity)


def journal_spans(path: Path) -> int:
    """The spans a storer's journal says it stored (a line per entry: id, spans, seconds, time)."""
    if not path.is_file():
        return 0
    return sum(int(line.split()[1]) for line in path.read_text().splitlines() if line.strip())


def explain(storers: int, results: list[Result]) -> str:
    """Where the storers' time went, over every run with ``storers`` storers."""
    spans = sum(sum(r.spans) for r in results)
    cpu = sum(sum(r.storer_cpu) for r in results)
    backend = sum(r.activity.backend_cpu for r in results)
    states: Counter = sum((r.activity.states for r in results), Counter())
    locks: Counter = sum((r.activity.locks for r in results), Counter())
    seen = sum(states.values()) or 1
    share = ", ".join(
        f"{kind} {100 * states[kind] / seen:.0f}%"
        for kind in ("lock", "postgres", "io", "python in transaction", "outside a transaction")
    )
    waited = "; lock waits in: " + ", ".join(f"{q} ({n})" for q, n in locks.most_common(3)) if locks else ""
    per = [f"{1e3 * c / s:.2f}" for r in results for c, s in zip(r.storer_cpu, r.spans, strict=True) if s]
    return (
        f"{storers} storer(s): CPU per stored span {1e3 * cpu / max(spans, 1):.2f} ms in the storer"
        f" (each storer, each run: {' '.join(per)} ms) + {1e3 * backend / max(spans, 1):.2f} ms in"
        f" PostgreSQL; storers' backends ({seen} samples every {SAMPLE_EVERY * 1e3:.0f} ms): {share}{waited}"
    )


def receiver_rate(bodies: list[bytes], checked: bool) -> float:
    from runs.actions.otlp_streams import StreamBuffer
    from runs.models import Workspace

    tag = uuid.uuid4().hex[:8]
    workspace = Workspace.objects.create(slug=f"bench-recv-{tag}", name="Bench")
    scratch = StreamBuffer(key=f"wbbench:otlp-receiver:{tag}")
    try:
        return receive(workspace, bodies, scratch, checked)
    finally:
        scratch.client.delete(scratch.key)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    env = {
        "REDIS_URL": f"{REDIS_BASE}/{REDIS_DB}",
        "WORKBENCH_OTLP_BUFFER": "redis",
        "DEBUG": "0",  # storers as in production (DEBUG keeps every query's text)
        "SECRET_KEY": "bench-otlp-streams-" + uuid.uuid4().hex + uuid.uuid4().hex,
        "SECURE_SSL_REDIRECT": "0",
    }
    bodies, total = build_bodies("traces1000")
    with Cluster(database="postgres", servers=0, extra_env=env) as cluster:
        os.environ.update(cluster.env())
        import django

        django.setup()
        receivers: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(args.repeat):
            for checked in (True, False):
                receivers[checked].append(receiver_rate(bodies, checked))
        results: dict[int, list[Result]] = {1: [], 2: []}
        for round_ in range(args.repeat):
            for storers in (1, 2):
                result = one_run(cluster, bodies, total, storers)
                results[storers].append(result)
                print(
                    f"round {round_ + 1}: {storers} storer(s): {result.rate:,.0f} stored spans/s", flush=True
                )
    one = statistics.median(r.rate for r in results[1])
    two = statistics.median(r.rate for r in results[2])
    print(f"shape traces1000: {total:,} spans in {len(bodies)} batches of 512, PostgreSQL + Redis Streams")
    print(f"stored spans/s, 1 storer:  {one:,.0f} (median of {args.repeat})")
    print(f"stored spans/s, 2 storers: {two:,.0f} (median of {args.repeat})")
    print(f"2 storers / 1 storer: {two / one:.2f}x on {os.cpu_count()} cores (load {os.getloadavg()[0]:.1f})")
    for storers in (1, 2):
        print(explain(storers, results[storers]))
    states: Counter = sum((r.activity.states for r in results[2]), Counter())
    print(
        f"headline: 2 OTLP storers / 1: {two / one:.2f}x ({two:,.0f} vs {one:,.0f} stored spans/s), 2 storers'"
        f" backends waiting on a lock {100 * states['lock'] / (sum(states.values()) or 1):.0f}% of samples,"
        f" load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    raw, checked = statistics.median(receivers[False]), statistics.median(receivers[True])
    print(
        f"receiver before its 2xx: {raw:,.0f} spans per CPU second (clean bodies as they came), "
        f"{checked:,.0f} decoding, checking and mapping first: {raw / checked:.1f}x"
    )


if __name__ == "__main__":
    main()
