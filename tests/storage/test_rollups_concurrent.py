"""PostgreSQL: writers of one workspace appending priced calls to their own runs at once, while runs
are started and deleted beside them, all land in the rollups (no lost update, no deadlock)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections

from runs import actions
from runs.actions import rollups
from runs.models import Workspace

pytestmark = pytest.mark.django_db(transaction=True)

WORKFLOW = {"id": "wf-conc", "version": 1, "steps": [{"id": "a"}], "edges": []}


def _response(run_id: str, n: int) -> dict:
    return {
        "id": f"evt_{run_id}_{n}",
        "runId": run_id,
        "ts": "2026-03-01T10:00:00.000Z",
        "type": "model_io",
        "direction": "response",
        "provider": "openai",
        "model": "m",
        "stepId": "a",
        "usage": {"inputTokens": 3, "outputTokens": 1},
        "cost": {"amount": 0.1, "currency": "USD"},
    }


def test_concurrent_writers_keep_rollups_exact():
    if connection.vendor != "postgresql":
        pytest.skip("concurrent writers: PostgreSQL")
    workspace = Workspace.objects.create(slug="conc", name="conc")
    run_ids = [f"run_w{i}" for i in range(4)]
    for run_id in run_ids:
        actions.do_start_run(workspace=workspace, workflow=WORKFLOW, run_id=run_id)
    errors: list[BaseException] = []

    def writer(run_id: str) -> None:
        try:
            for n in range(15):
                events = [_response(run_id, 2 * n), _response(run_id, 2 * n + 1)]
                actions.do_append_events(workspace=workspace, run_id=run_id, events=events)
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            errors.append(exc)
        finally:
            connections.close_all()

    def churn() -> None:
        try:
            for n in range(10):
                run_id = f"run_c{n}"
                actions.do_start_run(workspace=workspace, workflow=WORKFLOW, run_id=run_id)
                actions.do_append_events(workspace=workspace, run_id=run_id, events=[_response(run_id, 0)])
                actions.do_delete_run(workspace=workspace, run_id=run_id)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=writer, args=(r,)) for r in run_ids] + [threading.Thread(target=churn)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert rollups.rollups_match(workspace)
    costs, counts = rollups.stored(workspace)
    assert sum(v[0] for v in costs.values()) == 4 * 30
    assert sum(v[-1] for v in costs.values()) == pytest.approx(12)
    assert sum(v[0] for v in counts.values()) == 4
