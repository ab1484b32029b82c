"""Retention of replay data over REST: expired cached answers give 410 REPLAY_DATA_EXPIRED with
the range and the retention boundary; prune deletes them per workspace; deleting a run deletes
what it recorded."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone

from runs import actions
from runs.models import CachedResponse, Run
from tests.api.test_fork import recorded_call

pytestmark = pytest.mark.django_db


@pytest.fixture
def source(api, started_run, settings) -> str:
    settings.WORKBENCH_REPLAY_CACHE_DAYS = 30
    assert (
        api.post(f"/api/runs/{started_run}/events", {"events": recorded_call(started_run)}).status_code == 200
    )
    assert CachedResponse.objects.filter(run__run_id=started_run).count() == 1
    return started_run


def age(days: int, **filters) -> None:
    CachedResponse.objects.filter(**filters).update(created_at=timezone.now() - timedelta(days=days))


def fork(api, run_id: str, **body):
    return api.post(f"/api/runs/{run_id}:fork", {"mode": "replay", **body})


def test_a_replay_whose_cached_answers_expired_is_gone(api, source):
    assert fork(api, source).status_code == 201  # 29 days: still kept
    age(31)
    runs = Run.objects.count()
    response = fork(api, source, fromSeq=2)
    assert response.status_code == 410, response.content
    body = response.json()
    assert body["code"] == "REPLAY_DATA_EXPIRED"
    details = body["details"]
    assert details["sourceRunId"] == source and details["fromSeq"] == 2
    assert details["unavailableSeqs"] == [3] and details["retentionDays"] == 30
    assert details["retentionBoundary"] and "expired" in body["error"]
    assert Run.objects.count() == runs  # nothing written
    assert fork(api, source, fromSeq=4).status_code == 201  # the range after the answer needs nothing
    key = CachedResponse.objects.get(run__run_id=source).key
    assert api.get(f"/api/cache/{key}").status_code == 404  # an expired answer answers nobody


def test_an_answer_used_recently_is_kept(api, source):
    age(31)
    CachedResponse.objects.update(last_hit_at=timezone.now() - timedelta(days=2))
    assert fork(api, source).status_code == 201


def test_no_expiry_when_retention_is_off(api, source, settings):
    age(3650)
    settings.WORKBENCH_REPLAY_CACHE_DAYS = 0
    assert fork(api, source).status_code == 201
    out = StringIO()
    call_command("prune_replay_data", stdout=out)
    assert "nothing expires" in out.getvalue() and CachedResponse.objects.count() == 1


def test_prune_deletes_expired_answers_per_workspace(api, outsider, source, workspace, other_workspace):
    assert (
        outsider.post("/api/runs", {"workflow": api_workflow(api, source), "runId": "run_other"}).status_code
        == 201
    )
    assert (
        outsider.post("/api/runs/run_other/events", {"events": recorded_call("run_other", "yo")}).status_code
        == 200
    )
    fresh_here = api.post("/api/runs", {"workflow": api_workflow(api, source), "runId": "run_fresh"})
    assert fresh_here.status_code == 201
    assert (
        api.post("/api/runs/run_fresh/events", {"events": recorded_call("run_fresh", "new")}).status_code
        == 200
    )
    age(31, run__run_id=source)
    age(40, run__run_id="run_other")

    dry = StringIO()
    call_command("prune_replay_data", "--dry-run", stdout=dry)
    assert f"{workspace.slug}: 1 expired" in dry.getvalue() and CachedResponse.objects.count() == 3
    out = StringIO()
    call_command("prune_replay_data", "--workspace", workspace.slug, stdout=out)
    assert f"{workspace.slug}: 1 expired cached response(s) deleted" in out.getvalue()
    assert set(CachedResponse.objects.values_list("run__run_id", flat=True)) == {"run_fresh", "run_other"}
    call_command("prune_replay_data", stdout=StringIO())
    assert set(CachedResponse.objects.values_list("run__run_id", flat=True)) == {"run_fresh"}
    assert fork(api, source).status_code == 410  # deleted now, not only expired
    with pytest.raises(Exception, match="no workspace"):
        call_command("prune_replay_data", "--workspace", "nope", stdout=StringIO())


def test_deleting_a_run_deletes_the_answers_it_recorded(api, source, workspace):
    key = CachedResponse.objects.get(run__run_id=source).key
    assert api.get(f"/api/cache/{key}").status_code == 200
    actions.do_delete_run(workspace=workspace, run_id=source)
    assert not CachedResponse.objects.filter(key=key).exists()


def api_workflow(api, run_id: str) -> dict:
    return Run.objects.get(run_id=run_id).run_doc["workflowSnapshot"]
