"""The scaled profile's OTLP ingest end to end: two receivers (daphne) put batches in a Redis Stream,
two storer processes (``manage.py otlp_storer``) store them in PostgreSQL; one storer is killed
(``kill -9``) while it holds batches it read and had not acknowledged. Afterwards every span the
exporters were answered for is stored exactly once (the survivor claimed the dead storer's batches
after the lease), each trace in one run, and nothing is left pending in the stream.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest
import redis
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

from tests.conftest import LINEAR_WORKFLOW
from tests.live.cluster import REDIS_BASE, ROOT, Cluster
from tests.live.test_otlp_queue_live import stored

pytestmark = pytest.mark.slow

T0 = 1_767_225_600_000_000_000
TRACES = 300
SPANS_PER_TRACE = 10
BATCH = 100  # spans per export: a trace's spans land in two batches, often on two receivers
REDIS_DB = int(os.environ.get("LIVE_TEST_STREAMS_REDIS_DB", "14"))  # never flushed: keys of its own
LEASE = 3.0


def spans() -> list[ReadableSpan]:
    """Traces as an instrumented agent sends them: a root, chat spans with GenAI usage, tool spans
    with arguments and results, plain steps; each trace's spans split over two exports and the root
    (which ends last) in the second."""
    rng = random.Random(47)
    resource = Resource.create({"service.name": "streams-app", "deployment.environment": "test"})
    out: list[ReadableSpan] = []
    for t in range(TRACES):
        trace_id = rng.getrandbits(128)
        root = rng.getrandbits(64)

        def ctx(span_id: int, trace_id: int = trace_id) -> SpanContext:
            return SpanContext(trace_id, span_id, is_remote=False, trace_flags=TraceFlags(1))

        for i in range(1, SPANS_PER_TRACE + 1):
            last = i == SPANS_PER_TRACE
            if last:
                name, attrs, kind = "agent run", {"app.job": f"job-{t}"}, SpanKind.SERVER
            elif i % 3 == 1:
                name, kind = "chat gpt-4o-mini", SpanKind.CLIENT
                attrs = {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.provider.name": "openai",
                    "gen_ai.request.model": "gpt-4o-mini",
                    "gen_ai.usage.input_tokens": 120 + i,
                    "gen_ai.usage.output_tokens": 30,
                }
            elif i % 3 == 2:
                name, kind = "execute_tool search", SpanKind.INTERNAL
                attrs = {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "search",
                    "gen_ai.tool.call.arguments": f'{{"q": "query {t}-{i}"}}',
                    "gen_ai.tool.call.result": '{"hits": 3}',
                }
            else:
                name, attrs, kind = f"step {i}", {"app.item": i}, SpanKind.INTERNAL
            start = T0 + t * 1_000_000_000 + i * 1_000_000
            out.append(
                ReadableSpan(
                    name=name,
                    context=ctx(root if last else rng.getrandbits(64)),
                    parent=None if last else ctx(root),
                    resource=resource,
                    attributes=attrs,
                    kind=kind,
                    status=Status(StatusCode.OK),
                    start_time=T0 + t * 1_000_000_000 if last else start,
                    end_time=start + 500_000,
                )
            )
    # export j: the first halves of traces 10j..10j+9 and the second halves of the ten before
    half, per = SPANS_PER_TRACE // 2, BATCH // SPANS_PER_TRACE
    traces = [out[t * SPANS_PER_TRACE : (t + 1) * SPANS_PER_TRACE] for t in range(TRACES)]
    mixed: list[ReadableSpan] = []
    for j in range(TRACES // per + 1):
        mixed += [s for tr in traces[j * per : (j + 1) * per] for s in tr[:half]]
        mixed += [s for tr in traces[max(0, (j - 1) * per) : j * per] for s in tr[half:]]
    assert len(mixed) == len(out) and len({id(s) for s in mixed}) == len(out)
    return mixed


def start_storer(cluster: Cluster, name: str) -> subprocess.Popen:
    log = cluster.tmp / f"storer-{name}.log"
    handle = log.open("ab")
    cluster.handles.append(handle)
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "otlp_storer", "--consumer", name],
        cwd=ROOT,
        env=cluster.env(),
        stdout=handle,
        stderr=subprocess.STDOUT,
    )
    cluster.workers.append(proc)  # stopped with the cluster
    cluster.logs.append(log)
    return proc


def pending_of(client: redis.Redis, key: str) -> dict[str, int]:
    """Entries read and not acknowledged, per storer ({} until a storer created the group)."""
    try:
        summary = client.xpending(key, "storers")
    except redis.ResponseError:  # NOGROUP: no storer has started reading yet
        return {}
    return {c["name"].decode(): int(c["pending"]) for c in summary["consumers"] or ()}


def wait_started(cluster: Cluster, names: list[str], timeout: float = 120) -> None:
    """Until each storer said it reads the stream (a storer process takes seconds to start; Redis
    7.0 lists a consumer only once it was delivered something)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        logs = [(cluster.tmp / f"storer-{name}.log").read_text() for name in names]
        if all(f"otlp storer {name}: stream" in log for name, log in zip(names, logs, strict=True)):
            return
        time.sleep(0.1)
    raise AssertionError(f"the storers {names} did not start reading")


def test_a_storer_killed_mid_batch_loses_and_duplicates_nothing():
    url = f"{REDIS_BASE}/{REDIS_DB}"
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=0.5)
        client.ping()
    except redis.RedisError:
        pytest.skip(f"no Redis answers at {url}")
    key = f"wbtest:otlp-live:{uuid.uuid4().hex[:10]}"
    env = {
        "REDIS_URL": url,
        "WORKBENCH_OTLP_BUFFER": "redis",
        "WORKBENCH_OTLP_STREAM": key,
        "WORKBENCH_OTLP_STREAM_LEASE_SECONDS": str(LEASE),
        "WORKBENCH_OTLP_WORKER_BATCH_SPANS": "200",
        "WORKBENCH_RATE_LIMIT_WORKSPACE_PER_MINUTE": "1000000",
        "WORKBENCH_RATE_LIMIT_PER_MINUTE": "1000000",
    }
    all_spans = spans()
    batches = [all_spans[i : i + BATCH] for i in range(0, len(all_spans), BATCH)]
    try:
        with Cluster(database="postgres", servers=2, extra_env=env) as cluster:
            token = cluster.seed(workflow=LINEAR_WORKFLOW)["token"]
            victim = start_storer(cluster, "storer-1")
            start_storer(cluster, "storer-2")
            wait_started(cluster, ["storer-1", "storer-2"])
            answered: list[int] = []
            failures: list[str] = []

            def send(server: int) -> None:
                exporter = OTLPSpanExporter(
                    endpoint=cluster.url(server, "/v1/traces"),
                    headers={"Authorization": f"Bearer {token}"},
                    timeout=60,
                )
                for batch in batches[server::2]:  # receiver 0 the even exports, receiver 1 the odd
                    if exporter.export(batch) == SpanExportResult.SUCCESS:
                        answered.append(len(batch))
                    else:
                        failures.append(f"an export to receiver {server} failed")
                exporter.shutdown()

            senders = [threading.Thread(target=send, args=(i,), daemon=True) for i in (0, 1)]
            for thread in senders:
                thread.start()

            # kill -9 storer-1 while it holds entries it read and has not acknowledged (mid-batch)
            held = 0
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and any(t.is_alive() for t in senders):
                holding = pending_of(client, key).get("storer-1", 0)
                if sum(answered) > len(all_spans) // 4 and holding:
                    os.kill(victim.pid, signal.SIGKILL)
                    held = holding
                    break
                time.sleep(0.005)
            for thread in senders:
                thread.join(timeout=300)
            assert held > 0, "storer-1 was never caught holding a batch"
            assert not failures and sum(answered) == len(all_spans)  # every span acknowledged by a 2xx

            deadline = time.monotonic() + 180
            while True:
                now = stored(cluster)
                pending = sum(pending_of(client, key).values())
                if (now["spans"] >= len(all_spans) and pending == 0) or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
            assert now == {"spans": len(all_spans), "distinct": len(all_spans), "traces": TRACES}
            assert (client.xlen(key), pending, client.exists(f"{key}:failed")) == (0, 0, 0)
            assert victim.poll() == -signal.SIGKILL
            out = cluster.python(
                "from runs.models import Run, Event\n"
                "from django.db.models import Count\n"
                "per_run = set(Event.objects.filter(type='span_started').values('run').annotate(n=Count('seq')).values_list('n', flat=True))\n"
                "print('RUNS', Run.unscoped.exclude(run_id='run_live').count(), sorted(per_run))\n"
            )
            assert f"RUNS {TRACES} [{SPANS_PER_TRACE}]" in out  # one run per trace, each with its 10 spans
    finally:
        client.delete(key, f"{key}:failed")
