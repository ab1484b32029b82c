"""Retention deletes old runs in bounded batches: every transaction holds at most `batch` events,
the run is gone from its workspace after the first one, the rollups still equal a recomputation,
and nothing is deleted unless an operator asks."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from runs.actions import rollups
from runs.actions.bigimport import do_import_bundle_file
from runs.actions.retention import PURGING_SLUG, _purge_rows, do_purge_run, resume_purges
from runs.actions.workspaces import get_or_create_workspace
from runs.models import CostRollup, Event, Run
from runs.selectors.runs import find_run
from tests.api.test_import_stream import _generated

pytestmark = pytest.mark.django_db


def _imported(tmp_path, workspace, events=600):
    path = tmp_path / "b.json"
    path.write_bytes(_generated(events))
    return do_import_bundle_file(workspace=workspace, path=path, actor="t")


def _rollups(workspace) -> list:
    rows = CostRollup.objects.filter(workspace=workspace).values()
    return sorted(sorted((k, str(v)) for k, v in row.items() if k != "id") for row in rows if row["calls"])


def test_purge_deletes_in_batches_and_keeps_the_rollups_exact(tmp_path) -> None:
    ws = get_or_create_workspace("keep")
    other = _imported(tmp_path, get_or_create_workspace("other"))
    run = _imported(tmp_path, ws)
    kept = _rollups(get_or_create_workspace("other"))
    report = do_purge_run(workspace=ws, run_id=run.run_id, batch=100)
    assert report.events == 600 and report.transactions == 1 + 6 + 1
    assert not Run.unscoped.filter(pk=run.pk).exists() and not Event.objects.filter(run_id=run.pk).exists()
    assert _rollups(ws) == []  # its calls left the rollups with it
    assert _rollups(get_or_create_workspace("other")) == kept  # the other workspace's untouched
    assert Event.objects.filter(run=other).count() == 600


def test_an_interrupted_purge_is_hidden_at_once_and_finished_later(tmp_path, monkeypatch) -> None:
    ws = get_or_create_workspace("w")
    run = _imported(tmp_path, ws)
    monkeypatch.setattr("runs.actions.retention._purge_rows", lambda *a, **k: None)  # dies after step 1
    do_purge_run(workspace=ws, run_id=run.run_id)
    assert find_run(ws, run.run_id) is None  # gone from its workspace
    assert Event.objects.filter(run_id=run.pk).count() == 600
    monkeypatch.setattr("runs.actions.retention._purge_rows", _purge_rows)
    report = resume_purges(batch=250)
    assert report.runs == 1 and report.events == 600
    assert _rollups(ws) == [] and not Run.unscoped.filter(workspace__slug=PURGING_SLUG).exists()


def test_prune_runs_only_when_asked(tmp_path, settings) -> None:
    ws = get_or_create_workspace("w")
    run = _imported(tmp_path, ws, 50)
    Run.unscoped.filter(pk=run.pk).update(ended_at=timezone.now() - timedelta(days=40))
    out = StringIO()
    call_command("prune_runs", stdout=out)  # the setting is 0 by default: nobody asked
    assert "retention is off" in out.getvalue() and Run.unscoped.filter(pk=run.pk).exists()
    call_command("prune_runs", "--days", "60", stdout=out)
    assert Run.unscoped.filter(pk=run.pk).exists()  # not old enough
    call_command("prune_runs", "--days", "30", "--dry-run", stdout=out)
    assert Run.unscoped.filter(pk=run.pk).exists()
    settings.WORKBENCH_RUN_RETENTION_DAYS = 30
    call_command("prune_runs", "--batch", "20", stdout=StringIO())
    assert not Run.unscoped.filter(pk=run.pk).exists()
    assert rollups is not None
