"""Two OTLP storers (runs/telemetry/otlp_storer.py) storing the halves of the same traces at the same
time, in one workspace, on PostgreSQL: the workspace's rollups (run counters, calls, tokens, costs,
metrics) end exactly as one storer leaves them, and no batch fails on a deadlock (rollup increments
wait for the end of each transaction, runs.actions.rollups.deferred; new traces are created in trace
id order, runs.actions.otlp._create_runs).

Each storer is a thread running the storer's loop (``otlp_storer.run``) with its own database
connection, reading one entry at a time from a Redis Stream (the ``stream`` fixture of
tests/telemetry/test_otlp_streams.py), so the two halves of a trace go to the two storers at once.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from decimal import Decimal

import pytest
from django.db import connection, connections

from runs.actions import rollups
from runs.actions.otlp_streams import StreamBuffer
from runs.actions.rollup_metrics import stored_metrics
from runs.models import Event, OtelTrace, Run, Workspace
from runs.telemetry import otlp_storer
from tests.telemetry.test_otlp_queue import CHAT, body, otlp_span, post
from tests.telemetry.test_otlp_streams import stream  # noqa: F401 (the fixture)

pytestmark = pytest.mark.django_db(transaction=True)

PAIRS = 6  # bodies of first halves and of second halves
TRACES = 8  # traces per body


def halves(pair: int) -> tuple[bytes, bytes]:
    """Two bodies of the same traces: the roots and a chat span, then (traces in reverse order, so
    the two storers meet them in opposite orders) a second chat span and a child step."""
    traces = range(pair * TRACES, (pair + 1) * TRACES)
    first = [
        s for t in traces for s in (otlp_span(t, 0, parent=None, name="request"), otlp_span(t, 1, attrs=CHAT))
    ]
    second = [s for t in reversed(traces) for s in (otlp_span(t, 2, attrs=CHAT), otlp_span(t, 3))]
    return body(first), body(second)


def post_all(client, workspace: Workspace) -> None:
    for pair in range(PAIRS):
        for data in halves(pair):  # consecutive entries: the two halves go to the two storers
            assert post(client, workspace, data).status_code == 200


def store_with(buffer: StreamBuffer, storers: int) -> list[BaseException]:
    errors: list[BaseException] = []
    start = threading.Barrier(storers)

    def storer(name: str) -> None:
        try:
            start.wait()
            otlp_storer.run(buffer=buffer, consumer=name, once=True)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=storer, args=(f"s{i}",)) for i in range(storers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def totals(workspace: Workspace) -> tuple[dict, Counter, Counter]:
    """The workspace's rollups summed over what differs between two stores of the same spans (the
    shard, from the run's row id): calls and sums by labels, run counters, metric counts."""
    costs, counts = rollups.stored(workspace)
    calls: dict[tuple, list] = {}
    for key, sums in costs.items():
        held = calls.setdefault(key[:1] + key[2:], [0] * len(sums))
        for i, value in enumerate(sums):
            held[i] += value
    runs: Counter = Counter()
    for (day, workflow, version, _shard), vector in counts.items():
        for i, value in enumerate(vector):
            runs[(day, workflow, version, i)] += value
    metrics: Counter = Counter()
    for (day, workflow, _shard, *key), n in stored_metrics(workspace).items():
        metrics[(day, workflow, *key)] += n
    return calls, runs, metrics


def test_two_storers_on_the_same_traces_leave_the_rollups_exact(
    client, workspace, request, monkeypatch, caplog
):
    if connection.vendor != "postgresql":
        pytest.skip("concurrent storers: PostgreSQL (SQLite has one writer at a time)")
    buffer = request.getfixturevalue("stream")
    monkeypatch.setattr(otlp_storer, "READ_COUNT", 1)  # an entry per read: the storers take turns
    caplog.set_level(logging.ERROR, logger="runs.telemetry.otlp_storer")
    alone = Workspace.objects.create(slug="alone", name="Alone")
    post_all(client, alone)
    assert not store_with(buffer, 1)
    post_all(client, workspace)
    assert buffer.client.xlen(buffer.key) == 2 * PAIRS

    assert not store_with(buffer, 2)

    assert not [r.getMessage() for r in caplog.records]  # no batch failed (a deadlock, a retry)
    assert buffer.status()["pending"] == 0 and buffer.status()["backlog"] == 0
    for ws in (alone, workspace):
        assert OtelTrace.objects.filter(workspace=ws).count() == PAIRS * TRACES  # a run per trace
        assert Run.unscoped.filter(workspace=ws).count() == PAIRS * TRACES
        assert Event.objects.filter(run__workspace=ws, type="span_started").count() == PAIRS * TRACES * 4
        assert rollups.rollups_match(ws)  # the rollups equal a recomputation from the stored events
    assert totals(workspace) == totals(alone)
    calls, runs, _ = totals(workspace)
    assert sum(sums[0] for sums in calls.values()) == 2 * PAIRS * TRACES  # two chat spans per trace
    assert sum(sums[1] for sums in calls.values()) == 2 * PAIRS * TRACES * 100  # input tokens
    assert sum(sums[7] for sums in calls.values()) > Decimal(0)  # priced
    assert sum(n for (*_, i), n in runs.items() if i == 0) == PAIRS * TRACES
