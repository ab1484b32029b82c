"""Every file that holds content is 0600 in a 0700 folder (issue 47), whatever the umask: a
bundle waiting for its import job, an upload waiting for its confirmation, a running import's
cancel file, an OTLP batch in the spool, and Django's temporary file of a multipart upload."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.files.uploadedfile import SimpleUploadedFile, TemporaryUploadedFile
from django.test import Client

from runs.actions.importjobs import cancel_marker, do_cancel_import_job, import_dir
from runs.actions.otlp_queue import Spool
from runs.models import ImportJob
from tests.api.conftest import BearerClient, _token
from tests.api.test_import_stream import _generated
from workbench.env import private_dir

pytestmark = pytest.mark.django_db


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def var(settings, tmp_path):
    """A fresh var/ under a usual umask (022: left alone, new files would be 0644 in 0755 folders)."""
    settings.VAR_DIR = tmp_path / "var"
    settings.WORKBENCH_IMPORT_ASYNC_BYTES = 1000
    old = os.umask(0o022)
    try:
        yield settings.VAR_DIR
    finally:
        os.umask(old)


def test_every_file_that_holds_content_is_0600_in_a_0700_folder(var, workspace, alice):
    api = BearerClient(_token(workspace, ["read", "write"], "w"))
    # a bundle sent to the API (spooled to disk as it arrives), waiting for its job
    queued = api.send("POST", "/api/bundles?background=true", raw=_generated(30)).json()
    # a second one, running, told to cancel
    other = api.send("POST", "/api/bundles?background=true", raw=_generated(30)).json()
    ImportJob.objects.filter(job_id=other["job"]).update(status="running")
    do_cancel_import_job(ImportJob.objects.get(job_id=other["job"]), actor="user:alice")
    # an upload on the import page, kept until the user confirms it
    client = Client()
    client.force_login(alice)
    bundle = SimpleUploadedFile("big.json", _generated(3000), content_type="application/json")
    assert client.post("/import/", {"bundle": bundle}).status_code == 200
    # an OTLP batch in the spool
    Spool(var / "otlp-spool").ensure().put(
        workspace_id=workspace.pk,
        body=b"{}",
        content_type="application/json",
        spans=1,
        header_run_id=None,
        actor="t",
    )
    files = [p for p in var.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert (
        f"{queued['job']}.json" in names
        and cancel_marker(ImportJob.objects.get(job_id=other["job"])).exists()
    )
    assert any(p.parent == import_dir() and not p.name.startswith("imp_") for p in files)  # the page's upload
    assert any("otlp-spool" in p.parts for p in files)
    assert {str(p.relative_to(var)): oct(mode(p)) for p in files if mode(p) != 0o600} == {}
    folders = {p.parent for p in files}
    assert {str(p.relative_to(var)): oct(mode(p)) for p in folders if mode(p) != 0o700} == {}


def test_uploads_are_spooled_to_a_private_folder_not_the_shared_tmp():
    folder = Path(django_settings.FILE_UPLOAD_TEMP_DIR)
    assert folder.parent == Path(django_settings.VAR_DIR) and mode(folder) == 0o700
    upload = TemporaryUploadedFile("big.json", "application/json", 0, None)  # what Django writes to
    try:
        path = Path(upload.temporary_file_path())
        assert path.parent == folder and mode(path) == 0o600
    finally:
        upload.close()


def test_a_folder_left_open_by_an_earlier_version_is_tightened(tmp_path):
    old = os.umask(0o022)
    try:
        folder = tmp_path / "uploads"
        folder.mkdir()
        assert mode(folder) == 0o755
        assert private_dir(folder) == folder and mode(folder) == 0o700
        assert mode(private_dir(tmp_path / "a" / "b")) == 0o700
    finally:
        os.umask(old)
