"""Rollup rebuilds as tasks: ``manage.py rebuild_rollups --background`` enqueues one task row per
workspace asked for, and the workers rebuild those workspaces (and no other) from their events."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django_tasks_db.models import DBTaskResult

from runs import actions
from runs.actions import rollups
from runs.background.rollups import enqueue_rebuild, rebuild_rollups_task
from runs.background.worker import run_until_idle
from runs.models import CostRollup, Workspace
from tests.background.conftest import db_tasks  # noqa: F401  (the fixture)
from tests.storage.test_rollups import WORKFLOW, _event

SPEC = {"provider": "p", "model": "m", "stepId": None, "day": "2026-03-01", "usage": None, "durationMs": 5}


def _damaged(slug: str) -> Workspace:
    workspace = Workspace.objects.create(slug=slug, name=slug)
    actions.do_start_run(workspace=workspace, workflow=WORKFLOW, run_id=f"{slug}-r")
    actions.do_append_events(
        workspace=workspace, run_id=f"{slug}-r", events=[_event(f"{slug}-r", {**SPEC, "cost": (2, "EUR")})]
    )
    CostRollup.objects.filter(workspace=workspace).update(calls=99)
    assert not rollups.rollups_match(workspace)
    return workspace


def _rows():
    return DBTaskResult.objects.filter(task_path=rebuild_rollups_task.module_path)


@pytest.mark.django_db(transaction=True)
def test_the_command_enqueues_a_rebuild_per_workspace_and_the_workers_run_it(db_tasks):  # noqa: F811
    asked, other = _damaged("asked"), _damaged("other")
    out = io.StringIO()
    call_command("rebuild_rollups", "--background", "--workspace", "asked", stdout=out)
    assert "asked: queued (task " in out.getvalue()
    (row,) = _rows()
    assert row.args_kwargs["args"] == [asked.pk] and row.status == "READY"
    assert not rollups.rollups_match(asked)  # queued, not run in the command
    assert run_until_idle(queues=["default"], limit=5) == 1
    assert rollups.rollups_match(asked)
    assert CostRollup.objects.get(workspace=asked).calls == 1
    assert not rollups.rollups_match(other)  # nobody asked for this one
    row.refresh_from_db()
    assert row.status == "SUCCESSFUL" and "asked: rebuilt (1 cost rows" in row.return_value


@pytest.mark.django_db(transaction=True)
def test_a_rebuild_runs_twice_to_the_same_rows_and_skips_a_deleted_workspace(db_tasks):  # noqa: F811
    workspace = _damaged("twice")
    enqueue_rebuild(workspace)
    enqueue_rebuild(workspace)  # a row run again after its worker died does the same
    gone = _damaged("gone")
    enqueue_rebuild(gone)
    Workspace.objects.filter(pk=gone.pk).delete()
    assert run_until_idle(queues=["default"], limit=5) == 3
    assert rollups.rollups_match(workspace) and CostRollup.objects.get(workspace=workspace).calls == 1
    assert sorted(r.return_value.split(":")[0] for r in _rows()) == ["gone", "twice", "twice"]
