"""Cancel of an import that a real `manage.py worker` is running (issue 47), on the embedded
profile's SQLite file database, where the import's transaction holds the one write lock: the Cancel
sent to the daphne server reaches the worker's import (through the job's cancel file), which
rolls back; the job ends failed with CANCELLED and who cancelled it, nothing is stored, and
var/imports is left empty."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.api.test_import_stream import _generated
from tests.conftest import LINEAR_WORKFLOW
from tests.live.cluster import Cluster

pytestmark = pytest.mark.slow

EVENTS = 60_000  # a dozen batches: the Cancel lands between two of them


def test_cancel_reaches_an_import_running_in_the_worker_and_nothing_is_stored():
    bundle = _generated(EVENTS)
    with Cluster(database="sqlite", servers=1, workers=1) as cluster:
        seed = cluster.seed(workflow=LINEAR_WORKFLOW)
        with httpx.Client(headers={"Authorization": f"Bearer {seed['token']}"}, timeout=120) as http:
            sent = http.post(
                cluster.url(0, "/api/bundles?background=true&as_new_id=true"),
                content=bundle,
                headers={"Content-Type": "application/json"},
            )
            assert sent.status_code == 202, sent.text[:300]
            url = sent.json()["url"]
            deadline = time.monotonic() + 120
            while http.get(cluster.url(0, url)).json()["status"] == "queued":
                assert time.monotonic() < deadline, "the worker never started the import"
                time.sleep(0.05)
            cancel = http.post(cluster.url(0, f"{url}/cancel"))
            assert cancel.status_code == 200, cancel.text[:300]
            assert cancel.json()["status"] == "running"  # told: it ends at its next batch
            deadline = time.monotonic() + 120
            while (job := http.get(cluster.url(0, url)).json())["status"] == "running":
                assert time.monotonic() < deadline, "the import did not stop"
                time.sleep(0.1)
        assert job["status"] == "failed" and job["error"]["code"] == "CANCELLED", job
        assert job["error"]["message"].startswith("cancelled by ") and job["runId"] is None
        assert job["events"] == 0
        stored = cluster.python(
            "from runs.models import Run, Event\n"
            "print(Run.unscoped.filter(workflow_id='wf-bench').count(), Event.objects.count())"
        ).split()
        assert stored[0] == "0"  # not one run of the bundle: its transaction rolled back
        assert sorted(p.name for p in (cluster.tmp / "imports").iterdir()) == []
