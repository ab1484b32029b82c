"""Retention deletes old runs in bounded batches: every transaction holds at most `batch` events,
the run is gone from its workspace after the first one, the rollups still equal a recomputation,
and nothing is deleted unless an operator asks."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from runs.actions import responsecache, rollups
from runs.actions.bigimport import do_import_bundle_file
from runs.actions.retention import PURGING_SLUG, _purge_rows, _purging_workspace, do_purge_run, resume_purges
from runs.actions.workspaces import get_or_create_workspace
from runs.models import (
    ArtifactVersion,
    CachedResponse,
    CostRollup,
    Event,
    RuleSetVersion,
    Run,
    RunCostRollup,
    RunSnapshot,
)
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
    versions = [model.objects.filter(run_id=run.pk).count() for model in (ArtifactVersion, RuleSetVersion)]
    assert versions[0] > 25 and versions[1] >= 1
    cached = CachedResponse.objects.filter(run_id=run.pk).count()
    report = do_purge_run(workspace=ws, run_id=run.run_id, batch=25)
    # hide + 24 batches of events + the versions and the cached answers 25 at a time + the run row
    batches = sum(-(-n // 25) for n in [*versions, cached])
    assert report.events == 600 and report.transactions == 1 + 24 + batches + 1
    assert not Run.unscoped.filter(pk=run.pk).exists() and not Event.objects.filter(run_id=run.pk).exists()
    assert not ArtifactVersion.objects.filter(run_id=run.pk).exists()
    assert ArtifactVersion.objects.filter(run=other).count() == versions[0]  # the other run's untouched
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


def test_a_purge_reads_no_event_body_and_subtracts_by_the_runs_own_rollups(tmp_path, settings) -> None:
    """Step 1 subtracts the run's calls by its RunCostRollup rows; the batches only delete seq
    ranges (a ten-million-event run goes without parsing its bodies)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    settings.WORKBENCH_SNAPSHOT_INTERVAL = 100
    ws = get_or_create_workspace("quick")
    run = _imported(tmp_path, ws)
    assert RunSnapshot.objects.filter(run=run).exists()
    assert rollups.stored_run_calls(run) == rollups.recompute_run_calls(run) != {}
    with CaptureQueriesContext(connection) as queries:
        do_purge_run(workspace=ws, run_id=run.run_id, batch=100)
    assert not [q["sql"] for q in queries if "body" in q["sql"] and "runs_event" in q["sql"]]
    # every DELETE of events is a bounded seq range: none walks the rows earlier batches deleted
    deletes = [q["sql"] for q in queries if q["sql"].startswith('DELETE FROM "runs_event"')]
    assert len(deletes) == 6 and all('"seq" <=' in sql or '"seq" >=' in sql for sql in deletes)
    assert sum('"seq" <=' in sql for sql in deletes) == 5  # the first one takes anything above the top
    assert _rollups(ws) == [] and rollups.rollups_match(ws)
    for model in (ArtifactVersion, RunSnapshot, RunCostRollup, Event):  # the cascade still went
        assert not model.objects.filter(run_id=run.pk).exists(), model


def test_a_run_hidden_by_an_older_version_has_its_calls_subtracted_when_finished(tmp_path) -> None:
    """Before per-run rollups a purge subtracted each batch's calls as it went: a run it hid keeps
    its remaining calls under its workspace until resume_purges takes them off."""
    ws = get_or_create_workspace("old")
    run = _imported(tmp_path, ws)
    rollups.count_new_run(run, sign=-1)  # what the older step 1 did: the run counter, not the calls
    hidden = f"purging-{run.pk}-ws{ws.pk}"
    Run.unscoped.filter(pk=run.pk).update(workspace=_purging_workspace(), run_id=hidden)
    assert _rollups(ws) != []
    report = resume_purges(batch=250)
    assert report.events == 600 and _rollups(ws) == [] and rollups.rollups_match(ws)


def test_a_purged_runs_answers_are_not_served_from_its_first_step_and_go_in_batches(
    tmp_path, monkeypatch
) -> None:
    """Step 1 deletes none of the run's cached answers (a long run holds hundreds of thousands) but
    no lookup serves them from then on; the batches delete them, and another run's stay."""
    ws = get_or_create_workspace("cached")
    other = _imported(tmp_path, get_or_create_workspace("cached-other"))
    run = _imported(tmp_path, ws)
    entry = CachedResponse.objects.filter(run_id=run.pk).first()
    cached = CachedResponse.objects.filter(run_id=run.pk).count()
    assert cached > 3 and responsecache.lookup(ws, entry.key) is not None
    monkeypatch.setattr("runs.actions.retention._purge_rows", lambda *a, **k: None)  # dies after step 1
    do_purge_run(workspace=ws, run_id=run.run_id)
    assert CachedResponse.objects.filter(run_id=run.pk).count() == cached  # still there...
    assert responsecache.lookup(ws, entry.key) is None  # ...and never served
    assert responsecache.lookup(ws, entry.key_v1, recipe="v1") is None
    monkeypatch.undo()
    report = resume_purges(batch=3)
    assert not CachedResponse.objects.filter(run_id=run.pk).exists()
    assert report.step_ms["cached responses"] > 0
    assert report.transactions >= -(-cached // 3) + 600 // 3  # the answers and the events, 3 at a time
    kept = CachedResponse.objects.filter(run=other)
    assert kept.exists() and responsecache.lookup(other.workspace, kept.first().key) is not None
