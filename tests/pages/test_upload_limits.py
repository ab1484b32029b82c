"""One body limit for every way in: the import page refuses what the API refuses (413), and
unconfirmed uploads expire."""

from __future__ import annotations

import os
import time

from django.core.files.uploadedfile import SimpleUploadedFile

from runs.pages.imports import _import_dir
from runs.web.uploads import purge_stale_uploads
from tests.pages.conftest import login


def test_import_page_refuses_a_body_over_the_bundle_limit(client, alice, settings):
    settings.WORKBENCH_MAX_BUNDLE_BYTES = 4096
    login(client, alice)
    big = SimpleUploadedFile("big.json", b"[" + b"1," * 5000 + b"1]", content_type="application/json")
    before = set(_import_dir().glob("*"))
    response = client.post("/import/", {"bundle": big})
    assert response.status_code == 413
    assert "PAYLOAD_TOO_LARGE" in response.content.decode()
    assert "WORKBENCH_MAX_BUNDLE_BYTES" in response.content.decode()
    assert set(_import_dir().glob("*")) == before  # nothing kept


def test_import_page_is_not_held_to_the_body_limit(client, alice, settings, conformance_dir):
    """The upload has the bundle imports' limit (WORKBENCH_MAX_BUNDLE_BYTES), not the 25 MiB one."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    data = max((conformance_dir / "valid").glob("*.json"), key=lambda p: p.stat().st_size).read_bytes()
    assert len(data) > 4096
    login(client, alice)
    response = client.post("/import/", {"bundle": SimpleUploadedFile("b.json", data)})
    assert response.status_code == 200, response.content[:300]
    assert "token" in response.context


def test_stale_unconfirmed_uploads_are_deleted(settings, tmp_path):
    settings.WORKBENCH_IMPORT_UPLOAD_TTL_SECONDS = 60
    old, fresh = tmp_path / "old.json", tmp_path / "fresh.json"
    old.write_text("{}")
    fresh.write_text("{}")
    an_hour_ago = time.time() - 3600
    os.utime(old, (an_hour_ago, an_hour_ago))
    assert purge_stale_uploads(tmp_path) == 1
    assert not old.exists() and fresh.exists()


def test_a_queued_import_jobs_bundle_is_not_an_expired_upload(settings, tmp_path):
    settings.WORKBENCH_IMPORT_UPLOAD_TTL_SECONDS = 60
    job_file = tmp_path / "imp_5b1c7a2e-0000-4000-8000-000000000000.json"  # do_create_import_job's name
    half_copied = tmp_path / "upl_x.part"  # a request body copy (runs/web/spool.py) left by a crash
    for path in (job_file, half_copied):
        path.write_text("{}")
        os.utime(path, (time.time() - 7200, time.time() - 7200))
    assert purge_stale_uploads(tmp_path) == 1
    assert job_file.exists() and not half_copied.exists()


def test_an_upload_purges_stale_ones(client, alice, settings):
    settings.WORKBENCH_IMPORT_UPLOAD_TTL_SECONDS = 60
    stale = _import_dir() / "stale-test-upload.json"
    stale.write_text("{}")
    long_ago = time.time() - 7200
    os.utime(stale, (long_ago, long_ago))
    login(client, alice)
    client.post("/import/", {"bundle": SimpleUploadedFile("b.json", b"{}", content_type="application/json")})
    assert not stale.exists()
