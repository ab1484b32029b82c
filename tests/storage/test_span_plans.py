"""The span tree's reads of ends and children (runs.selectors.spans: ``_refs``, ``_with_children``)
probe the (run, type, span_ref, seq) index once per span on PostgreSQL, also for a run whose rows
the planner has no statistics of (a run just imported). Given ``span_ref IN (...)`` with ``ORDER BY
seq LIMIT``, and an EXISTS pulled up into a semi-join, the planner walked all the run's span ends
and starts instead: 394 and 458 ms on a 1M-event imported run, seconds at 10M (the run page took
1.5 s there, 0.4 s after). Plans are checked, not times; no ANALYZE. Skipped on SQLite."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs import actions
from runs.models import Run
from runs.selectors import spans

pytestmark = pytest.mark.django_db


def test_span_ends_and_children_are_probed_per_span(workspace, workflow) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL plans")
    actions.do_start_run(workspace=workspace, workflow=workflow, actor="t", run_id="run_spans")
    run = Run.unscoped.get(workspace=workspace, run_id="run_spans")
    with connection.cursor() as cursor:  # 40,000 spans started and ended, none analyzed
        cursor.execute(
            "INSERT INTO runs_event (run_id, seq, event_id, type, ts, step_id, correlation_id, span_ref,"
            " body, actor, recorded_at) SELECT %s, 10 + 2 * s + k, 'e' || s || '-' || k,"
            " CASE k WHEN 0 THEN 'span_started' ELSE 'span_ended' END, '2026-03-01T10:00:00.000Z', '', '',"
            " CASE k WHEN 0 THEN 'parent:' ELSE 'end:s' || s END,"
            ' CASE k WHEN 0 THEN \'{"type":"span_started","spanId":"s\' || s || \'","name":"n",'
            '"ts":"2026-03-01T10:00:00.000Z"}\''
            ' ELSE \'{"type":"span_ended","spanId":"s\' || s || \'","status":"ok",'
            '"ts":"2026-03-01T10:00:00.001Z"}\' END, \'\', now()'
            " FROM generate_series(1, 40000) AS s CROSS JOIN generate_series(0, 1) AS k",
            [run.pk],
        )
        cursor.execute("UPDATE runs_run SET last_seq = 80011 WHERE id = %s", [run.pk])
    with CaptureQueriesContext(connection) as ctx:
        level = spans.span_level(run, after=70_000)
    assert len(level.level.nodes) == spans.LEVEL_PAGE  # the first page of roots after seq 70,000
    assert all(node.end_seq == node.start_seq + 1 and node.status == "ok" for node in level.level.nodes)
    probes = [q["sql"] for q in ctx.captured_queries if "c(ref)" in q["sql"]]
    assert len(probes) == 2, [q["sql"] for q in ctx.captured_queries]
    for sql in probes:
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN " + sql)
            plan = "\n".join(row[0] for row in cursor.fetchall())
        probe = [line for line in plan.splitlines() if "Index" in line and "event_run_span" in line]
        assert probe and any("Index Cond" in line and "= c.ref" in line for line in plan.splitlines()), plan
        assert "event_run_type" not in plan and "Seq Scan on runs_event" not in plan, plan
