"""The scaled profile's OTLP buffer (runs/actions/otlp_streams.py, runs/telemetry/otlp_storer.py):
/v1/traces answers once the batch is in a Redis Stream; storers of a consumer group store it,
acknowledge after the commit, and take over what a dead storer left pending (XAUTOCLAIM).

Here the storer runs in the test's process (``otlp_storer.run(once=True)``, the code the
``otlp_storer`` command runs), on Redis (``REDIS_TEST_URL``, default 127.0.0.1:6379/0) with a
stream key of its own per test; tests/live/test_otlp_streams_live.py drives two receivers and two
storer processes on PostgreSQL through a kill -9 of one storer.
"""

from __future__ import annotations

import json
import os
import uuid

import pytest
import redis
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from runs.actions.otlp_streams import GROUP, MAX_DELIVERIES, StreamBuffer
from runs.models import Event, OtelTrace, Run, Workspace
from runs.telemetry import otlp_storer, otlp_worker
from tests.telemetry.test_otlp_queue import a_trace, body, post, stored
from tests.telemetry.test_otlp_queue_raw import pb_body, post_pb

pytestmark = pytest.mark.django_db(transaction=True)

REDIS_URL = os.environ.get("REDIS_TEST_URL") or "redis://127.0.0.1:6379/0"


def _redis_up() -> bool:
    try:
        return bool(redis.Redis.from_url(REDIS_URL, socket_connect_timeout=0.5).ping())
    except redis.RedisError:
        return False


@pytest.fixture
def stream(settings):
    if not _redis_up():
        pytest.skip(f"no Redis answers at {REDIS_URL}")
    key = f"wbtest:otlp:{uuid.uuid4().hex[:12]}"
    settings.REDIS_URL = REDIS_URL
    settings.WORKBENCH_OTLP_BUFFER = "redis"
    settings.WORKBENCH_OTLP_QUEUE = False
    settings.WORKBENCH_OTLP_STREAM = key
    buffer = StreamBuffer(url=REDIS_URL, key=key)
    yield buffer
    buffer.client.delete(key, buffer.failed_key)


def span_starts(workspace) -> int:
    return [e["type"] for e in stored(workspace)].count("span_started")


def test_answered_once_in_the_stream_then_stored_and_acknowledged(client, workspace, stream):
    response = post(client, workspace, body(a_trace(0) + a_trace(1)))
    assert response.status_code == 200 and response.json() == {}
    assert not Event.objects.exists() and stream.client.xlen(stream.key) == 1  # answered before storing
    assert otlp_storer.run(buffer=stream, consumer="s1", once=True) == 1
    assert stream.status() | {"consumers": None} == {
        "stream": stream.key,
        "backlog": 0,  # acknowledged and deleted once committed
        "maxBatches": stream.max_batches,
        "pending": 0,
        "consumers": None,
        "failed": 0,
    }
    assert OtelTrace.objects.filter(workspace=workspace).count() == 2
    runs = Run.unscoped.filter(workspace=workspace)
    assert sorted(r.model_calls for r in runs) == [1, 1] and all(r.cost_totals for r in runs)  # priced
    assert span_starts(workspace) == 6


def test_the_stream_stores_what_storing_at_once_stores(client, workspace, stream, settings):
    post(client, workspace, body(a_trace(0)))
    otlp_storer.run(buffer=stream, consumer="s1", once=True)
    queued = [(e["type"], e.get("correlationId")) for e in stored(workspace)]
    settings.WORKBENCH_OTLP_BUFFER = "spool"
    Run.unscoped.all().delete()
    post(client, workspace, body(a_trace(0)))
    assert [(e["type"], e.get("correlationId")) for e in stored(workspace)] == queued


def test_refused_spans_are_answered_and_nothing_is_added(client, workspace, stream):
    answer = post(client, workspace, body(a_trace(0)), HTTP_X_WORKBENCH_RUN="run_nowhere").json()
    assert answer["partialSuccess"]["rejectedSpans"] == "3"
    assert "run_nowhere" in answer["partialSuccess"]["errorMessage"]
    assert stream.client.exists(stream.key) == 0


def test_a_dead_storers_pending_batch_is_claimed_after_the_lease(client, workspace, stream):
    """A storer that read an entry and died (never acknowledged) leaves it pending: not redelivered
    to a live storer's XREADGROUP, and taken over by XAUTOCLAIM once idle past the lease."""
    post(client, workspace, body(a_trace(0)))
    stream.ensure_group()
    (held,) = stream.read("dead", 8, None)  # the dead storer's delivery
    assert otlp_storer.run(buffer=stream, consumer="live", once=True, lease=3600) == 0  # its lease holds
    assert stream.status()["consumers"] == {"dead": 1} and not Event.objects.exists()
    assert otlp_storer.run(buffer=stream, consumer="live", once=True, lease=0) == 1  # claimed
    assert span_starts(workspace) == 3
    status = stream.status()
    assert (status["backlog"], status["pending"]) == (0, 0)
    assert stream.deliveries(held.path.name) == 0  # acknowledged


def test_a_batch_redelivered_after_its_commit_stores_nothing_twice(client, workspace, stream):
    """The storer committed and died before XACK: the entry is claimed and stored again, which adds
    no event, no run and no trace."""
    post(client, workspace, body(a_trace(0) + a_trace(1)))
    stream.ensure_group()
    items = stream.read("dead", 8, None)
    otlp_worker.store(items)  # committed, never acknowledged
    before = (span_starts(workspace), Run.unscoped.count(), OtelTrace.objects.count(), Event.objects.count())
    assert before[:3] == (6, 2, 2)
    assert otlp_storer.run(buffer=stream, consumer="live", once=True, lease=0) == 1
    assert (
        span_starts(workspace),
        Run.unscoped.count(),
        OtelTrace.objects.count(),
        Event.objects.count(),
    ) == before
    assert stream.status()["pending"] == 0


def test_a_full_backlog_answers_503_and_adds_nothing(client, workspace, stream, settings):
    settings.WORKBENCH_OTLP_STREAM_MAX_BATCHES = 1
    assert post(client, workspace, body(a_trace(0))).status_code == 200
    response = post(client, workspace, body(a_trace(1)))
    assert response.status_code == 503 and response["Retry-After"] == "1"
    assert response.json()["code"] == "STORAGE_UNAVAILABLE"
    assert stream.client.xlen(stream.key) == 1
    otlp_storer.run(buffer=stream, consumer="s1", once=True)
    assert post(client, workspace, body(a_trace(1))).status_code == 200  # room again once stored


def test_redis_unreachable_answers_503(client, workspace, stream, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    response = post(client, workspace, body(a_trace(0)))
    assert response.status_code == 503 and "Redis" in response.json()["error"]
    assert not Event.objects.exists()


def test_a_batch_that_keeps_failing_ends_in_the_failed_stream(workspace, stream, monkeypatch, client):
    post(client, workspace, body(a_trace(0)))

    def broken(items):
        raise RuntimeError("database down")

    monkeypatch.setattr(otlp_storer, "store", broken)
    monkeypatch.setattr(otlp_storer.time, "sleep", lambda s: None)
    for _ in range(MAX_DELIVERIES + 1):
        assert otlp_storer.run(buffer=stream, consumer="s1", once=True, lease=0) == 0
    status = stream.status()
    assert (status["backlog"], status["pending"], status["failed"]) == (0, 0, 1)
    ((_id, fields),) = stream.client.xrange(stream.failed_key)
    assert json.loads(fields[b"head"])["workspace"] == workspace.pk and fields[b"body"] == body(a_trace(0))
    assert stream.client.xinfo_groups(stream.key)[0]["name"] == GROUP.encode()


def test_a_clean_protobuf_body_is_added_as_it_came_and_a_storer_maps_it(client, workspace, stream):
    """Issue 53: the receiver's least work on the scaled profile too. A protobuf body that passes
    the cheap check is added with no mapped part (no per-span work before the 2xx); the storer
    decodes and maps it into the events the full check stores for the same spans."""
    data = pb_body()
    response = post_pb(client, workspace, data)
    assert response.status_code == 200 and response.content == b""  # an empty ExportTraceServiceResponse
    ((_id, fields),) = stream.client.xrange(stream.key)
    assert fields[b"mapped"] == b"" and fields[b"body"] == data and json.loads(fields[b"head"])["spans"] == 6
    assert otlp_storer.run(buffer=stream, consumer="s1", once=True) == 1
    assert stream.status()["backlog"] == 0 and span_starts(workspace) == 6
    # the same spans as JSON are checked and mapped by the receiver: the same events stored
    other = Workspace.objects.create(slug="json", name="JSON")
    assert post(client, other, body(a_trace(0) + a_trace(1), {"service.name": "raw-app"})).status_code == 200
    ((_id, fields),) = stream.client.xrange(stream.key)
    assert fields[b"mapped"] != b""
    otlp_storer.run(buffer=stream, consumer="s1", once=True)

    def comparable(events):
        return sorted(
            json.dumps({k: v for k, v in e.items() if k not in ("runId", "seq")}, sort_keys=True)
            for e in events
        )

    assert comparable(stored(workspace)) == comparable(stored(other))


def test_a_protobuf_body_naming_a_run_or_refused_by_routing_is_checked_before_the_answer(
    client, workspace, stream
):
    bad = post_pb(client, workspace, pb_body(bad_span_id=True))
    assert ExportTraceServiceResponse.FromString(bad.content).partial_success.rejected_spans == 1
    named = post_pb(client, workspace, pb_body(1), HTTP_X_WORKBENCH_RUN="run_nowhere")
    assert ExportTraceServiceResponse.FromString(named.content).partial_success.rejected_spans == 3
    entries = stream.client.xrange(stream.key)
    assert [json.loads(f[b"head"])["spans"] for _, f in entries] == [5]  # checked, mapped, 1 refused
    assert all(f[b"mapped"] != b"" for _, f in entries)
