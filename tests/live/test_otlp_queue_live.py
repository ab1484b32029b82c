"""The OTLP queue on a real server (embedded profile: SQLite, the server's own worker process), fed
by the OpenTelemetry SDK's exporter with no run id anywhere, through a kill -9 of the worker and
then of the server with spans still queued. Afterwards every span the exporter was answered for is
stored exactly once, each trace in a run of its own, with no new OTLP request needed to get there.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.trace import SpanContext, SpanKind, TraceFlags

from tests.conftest import LINEAR_WORKFLOW
from tests.live.cluster import Cluster

pytestmark = pytest.mark.slow

T0 = 1_767_225_600_000_000_000
SPANS_PER_TRACE = 10


def spans_of(traces: range) -> list[ReadableSpan]:
    resource = Resource.create({"service.name": "queued-app"})
    out = []
    for t in traces:
        trace_id = 0xA000_0000_0000_0000_0000_0000_0000_0000 + t
        root = (t << 8) + 1
        for n in range(SPANS_PER_TRACE):
            span_id = root + n
            out.append(
                ReadableSpan(
                    name="request" if n == 0 else f"step {n}",
                    context=SpanContext(trace_id, span_id, is_remote=False, trace_flags=TraceFlags(1)),
                    parent=None if n == 0 else SpanContext(trace_id, root, is_remote=False),
                    resource=resource,
                    attributes={"i": n},
                    kind=SpanKind.INTERNAL,
                    start_time=T0 + n * 1_000,
                    end_time=T0 + n * 1_000 + 500,
                )
            )
    return out


def export(cluster: Cluster, token: str, spans: list[ReadableSpan]) -> None:
    exporter = OTLPSpanExporter(
        endpoint=cluster.url(0, "/v1/traces"), headers={"Authorization": f"Bearer {token}"}, timeout=60
    )
    for i in range(0, len(spans), 512):
        assert exporter.export(spans[i : i + 512]) == SpanExportResult.SUCCESS
    exporter.shutdown()


def worker_pids(server_pid: int) -> list[int]:
    pids = []
    for task in Path(f"/proc/{server_pid}/task").iterdir():
        try:
            pids += [int(p) for p in (task / "children").read_text().split()]
        except FileNotFoundError:  # a thread of the server that ended meanwhile
            continue
    return pids


def stored(cluster: Cluster) -> dict:
    out = cluster.python(
        "import json\n"
        "from runs.models import Event, OtelTrace\n"
        "ids = list(Event.objects.filter(type='span_started').values_list('run__run_id', 'correlation_id'))\n"
        "print('STORED ' + json.dumps({'spans': len(ids), 'distinct': len(set(ids)),"
        " 'traces': OtelTrace.objects.count()}))\n"
    )
    return json.loads(next(line for line in out.splitlines() if line.startswith("STORED "))[7:])


def wait_stored(cluster: Cluster, spans: int, timeout: float = 60) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        now = stored(cluster)
        if now["spans"] >= spans or time.monotonic() > deadline:
            return now
        time.sleep(0.5)


def spool(cluster: Cluster) -> list[str]:
    root = cluster.tmp / "otlp-spool"
    return [p.name for d in ("ready", "claimed") if (root / d).exists() for p in (root / d).iterdir()]


def test_queued_spans_survive_a_killed_worker_and_a_killed_server():
    env = {
        "WORKBENCH_RATE_LIMIT_WORKSPACE_PER_MINUTE": "1000000",
        "WORKBENCH_RATE_LIMIT_PER_MINUTE": "1000000",
        "WORKBENCH_OTLP_QUEUE": "1",
        "WORKBENCH_OTLP_WORKER_INPROCESS": "1",
        "WORKBENCH_OTLP_QUIET_SECONDS": "3",  # the server's periodic check: every second
    }
    with Cluster(database="sqlite", servers=1, extra_env=env) as cluster:
        token = cluster.seed(workflow=LINEAR_WORKFLOW)["token"]

        # 1. Queued and stored by the worker the server started for itself.
        export(cluster, token, spans_of(range(20)))
        server = cluster.procs[0]
        (worker,) = worker_pids(server.pid)
        assert wait_stored(cluster, 200) == {"spans": 200, "distinct": 200, "traces": 20}

        # 2. The worker killed: the next bodies wait, the server's periodic check starts another
        # worker without any further request.
        os.kill(worker, signal.SIGKILL)
        time.sleep(0.2)
        export(cluster, token, spans_of(range(20, 40)))
        assert wait_stored(cluster, 400) == {"spans": 400, "distinct": 400, "traces": 40}
        assert worker_pids(server.pid) and worker not in worker_pids(server.pid)

        # 3. A burst, then the server and its worker killed at once while bodies are still queued
        # (the exporter was answered for all of them); the restarted server stores them.
        export(cluster, token, spans_of(range(40, 440)))
        workers = worker_pids(server.pid)
        os.kill(server.pid, signal.SIGKILL)
        for pid in workers:
            os.kill(pid, signal.SIGKILL)
        server.wait(timeout=10)
        left = spool(cluster)
        assert left, "nothing was queued at the kill: the burst was too small to test this"
        cluster.start_server(0, cluster.ports[0])
        assert wait_stored(cluster, 4_400) == {"spans": 4_400, "distinct": 4_400, "traces": 440}
        assert not spool(cluster)
