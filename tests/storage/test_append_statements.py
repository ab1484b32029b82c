"""On PostgreSQL an append costs two statements besides BEGIN/COMMIT: the locking SELECT (sent
with BEGIN in one round trip) and one UPDATE of the run that carries the event INSERT in a WITH
clause. Large batches go through COPY. What lands is the same either way."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs import actions
from runs.actions import core
from runs.engine.commands import BeginStep
from runs.models import Event, Run

pytestmark = pytest.mark.django_db(transaction=True)


def tool(run_id: str, i: int) -> dict:
    return {
        "id": f"evt_stmt_{i}",
        "runId": run_id,
        "ts": "2026-01-01T00:00:00.000Z",
        "type": "tool_call",
        "name": "search",
        "args": {"q": str(i)},
    }


@pytest.fixture
def run(workspace):
    workflow = {"id": "wf", "version": 1, "steps": [{"id": "a"}], "edges": []}
    return actions.do_start_run(workspace=workspace, workflow=workflow, run_id="run_stmt")


def test_one_event_one_write_statement(workspace, run):
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL statement shape")
    with CaptureQueriesContext(connection) as queries:
        actions.do_append_events(workspace=workspace, run_id=run.run_id, events=[tool(run.run_id, 1)])
    sqls = [q["sql"] for q in queries.captured_queries]
    writes = [s for s in sqls if not s.startswith(("SELECT", "BEGIN", "COMMIT"))]
    assert len(writes) == 1 and writes[0].startswith("WITH appended AS (INSERT INTO"), sqls
    assert sum("FOR UPDATE" in s for s in sqls) == 1
    stored = Run.objects.get(run_id=run.run_id)
    assert stored.last_seq == 1 and stored.event_count == 1
    assert list(Event.objects.filter(run=run).values_list("seq", "event_id")) == [(1, "evt_stmt_1")]


def test_small_and_large_batches_store_the_same(workspace, run):
    actions.do_append_events(
        workspace=workspace, run_id=run.run_id, events=[tool(run.run_id, i) for i in range(3)]
    )
    big = [tool(run.run_id, i) for i in range(3, 3 + core._INSERT_VALUES_MAX_ROWS + 5)]
    actions.do_append_events(workspace=workspace, run_id=run.run_id, events=big)
    total = 3 + len(big)
    stored = Run.objects.get(run_id=run.run_id)
    assert stored.last_seq == total and stored.event_count == total
    seqs = list(Event.objects.filter(run=run).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, total + 1))
    assert actions.projection_matches_fold(stored)


def test_an_unknown_run_changes_nothing(workspace):
    with pytest.raises(actions.ActionError) as info:
        actions.do_append_events(workspace=workspace, run_id="run_missing", events=[tool("run_missing", 1)])
    assert info.value.code == "UNKNOWN_RUN"
    assert not Event.objects.exists()


def model_io(run_id: str, i: int, direction: str, correlation: str | None, text: str = "") -> dict:
    event = {
        "id": f"evt_mio_{i}",
        "runId": run_id,
        "ts": "2026-01-01T00:00:00.000Z",
        "type": "model_io",
        "stepId": "a",
        "direction": direction,
        "provider": "openai",
        "model": "m",
        "payload": {"messages": [{"role": "user", "content": f"q{i}"}]}
        if direction == "request"
        else {"text": text},
    }
    if correlation:
        event["correlationId"] = correlation
    return event


def test_response_cache_is_filled_within_and_across_batches(workspace, run):
    """Requests, stream chunks and responses found among the batch's own rows (not written yet
    when the response is processed) and in earlier batches alike."""
    from runs.models import CachedResponse

    rid = run.run_id
    begin = {
        "id": "evt_begin",
        "runId": rid,
        "ts": "2026-01-01T00:00:00.000Z",
        "type": "step_started",
        "stepId": "a",
    }
    same_batch = [
        begin,
        model_io(rid, 1, "request", "c1"),
        model_io(rid, 2, "stream_chunk", "c1", "hel"),
        model_io(rid, 3, "response", "c1", "hello"),
        model_io(rid, 4, "request", None),
        model_io(rid, 5, "response", None, "plain"),
        model_io(rid, 6, "request", "c2"),
    ]
    actions.do_append_events(workspace=workspace, run_id=rid, events=same_batch)
    actions.do_append_events(
        workspace=workspace, run_id=rid, events=[model_io(rid, 7, "response", "c2", "later")]
    )
    actions.do_append_events(workspace=workspace, run_id=rid, events=[model_io(rid, 9, "request", None)])
    actions.do_append_events(
        workspace=workspace, run_id=rid, events=[model_io(rid, 10, "response", None, "x")]
    )
    entries = {e.request_seq: e for e in CachedResponse.objects.filter(run=run)}
    assert sorted((e.request_seq, e.response_seq) for e in entries.values()) == [
        (2, 4),
        (5, 6),
        (7, 8),
        (9, 10),
    ]
    import orjson

    assert [c["payload"] for c in orjson.loads(entries[2].response)["chunks"]] == [{"text": "hel"}]


def test_appends_to_a_long_run_probe_the_indexes_not_the_run(workspace, run):
    """The duplicate-id check and the response cache's correlation lookup name both the run and a
    list of values: on SQLite they must probe (run, event_id) and (run, correlation_id, seq). The
    planner, left alone, scanned every event of the run, once per append."""
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's planner, which has no statistics here")
    model_call = {
        "runId": run.run_id, "ts": "2026-01-01T00:00:00.000Z", "type": "model_io", "provider": "anthropic",
        "model": "claude-haiku-4-5", "stepId": "a",
    }  # fmt: skip
    actions.do_command(workspace=workspace, run_id=run.run_id, command=BeginStep(step_id="a"))
    history = [tool(run.run_id, i) for i in range(200)]
    actions.do_append_events(workspace=workspace, run_id=run.run_id, events=history)
    batch = [
        {
            **model_call,
            "id": "evt_req",
            "direction": "request",
            "correlationId": "c1",
            "payload": {"messages": []},
        },
        {
            **model_call,
            "id": "evt_res",
            "direction": "response",
            "correlationId": "c1",
            "payload": {"text": "hi"},
        },
    ]
    with CaptureQueriesContext(connection) as queries:
        actions.do_append_events(workspace=workspace, run_id=run.run_id, events=batch)
    probes = [q["sql"] for q in queries.captured_queries if " IN (" in q["sql"] and "runs_event" in q["sql"]]
    assert any(re.search(r'event_id"? IN', sql) for sql in probes), probes
    with connection.cursor() as cursor:
        for sql in probes:
            cursor.execute("EXPLAIN QUERY PLAN " + sql)
            plan = " ".join(str(row[-1]) for row in cursor.fetchall())
            assert "event_run_event_id" in plan or "event_run_corr" in plan, (sql, plan)
