"""The response cache's search of stored requests (runs.actions.responsecache._search_stored, run for
every batch of an import whose responses' requests were not in the batch) probes the
``event_run_corr`` index once per correlation id on PostgreSQL. Given ``correlation_id IN (...)``,
the planner read the run's ``model_io`` rows backwards by ``event_run_type`` and filtered the ids
whenever it had no statistics of the run's rows (a fresh database, or a run created by the
importing transaction): every batch then read all the run's model_io rows before it, and a
10M-event import was quadratic (bench/bench_import.py: the backend's CPU per event ~120 us at
100k events, ~400 us at 3.5M). Plans are checked, not times; no ANALYZE. Skipped on SQLite."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.actions import responsecache
from runs.actions.bigimport import do_import_bundle_file
from runs.actions.workspaces import get_or_create_workspace
from tests.bigbundle import generate_bundle

pytestmark = pytest.mark.django_db


def test_stored_search_probes_the_correlation_index(tmp_path) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL plans")
    run = do_import_bundle_file(
        workspace=get_or_create_workspace("plan"), path=generate_bundle(tmp_path / "b.json", 200), actor="t"
    )
    with connection.cursor() as cursor:  # 60,000 more model_io rows of the run, none analyzed
        cursor.execute(
            "INSERT INTO runs_event (run_id, seq, event_id, type, ts, step_id, correlation_id, span_ref,"
            " body, actor, recorded_at) SELECT %s, 1000 + s, 'e' || s, 'model_io', '2026-03-01T10:00:00.000Z',"
            " 'draft', 'corr-x' || s, '', '{\"type\":\"model_io\",\"direction\":\"request\"}', '', now()"
            " FROM generate_series(1, 60000) AS s",
            [run.pk],
        )
    wanted = {70_000 + i: (f"corr-x{i * 7}", []) for i in range(1, 400)}
    with CaptureQueriesContext(connection) as ctx:
        found = responsecache._search_stored(run, 70_000, wanted)
    assert sum(1 for request, _ in found.values() if request is not None) == 399  # every request found
    (sql,) = [q["sql"] for q in ctx.captured_queries]
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + sql)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert (
        "event_run_corr" in plan and "event_run_type" not in plan and "Seq Scan on runs_event" not in plan
    ), plan
