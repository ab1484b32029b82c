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
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_otlp import build_bodies  # noqa: E402
from tests.live.cluster import REDIS_BASE, Cluster  # noqa: E402

REDIS_DB = int(os.environ.get("STREAMS_BENCH_REDIS_DB", "15"))
PROTOBUF = "application/x-protobuf"


def start_storers(cluster: Cluster, key: str, n: int, tag: str) -> list[tuple[subprocess.Popen, Path]]:
    env = {**cluster.env(), "WORKBENCH_OTLP_STREAM": key}
    out = []
    for i in range(n):
        log = cluster.tmp / f"storer-{tag}-{i}.log"
        with log.open("ab") as handle:
            proc = subprocess.Popen(
                [sys.executable, str(ROOT / "manage.py"), "otlp_storer", "--consumer", f"bench-{tag}-{i}"],
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


def one_run(cluster: Cluster, bodies: list[bytes], total: int, storers: int) -> float:
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
    try:
        entries = client.xrange(template.key)
        started = time.perf_counter()
        pipe = client.pipeline(transaction=False)
        for _id, fields in entries:
            pipe.xadd(key, fields)
        pipe.execute()
        while client.xlen(key) or client.xpending(key, GROUP)["pending"]:
            time.sleep(0.005)
        took = time.perf_counter() - started
    finally:
        for proc, _ in procs:
            proc.terminate()
        for proc, _ in procs:
            proc.wait(timeout=30)
        client.delete(key, template.key, f"{key}:failed")
    found = Event.objects.filter(run__workspace=workspace, type="span_started").count()
    if found != total:
        raise SystemExit(f"stored {found} spans of {total}")
    return total / took


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
        rates: dict[int, list[float]] = {1: [], 2: []}
        for round_ in range(args.repeat):
            for storers in (1, 2):
                rate = one_run(cluster, bodies, total, storers)
                rates[storers].append(rate)
                print(f"round {round_ + 1}: {storers} storer(s): {rate:,.0f} stored spans/s", flush=True)
    one, two = statistics.median(rates[1]), statistics.median(rates[2])
    print(f"shape traces1000: {total:,} spans in {len(bodies)} batches of 512, PostgreSQL + Redis Streams")
    print(f"stored spans/s, 1 storer:  {one:,.0f} (median of {args.repeat})")
    print(f"stored spans/s, 2 storers: {two:,.0f} (median of {args.repeat})")
    print(f"2 storers / 1 storer: {two / one:.2f}x on {os.cpu_count()} cores (load {os.getloadavg()[0]:.1f})")
    raw, checked = statistics.median(receivers[False]), statistics.median(receivers[True])
    print(
        f"receiver before its 2xx: {raw:,.0f} spans per CPU second (clean bodies as they came), "
        f"{checked:,.0f} decoding, checking and mapping first: {raw / checked:.1f}x"
    )


if __name__ == "__main__":
    main()
