"""One body limit for every way in: the import page refuses what the API refuses (413), and
unconfirmed uploads expire."""

from __future__ import annotations

import os
import time

from django.core.files.uploadedfile import SimpleUploadedFile

from runs.pages.imports import _import_dir
from runs.web.uploads import purge_stale_uploads
from tests.pages.conftest import login


def test_import_page_refuses_a_body_over_the_api_limit(client, alice, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 4096
    login(client, alice)
    big = SimpleUploadedFile("big.json", b"[" + b"1," * 5000 + b"1]", content_type="application/json")
    before = set(_import_dir().glob("*.json"))
    response = client.post("/import/", {"bundle": big})
    assert response.status_code == 413
    assert "PAYLOAD_TOO_LARGE" in response.content.decode()
    assert set(_import_dir().glob("*.json")) == before  # nothing kept


def test_stale_unconfirmed_uploads_are_deleted(settings, tmp_path):
    settings.WORKBENCH_IMPORT_UPLOAD_TTL_SECONDS = 60
    old, fresh = tmp_path / "old.json", tmp_path / "fresh.json"
    old.write_text("{}")
    fresh.write_text("{}")
    an_hour_ago = time.time() - 3600
    os.utime(old, (an_hour_ago, an_hour_ago))
    assert purge_stale_uploads(tmp_path) == 1
    assert not old.exists() and fresh.exists()


def test_an_upload_purges_stale_ones(client, alice, settings):
    settings.WORKBENCH_IMPORT_UPLOAD_TTL_SECONDS = 60
    stale = _import_dir() / "stale-test-upload.json"
    stale.write_text("{}")
    long_ago = time.time() - 7200
    os.utime(stale, (long_ago, long_ago))
    login(client, alice)
    client.post("/import/", {"bundle": SimpleUploadedFile("b.json", b"{}", content_type="application/json")})
    assert not stale.exists()
