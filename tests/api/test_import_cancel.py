"""Cancel of a background import (issue 47): a queued job ends failed at once with CANCELLED and
who cancelled it; a running one is told through a 0600 file beside its bundle and stores nothing;
its files are deleted either way; REST and the job's page; another workspace's job is a 404."""

from __future__ import annotations

import stat

import pytest
from django.test import Client

from runs.actions.importjobs import (
    cancel_marker,
    do_cancel_import_job,
    do_create_import_job,
    import_dir,
    run_import_job,
)
from runs.models import ImportJob, Run
from tests.api.test_import_stream import _generated

pytestmark = pytest.mark.django_db


def _queued(api) -> dict:
    response = api.send("POST", "/api/bundles?background=true", raw=_generated(40))
    assert response.status_code == 202, response.content
    return response.json()


def test_a_queued_import_cancelled_over_rest_ends_failed_and_its_task_does_nothing(api):
    body = _queued(api)
    job = ImportJob.objects.get(job_id=body["job"])
    bundle = import_dir() / job.file
    assert bundle.exists()
    response = api.post(f"/api/bundles/jobs/{job.job_id}/cancel")
    assert response.status_code == 200, response.content
    out = response.json()
    assert out["status"] == "failed" and out["error"]["code"] == "CANCELLED"
    assert (
        out["error"]["message"].startswith("cancelled by ")
        and "nothing was stored" in out["error"]["message"]
    )
    assert not bundle.exists()
    # the task row still runs later: it finds the job ended and does nothing
    assert run_import_job(job.pk).status == "failed"
    assert not Run.unscoped.exists()
    again = api.post(f"/api/bundles/jobs/{job.job_id}/cancel")
    assert again.status_code == 409 and again.json()["code"] == "CONFLICT"


def test_cancel_needs_the_write_scope_and_another_workspace_gets_a_404(api, reader, outsider):
    body = _queued(api)
    assert reader.post(f"/api/bundles/jobs/{body['job']}/cancel").status_code == 403
    missing = outsider.post("/api/bundles/jobs/imp_00000000000000000000000000/cancel")
    theirs = outsider.post(f"/api/bundles/jobs/{body['job']}/cancel")
    assert theirs.status_code == missing.status_code == 404
    assert ImportJob.objects.get(job_id=body["job"]).status == "queued"  # nothing changed


def test_a_running_import_is_told_by_a_private_file_and_stores_nothing(workspace):
    job = do_create_import_job(workspace=workspace, data=_generated(60), actor="user:alice")
    # a worker claimed it (task row "t-1") and imports: Cancel cannot write to its row on SQLite
    ImportJob.objects.filter(pk=job.pk).update(status="running", task_id="t-1", attempts=0)
    job.refresh_from_db()
    job = do_cancel_import_job(job, actor="user:bob")
    assert job.status == "running"  # told, not ended: the import ends it at its next batch
    marker = cancel_marker(job)
    assert stat.S_IMODE(marker.stat().st_mode) == 0o600 and marker.read_text() == "user:bob"
    job = run_import_job(job.pk, task_id="t-1")
    assert (job.status, job.error_code) == ("failed", "CANCELLED")
    assert job.error_message == "cancelled by bob; nothing was stored" and job.events == 0
    assert not Run.unscoped.filter(workspace=workspace).exists()
    assert not (import_dir() / job.file).exists() and not marker.exists()


def test_an_ended_import_cannot_be_cancelled(workspace):
    job = do_create_import_job(workspace=workspace, data=_generated(10))
    job = run_import_job(job.pk)
    assert job.status == "succeeded"
    from runs.actions import ActionError

    with pytest.raises(ActionError) as refused:
        do_cancel_import_job(job, actor="user:alice")
    assert refused.value.code == "CONFLICT"
    assert not cancel_marker(job).exists()
    job.refresh_from_db()
    assert job.status == "succeeded"


def test_the_job_page_has_a_cancel_button_that_cancels(alice, charlie, workspace):
    job = do_create_import_job(workspace=workspace, data=_generated(10), actor="user:alice")
    client = Client(enforce_csrf_checks=False)
    client.force_login(alice)
    page = client.get(f"/import/jobs/{job.job_id}/").content.decode()
    assert "Cancel import" in page and f"/import/jobs/{job.job_id}/cancel/" in page
    assert client.get(f"/import/jobs/{job.job_id}/cancel/").status_code == 405  # a POST only
    outsider = Client()
    outsider.force_login(charlie)
    assert outsider.post(f"/import/jobs/{job.job_id}/cancel/").status_code == 404
    assert ImportJob.objects.get(pk=job.pk).status == "queued"
    response = client.post(f"/import/jobs/{job.job_id}/cancel/")
    assert response.status_code == 302 and response["Location"] == f"/import/jobs/{job.job_id}/"
    job.refresh_from_db()
    assert (job.status, job.error_code, job.error_message) == (
        "failed",
        "CANCELLED",
        "cancelled by alice; nothing was stored",
    )
    page = client.get(f"/import/jobs/{job.job_id}/").content.decode()
    assert "Cancelled by alice; nothing was stored." in page and "Cancel import" not in page
    assert '<code class="error-code">CANCELLED</code>' in page and "CANCELLED:" not in page


def test_csrf_guards_the_cancel_form(alice, workspace):
    job = do_create_import_job(workspace=workspace, data=_generated(10), actor="user:alice")
    client = Client(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post(f"/import/jobs/{job.job_id}/cancel/").status_code == 403
    assert ImportJob.objects.get(pk=job.pk).status == "queued"
