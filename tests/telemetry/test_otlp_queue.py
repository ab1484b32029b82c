"""The OTLP queue (runs/actions/otlp_queue.py, runs/telemetry/otlp_worker.py): /v1/traces answers
once the spans are checked and spooled, a worker stores them.

Here the worker runs in the test's process (``otlp_worker.run(once=True)``, the same code the
``otlp_worker`` command runs); tests/live/test_otlp_queue_live.py drives a real server, its own
worker process, the SDK's exporter and a kill -9 of the worker.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from accounts.tokens import create_token
from runs import actions
from runs.actions import otlp_queue
from runs.actions.notify import RunChange, register_listener, unregister_listener
from runs.actions.otlp import do_ingest_spans
from runs.actions.otlp_queue import Spool
from runs.models import Event, OtelTrace, Run, Workspace
from runs.protocol.values import loads
from runs.telemetry import otlp_worker, transcript_log

pytestmark = pytest.mark.django_db(transaction=True)

T0 = 1_767_225_600_000_000_000


@pytest.fixture
def spool(tmp_path, settings):
    settings.WORKBENCH_OTLP_QUEUE = True
    settings.WORKBENCH_OTLP_WORKER_INPROCESS = False
    settings.WORKBENCH_OTLP_SPOOL_DIR = tmp_path / "spool"
    settings.WORKBENCH_OTLP_QUEUE_WAIT_SECONDS = 0
    return Spool(tmp_path / "spool")


def secret(workspace, scopes=("read", "write")) -> str:
    return create_token(workspace=workspace, name="otel", scopes=list(scopes)).secret


def attr(key: str, value) -> dict:
    kind = {str: "stringValue", int: "intValue", bool: "boolValue"}[type(value)]
    return {"key": key, "value": {kind: str(value) if kind == "intValue" else value}}


def otlp_span(trace: int, n: int, *, parent: int | None = 0, name: str = "step", attrs=None) -> dict:
    span = {
        "traceId": f"{trace + 1:032x}",
        "spanId": f"{trace * 100 + n + 1:016x}",
        "name": name,
        "kind": 1,
        "startTimeUnixNano": str(T0 + n * 1_000_000),
        "endTimeUnixNano": str(T0 + n * 1_000_000 + 500_000),
        "attributes": [attr(k, v) for k, v in (attrs or {}).items()],
        "status": {"code": 1},
    }
    if parent is not None:
        span["parentSpanId"] = f"{trace * 100 + parent + 1:016x}"
    return span


CHAT = {
    "gen_ai.operation.name": "chat",
    "gen_ai.provider.name": "openai",
    "gen_ai.request.model": "gpt-4o-mini",
    "gen_ai.usage.input_tokens": 100,
    "gen_ai.usage.output_tokens": 20,
}


def a_trace(trace: int) -> list[dict]:
    return [
        otlp_span(trace, 0, parent=None, name="request"),
        otlp_span(trace, 1, name="chat gpt-4o-mini", attrs=CHAT),
        otlp_span(trace, 2),
    ]


def body(spans: list[dict], resource: dict | None = None) -> bytes:
    attrs = [attr(k, v) for k, v in (resource or {"service.name": "queued-app"}).items()]
    return json.dumps(
        {"resourceSpans": [{"resource": {"attributes": attrs}, "scopeSpans": [{"spans": spans}]}]}
    ).encode()


def post(client, workspace, data: bytes, token: str | None = None, **headers):
    token = token or secret(workspace)
    return client.post(
        "/v1/traces", data, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}", **headers
    )


def stored(workspace) -> list[dict]:
    return [
        loads(b)
        for b in Event.objects.filter(run__workspace=workspace)
        .order_by("run_id", "seq")
        .values_list("body", flat=True)
    ]


def test_answered_when_queued_stored_by_the_worker(client, workspace, spool):
    response = post(client, workspace, body(a_trace(0) + a_trace(1)))
    assert response.status_code == 200 and response.json() == {}
    assert not Event.objects.exists() and spool.pending_spans() == 6  # answered before storing
    assert otlp_worker.run(spool=spool, once=True) == 1
    assert spool.pending_spans() == 0 and not os.listdir(spool.ready) and not os.listdir(spool.claimed)
    assert OtelTrace.objects.filter(workspace=workspace).count() == 2
    runs = Run.unscoped.filter(workspace=workspace)
    assert sorted(r.model_calls for r in runs) == [1, 1] and all(r.cost_totals for r in runs)  # priced
    assert [e["type"] for e in stored(workspace)].count("span_started") == 6
    assert float((spool.root / "rate").read_text()) > 0  # the worker's rate, for the window


def test_the_queue_stores_what_storing_at_once_stores(client, workspace, spool, settings):
    """The same request, queued in one workspace and stored at once in another: the same events."""
    other = Workspace.objects.create(slug="direct", name="Direct")
    data = body(a_trace(0) + a_trace(1))
    assert post(client, workspace, data).status_code == 200
    otlp_worker.run(spool=spool, once=True)
    settings.WORKBENCH_OTLP_QUEUE = False
    assert post(client, other, data).status_code == 200

    def comparable(events):
        return sorted(
            json.dumps({k: v for k, v in e.items() if k not in ("runId", "seq")}, sort_keys=True)
            for e in events
        )

    assert comparable(stored(workspace)) == comparable(stored(other))


def test_a_malformed_span_is_a_partial_success_and_the_rest_is_queued(client, workspace, spool):
    bad = otlp_span(5, 0, parent=None)
    bad["spanId"] = "00"  # not 16 hex digits
    response = post(client, workspace, body([*a_trace(0), bad]))
    assert response.status_code == 200
    assert response.json()["partialSuccess"]["rejectedSpans"] == "1"
    assert spool.pending_spans() == 3
    otlp_worker.run(spool=spool, once=True)
    assert [e["type"] for e in stored(workspace)].count("span_started") == 3


def test_a_span_naming_a_run_the_workspace_lacks_is_refused_in_the_answer(client, workspace, spool):
    response = post(client, workspace, body(a_trace(0)), HTTP_X_WORKBENCH_RUN="run_nowhere")
    assert response.status_code == 200
    assert response.json()["partialSuccess"]["rejectedSpans"] == "3"
    assert "run_nowhere" in response.json()["partialSuccess"]["errorMessage"]
    assert spool.pending_spans() == 0 and not spool.ready.exists()  # nothing queued


def test_one_span_naming_an_unknown_run_is_refused_alone(client, workspace, spool):
    spans = a_trace(0)
    spans[1]["attributes"].append(attr("workbench.run.id", "run_nowhere"))
    response = post(client, workspace, body(spans))
    assert response.status_code == 200
    assert response.json()["partialSuccess"]["rejectedSpans"] == "1"
    assert spool.pending_spans() == 2
    otlp_worker.run(spool=spool, once=True)
    assert [e["type"] for e in stored(workspace)].count("span_started") == 2


def test_spans_for_a_named_run_are_queued_and_appended(client, workspace, workflow, spool):
    actions.do_start_run(workspace=workspace, workflow=workflow, actor="test", run_id="run_named")
    response = post(client, workspace, body(a_trace(0)), HTTP_X_WORKBENCH_RUN="run_named")
    assert response.status_code == 200 and response.json() == {}
    otlp_worker.run(spool=spool, once=True)
    run = Run.unscoped.get(workspace=workspace, run_id="run_named")
    assert Event.objects.filter(run=run, type="span_started").count() == 3


def test_no_room_in_the_window_answers_503_and_queues_nothing(client, workspace, spool):
    spool.ensure().put(workspace_id=workspace.pk, body=b"{}", content_type="application/json", spans=900,
                       header_run_id=None, actor="otlp")  # fmt: skip
    spool.write_rate(100.0)  # 900 spans waiting at 100 spans/s: 9 s of work, far past the window
    response = post(client, workspace, body(a_trace(0)))
    assert response.status_code == 503 and response["Retry-After"] == "1"
    assert response.json()["code"] == "STORAGE_UNAVAILABLE"
    assert len(os.listdir(spool.ready)) == 1  # only what was there


def test_a_receiver_waiting_for_room_goes_on_once_the_worker_made_it(spool):
    """The receiver's wait (Spool.wait_for_room) ends when the worker stores what filled the
    window, and gives up (QueueFull) when nothing is stored within its wait."""
    waiting = spool.ensure().put(workspace_id=1, body=b"{}", content_type="application/json", spans=900,
                                 header_run_id=None, actor="otlp")  # fmt: skip
    spool.write_rate(1000.0)  # 900 + 200 spans at 1,000 spans/s: 1.1 s, past a 1 s window
    with pytest.raises(otlp_queue.QueueFull):
        spool.wait_for_room(200, window=1.0, wait=0.05)
    stored = threading.Timer(0.1, waiting.unlink)  # the worker stored it
    stored.start()
    spool.wait_for_room(200, window=1.0, wait=30)
    stored.join()
    assert not waiting.exists() and spool.pending_spans() == 0
    spool.wait_for_room(2000, window=1.0, wait=0)  # nothing queued: a body always goes


@pytest.mark.parametrize("scopes", [("read",), None])
def test_a_refused_caller_queues_nothing(client, workspace, spool, scopes):
    token = secret(workspace, scopes) if scopes else "wb_nope"
    response = post(client, workspace, body(a_trace(0)), token=token)
    assert response.status_code in (401, 403)
    assert not spool.ready.exists() or not os.listdir(spool.ready)


def test_an_undecodable_body_is_refused_whole_and_queues_nothing(client, workspace, spool):
    response = post(client, workspace, b"{not json")
    assert response.status_code == 400
    assert not spool.ready.exists() or not os.listdir(spool.ready)


def test_a_dead_workers_claim_is_stored_once(client, workspace, spool):
    """A worker killed mid-body leaves its claim: the next worker puts it back and stores it; a body
    stored twice (killed after its commit, before it deleted the file) is stored once."""
    assert post(client, workspace, body(a_trace(0))).status_code == 200
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    item = spool.claim_next(pid=dead.pid)
    assert item is not None and item.path.parent == spool.claimed
    assert spool.claim_next() is None  # claimed: no other worker takes it
    assert otlp_worker.run(spool=spool, once=True) == 1  # recovers the claim first
    # the same body queued again, as if the first worker had committed and died before deleting
    (spool.ready / "99999999999999999999-1-1.3.otlp").write_bytes(
        b"".join([json.dumps(_head(workspace)).encode(), b"\n", body(a_trace(0))])
    )
    assert otlp_worker.run(spool=spool, once=True) == 1
    assert [e["type"] for e in stored(workspace)].count("span_started") == 3
    assert Run.unscoped.filter(workspace=workspace).count() == 1


def _head(workspace) -> dict:
    return {
        "workspace": workspace.pk,
        "run": None,
        "actor": "otlp",
        "contentType": "application/json",
        "spans": 3,
    }


def test_a_body_that_keeps_failing_ends_in_failed_not_lost(workspace, spool, monkeypatch):
    spool.ensure().put(workspace_id=workspace.pk, body=body(a_trace(0)), content_type="application/json", spans=3,
                       header_run_id=None, actor="otlp")  # fmt: skip

    def broken(**kwargs):
        raise RuntimeError("database down")

    monkeypatch.setattr(otlp_worker, "do_ingest_spans", broken)
    monkeypatch.setattr(otlp_worker.time, "sleep", lambda s: None)
    for _ in range(otlp_queue.MAX_ATTEMPTS):
        otlp_worker.run(spool=spool, once=True)
    assert not os.listdir(spool.ready) and len(os.listdir(spool.failed)) == 1
    monkeypatch.setattr(otlp_worker, "do_ingest_spans", do_ingest_spans)
    assert otlp_worker.run(spool=spool, once=True) == 0  # never retried on its own
    assert not Event.objects.exists()


def test_the_worker_forwards_its_changes_to_the_servers_listeners(workspace):
    """The embedded profile's worker: its committed changes reach the server's listeners (the live
    pages) as JSON lines on its standard output."""
    out = io.StringIO()
    forward = otlp_worker.forward_changes(out)
    forward(RunChange(workspace.pk, "run_a", 1, 4, "running", 7, events=({"id": "x"},), actor="otlp"))
    heard: list[RunChange] = []
    register_listener(heard.append)
    try:
        otlp_worker._read_changes(io.StringIO(out.getvalue() + "not json\n"))
    finally:
        unregister_listener(heard.append)
    assert heard == [RunChange(workspace.pk, "run_a", 1, 4, "running", 7)]
    assert heard[0].decided is False and not heard[0].may_hold_decision()


def test_a_forwarded_change_without_a_decision_costs_the_server_no_query(workspace):
    """The server hears every change its worker commits; the waiting-fork listener used to run
    an UPDATE for each (the events stay in the worker), contending for SQLite's write lock with
    the worker. A change the worker says holds no decision runs no query; one that may does."""
    out = io.StringIO()
    forward = otlp_worker.forward_changes(out)
    forward(RunChange(workspace.pk, "run_a", 1, 4, "running", 7, events=({"type": "span_started"},)))
    forward(RunChange(workspace.pk, "run_b", 5, 5, "running", 8, events=({"type": "human_gate_resolved"},)))
    quiet, decided = out.getvalue().splitlines()
    with CaptureQueriesContext(connection) as queries:
        otlp_worker._read_changes(io.StringIO(quiet + "\n"))
    assert not [q for q in queries if "runs_runfork" in q["sql"]]
    with CaptureQueriesContext(connection) as queries:
        otlp_worker._read_changes(io.StringIO(decided + "\n"))
    assert [q for q in queries if "runs_runfork" in q["sql"]]


def test_without_the_queue_nothing_is_spooled(client, workspace, spool, settings):
    settings.WORKBENCH_OTLP_QUEUE = False
    assert post(client, workspace, body(a_trace(0))).status_code == 200
    assert Event.objects.filter(type="span_started").count() == 3
    assert not spool.ready.exists()


def test_the_spool_is_the_server_users_alone(client, workspace, spool):
    assert post(client, workspace, body(a_trace(0))).status_code == 200
    (queued,) = spool.ready.iterdir()
    assert queued.stat().st_mode & 0o777 == 0o600
    assert all(
        (spool.root / d).stat().st_mode & 0o777 == 0o700 for d in ("ready", "claimed", "failed", "tmp")
    )


def test_a_body_of_a_workspace_deleted_since_is_dropped(client, workspace, spool):
    assert post(client, workspace, body(a_trace(0))).status_code == 200
    Workspace.objects.filter(pk=workspace.pk).delete()
    assert otlp_worker.run(spool=spool, once=True) == 1
    assert spool.pending_spans() == 0 and not os.listdir(spool.failed) and not Event.objects.exists()


def test_the_status_says_what_waits(client, workspace, spool):
    from django.core.management import call_command

    assert post(client, workspace, body(a_trace(0) + a_trace(1))).status_code == 200
    out = io.StringIO()
    call_command("otlp_worker", "--status", stdout=out)
    status = json.loads(out.getvalue())
    assert status["queued"] == {"bodies": 1, "spans": 6} and status["failed"] == {"bodies": 0, "spans": 0}


def test_the_window_uses_the_slowest_of_the_last_three_batches(spool):
    spool.ensure()
    meter = otlp_worker.RateMeter(spool)
    for spans, seconds in ((1000, 1.0), (4000, 1.0), (4000, 1.0), (4000, 1.0)):
        meter.add(spans, seconds)
    assert meter.rate == 4000 and spool.rate() == 4000  # the slow first batch is three batches ago
    meter.add(2000, 1.0)
    assert meter.rate == 2000  # a slowdown counts at once


def test_the_worker_checkpoints_the_wal_when_its_queue_runs_empty_not_per_batch(
    client, workspace, spool, monkeypatch, settings
):
    settings.WORKBENCH_OTLP_WORKER_BATCH_SPANS = 3  # one body per batch: two batches below
    calls = []
    monkeypatch.setattr(otlp_worker, "checkpoint_wal", lambda: calls.append(spool.pending_spans()))
    assert otlp_worker.run(spool=spool, once=True) == 0
    assert calls == []  # nothing stored: nothing to copy
    for trace in (0, 1):
        assert post(client, workspace, body(a_trace(trace))).status_code == 200
    assert otlp_worker.run(spool=spool, once=True) == 2
    assert calls == [0]  # once, after both batches, with the queue empty
    assert sum(e["type"] == "span_started" for e in stored(workspace)) == 6


def test_the_workers_connection_checkpoints_late_and_copies_the_wal_on_demand(workspace, settings):
    settings.WORKBENCH_OTLP_WORKER_CHECKPOINT_PAGES = 4096
    with connection.cursor() as cursor:
        if connection.vendor != "sqlite":  # PostgreSQL has no WAL of ours to copy
            otlp_worker._checkpoint_pages(None, connection)
            assert otlp_worker.checkpoint_wal() is None
            return
        try:
            otlp_worker._checkpoint_pages(None, connection)
            assert cursor.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 4096
            do_ingest_spans(workspace=workspace, spans=a_trace(0))  # a write in the WAL
            frames, copied = otlp_worker.checkpoint_wal()
            assert frames > 0 and copied == frames  # all of it in the database file now
            settings.WORKBENCH_OTLP_WORKER_CHECKPOINT_PAGES = 0
            assert otlp_worker.checkpoint_wal() is None  # SQLite's own schedule
        finally:
            cursor.execute("PRAGMA wal_autocheckpoint=1000")


def test_an_idle_worker_makes_transcript_files_ahead_and_a_new_trace_takes_one(
    client, workspace, spool, settings
):
    settings.WORKBENCH_TRANSCRIPTS_OF_TRACES = "live"  # the trace's file is written as it comes
    transcript_log.keep_files_ready(8)
    ready = transcript_log.transcript_dir() / ".pool" / str(os.getpid())
    stop = threading.Event()

    def work() -> None:
        try:
            otlp_worker.run(spool=spool, stop=stop)
        finally:
            connection.close()  # the thread's own

    worker = threading.Thread(target=work)
    worker.start()
    try:
        deadline = time.monotonic() + 10
        while (not ready.is_dir() or len(os.listdir(ready)) < 8) and time.monotonic() < deadline:
            time.sleep(0.01)
        made = {os.stat(ready / name).st_ino for name in os.listdir(ready)}
        assert len(made) == 8  # made while nothing was queued
        assert post(client, workspace, body(a_trace(0))).status_code == 200
        while spool.pending_spans() and time.monotonic() < deadline:
            time.sleep(0.01)
        run = Run.unscoped.get(workspace=workspace)
        assert transcript_log.transcript_path(run).stat().st_ino in made
    finally:
        stop.set()
        worker.join(10)
        transcript_log.keep_files_ready(0)


def _no_decoding(monkeypatch) -> None:
    def refused(body):
        raise AssertionError("the worker decoded a body the receiver had mapped")

    monkeypatch.setattr(otlp_worker, "spans_from_json", refused)
    monkeypatch.setattr(otlp_worker, "spans_from_protobuf", refused)


def test_the_worker_stores_the_receivers_mapped_spans_without_decoding_the_body(
    client, workspace, workflow, spool, settings, monkeypatch
):
    """Each queued file carries the spans as the receiver's check mapped them; the worker routes
    and stores those (one batch of several bodies here) and stores what it stores when it decodes
    and maps the same bodies itself, for new traces, a trace split over two bodies, a root in a
    later body naming a run (its child in an earlier one follows it), a span the mapping refused
    and a resource-level session."""
    other = Workspace.objects.create(slug="direct", name="Direct")
    for ws in (workspace, other):
        actions.do_start_run(workspace=ws, workflow=workflow, actor="test", run_id="run_named")
    named = Run.unscoped.get(workspace=workspace, run_id="run_named")
    split = a_trace(3)
    tagged = [otlp_span(4, 0, parent=None, name="root", attrs={"workbench.run.id": "run_named"}),
              otlp_span(4, 1, name="child")]  # fmt: skip
    unmappable = otlp_span(
        5, 0, parent=None, attrs={"gen_ai.operation.name": "chat", "gen_ai.request.model": 7}
    )
    requests = [
        body(a_trace(0) + a_trace(1) + split[:1], {"service.name": "app", "session.id": "s-1"}),
        body(split[1:] + tagged[1:] + [unmappable]),
        body(tagged[:1] + a_trace(2)),
    ]
    token = secret(workspace)  # one caller: its bodies are stored together
    answers = [post(client, workspace, data, token) for data in requests]
    assert all(a.status_code == 200 for a in answers)
    files = sorted(spool.ready.iterdir())
    assert all(json.loads(f.read_bytes().partition(b"\n")[0])["mapped"] > 0 for f in files)
    _no_decoding(monkeypatch)
    assert otlp_worker.run(spool=spool, once=True, batch_spans=10_000) == 3
    monkeypatch.undo()
    # the same requests queued for the other workspace, their mapped parts taken out
    token = secret(other)
    assert [post(client, other, data, token).json() for data in requests] == [a.json() for a in answers]
    for path in sorted(spool.ready.iterdir()):
        head_line, _, rest = path.read_bytes().partition(b"\n")
        head = json.loads(head_line)
        path.write_bytes(json.dumps({**head, "mapped": 0}).encode() + b"\n" + rest[head["mapped"] :])
    assert otlp_worker.run(spool=spool, once=True, batch_spans=10_000) == 3

    def comparable(ws):
        out = []
        for run in Run.unscoped.filter(workspace=ws).order_by("run_id"):
            events = Event.objects.filter(run=run).order_by("seq").values_list("body", flat=True)
            trace = OtelTrace.objects.filter(run=run).values_list("trace_id", "session_id", "title").first()
            out.append((run.run_id if run.run_id == "run_named" else "", run.title, sorted(run.tags), trace,
                        [{k: v for k, v in loads(e).items() if k != "runId"} for e in events]))  # fmt: skip
        return sorted(out, key=json.dumps)

    assert comparable(workspace) == comparable(other)
    assert Event.objects.filter(run=named, type="span_started").count() == 2  # the root's child followed it
    assert OtelTrace.objects.filter(workspace=workspace).count() == 5


def test_content_logs_waiting_for_a_queued_span_are_joined_on(client, workspace, spool, monkeypatch):
    """Content log records kept for a span that is queued: the worker maps that batch's bodies
    itself, with the records joined on (the mapped part cannot hold them)."""
    spans = a_trace(0)
    record = {
        "timeUnixNano": str(T0),
        "traceId": spans[1]["traceId"],
        "spanId": spans[1]["spanId"],
        "eventName": "gen_ai.user.message",
        "body": {"kvlistValue": {"values": [{"key": "content", "value": {"stringValue": "canary-7"}}]}},
    }
    logs = json.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": [record]}]}]})
    token = secret(workspace)
    sent = client.post(
        "/v1/logs", logs, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )
    assert sent.status_code == 200
    assert post(client, workspace, body(spans)).status_code == 200
    assert otlp_worker.run(spool=spool, once=True) == 1
    requests = [e for e in stored(workspace) if e["type"] == "model_io" and e["direction"] == "request"]
    assert "canary-7" in json.dumps(requests)


def test_a_file_queued_without_its_mapped_part_is_still_stored(workspace, spool):
    """A body queued by an earlier version (no mapped part) or whose part is damaged: decoded and
    mapped by the worker."""
    spool.ensure()
    (spool.ready / "00000000000000000001-1-1.3.otlp").write_bytes(
        b"".join([json.dumps(_head(workspace)).encode(), b"\n", body(a_trace(0))])
    )
    damaged = b'{"spans": [[{"traceId": 1}]]'
    head = {**_head(workspace), "mapped": len(damaged)}
    (spool.ready / "00000000000000000002-1-1.3.otlp").write_bytes(
        b"".join([json.dumps(head).encode(), b"\n", damaged, body(a_trace(1))])
    )
    assert otlp_worker.run(spool=spool, once=True) == 2
    assert Run.unscoped.filter(workspace=workspace).count() == 2
    assert [e["type"] for e in stored(workspace)].count("span_started") == 6
