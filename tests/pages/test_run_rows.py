"""Runs list and inbox rows are told apart: title, short id, subject's user and tenant, waiting step, age."""

from __future__ import annotations

import re

import pytest

from runs.engine.lifecycle import TITLE_KEY
from tests.pages.conftest import XSS, login


@pytest.mark.django_db
def test_rows_are_told_apart_by_title_short_id_subject_waiting_step_and_age(
    client, bob, workspace, workflow, make_run
):
    make_run("run_0f3c2a9e-1111-2222-3333-444455556666", metadata={TITLE_KEY: XSS})
    make_run("run_second", subject={"userId": "u-dee", "tenantId": "t-acme"})
    login(client, bob)
    for url in ("/runs/", "/runs/inbox/"):
        html = client.get(url).content.decode()
        assert "<script>alert" not in html and "&lt;script&gt;alert" in html
        assert re.search(r'title="run_0f3c2a9e-[^"]+">0f3c2a9e</span>', html)
        assert "u-dee · t-acme" in html
        assert " ago" in html or "just now" in html
    runs_page = client.get("/runs/").content.decode()
    assert "waiting at review" in runs_page
    # the runs list reads the waiting steps of the runs shown in one query, whatever their number
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as one:
        client.get("/runs/")
    for i in range(5):
        make_run(f"run_more_{i}")
    with CaptureQueriesContext(connection) as many:
        client.get("/runs/")
    assert len(many) == len(one)


def test_short_ids_shorten_generated_ids_and_keep_readable_ones():
    from runs.templatetags.workbench import short_id

    assert short_id("run_0f3c2a9e-1111-2222-3333-444455556666") == "0f3c2a9e"
    assert short_id("run_demo_jobsearch") == "demo_jobsearch" and short_id("run_second") == "run_second"
    assert short_id("run_demo_jobsearch_retry") == "demo_jobsearch_retry"
    assert short_id("run_" + "x" * 40) == "x" * 23 + "…"
