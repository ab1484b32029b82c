"""Nothing accepted is lost (issue 47): 50 bundle imports and 20 experiments submitted at once to a
real daphne server (embedded profile: SQLite file database) with real `manage.py worker`
processes; every one ends done or failed with a reason, none stays queued, no upload stays in
var/imports. Again with the worker `kill -9`'d half-way and a new one started.

The experiments do real work: each item replays a run of step code the workers can execute
(tests/background/programs.py), whose model answers come from the response cache; the loopback
provider fake counts requests, and none reaches it, killed worker or not."""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.api.test_import_stream import _generated
from tests.background.test_kill9_fork import RECORD
from tests.conftest import LINEAR_WORKFLOW
from tests.fakes.anthropic_api import FakeAnthropic
from tests.live.cluster import Cluster

pytestmark = pytest.mark.slow

IMPORTS = 50
EXPERIMENTS = 20
EVENTS = 1500  # per bundle: long enough that a kill lands mid-import


def _status(http: httpx.Client, cluster: Cluster, url: str) -> dict:
    return http.get(cluster.url(0, url)).json()


def _submit(http: httpx.Client, cluster: Cluster, bundle: bytes, dataset: str) -> tuple[list[str], list[str]]:
    def send_import(_: int) -> str:
        response = http.post(
            cluster.url(0, "/api/bundles?background=true&as_new_id=true"),
            content=bundle,
            headers={"Content-Type": "application/json"},
        )
        assert response.status_code == 202, response.text[:300]
        return response.json()["url"]

    def send_experiment(i: int) -> str:
        response = http.post(
            cluster.url(0, "/api/experiments"), json={"datasetId": dataset, "name": f"exp {i}", "change": {}}
        )
        assert response.status_code == 201, response.text[:300]
        return f"/api/experiments/{response.json()['id']}"

    with ThreadPoolExecutor(max_workers=8) as pool:
        imports = pool.map(send_import, range(IMPORTS))
        experiments = pool.map(send_experiment, range(EXPERIMENTS))
        return list(imports), list(experiments)


def _wait_all_ended(http, cluster, imports, experiments, timeout=400) -> tuple[list[dict], list[dict]]:
    deadline = time.monotonic() + timeout
    while True:
        jobs = [_status(http, cluster, url) for url in imports]
        exps = [_status(http, cluster, url) for url in experiments]
        open_ = [j for j in jobs if j["status"] in ("queued", "running")]
        open_ += [e for e in exps if e["status"] in ("pending", "running")]
        if not open_ or time.monotonic() > deadline:
            return jobs, exps
        time.sleep(1)


def _check(jobs: list[dict], exps: list[dict], cluster: Cluster) -> None:
    assert [j["status"] for j in jobs if j["status"] not in ("succeeded", "failed")] == []
    for job in jobs:
        if job["status"] == "failed":
            assert job["error"]["code"] and job["error"]["message"], job
    assert [e["status"] for e in exps if e["status"] not in ("completed", "failed")] == []
    for exp in exps:
        if exp["status"] == "failed":
            assert exp.get("error"), exp
    imports_dir = cluster.tmp / "imports"
    assert sorted(p.name for p in imports_dir.iterdir()) == []  # every upload deleted at the end
    assert imports_dir.stat().st_mode & 0o777 == 0o700


def _dataset(http: httpx.Client, cluster: Cluster, run_id: str) -> str:
    ds = http.post(cluster.url(0, "/api/datasets"), json={"name": "load"}).json()["id"]
    items = [{"input": {"q": i}, "expected": "x", "source": {"runId": run_id}} for i in range(2)]
    added = http.post(cluster.url(0, f"/api/datasets/{ds}/items"), json={"items": items})
    assert added.status_code == 200, added.text[:300]
    return ds


@pytest.mark.parametrize("kill", [False, True], ids=["steady", "kill-9-half-way"])
def test_every_import_and_experiment_submitted_at_once_ends(kill):
    with FakeAnthropic() as fake:
        _every_import_and_experiment_ends(kill, fake)


def _every_import_and_experiment_ends(kill: bool, fake: FakeAnthropic) -> None:
    env = {
        "WORKBENCH_WORKER_LEASE_SECONDS": "3",
        "WORKBENCH_IMPORT_ASYNC_BYTES": str(1 << 30),
        "WORKBENCH_PROGRAM_MODULES": "runs.demo.job_search,tests.background.programs",
        "WORKBENCH_TEST_FAKE_URL": fake.url,
        "WORKBENCH_EGRESS_ALLOW": "127.0.0.0/8",
    }
    with Cluster(database="sqlite", servers=1, workers=1, extra_env=env) as cluster:
        seed = cluster.seed(workflow=LINEAR_WORKFLOW)
        source, status = cluster.python(RECORD).split()[-2:]
        assert status == "completed" and len(fake.requests) == 2
        headers = {"Authorization": f"Bearer {seed['token']}"}
        with httpx.Client(headers=headers, timeout=120) as http:
            dataset = _dataset(http, cluster, source)
            imports, experiments = _submit(http, cluster, _generated(EVENTS), dataset)
            if kill:
                deadline = time.monotonic() + 200
                while time.monotonic() < deadline:
                    done = sum(_status(http, cluster, u)["status"] == "succeeded" for u in imports)
                    if done >= IMPORTS // 4:
                        break
                    time.sleep(0.3)
                assert 0 < done < IMPORTS, done  # half-way: some done, some not
                os.kill(cluster.workers[0].pid, signal.SIGKILL)
                cluster.workers[0].wait(timeout=10)
                cluster.start_worker()
            jobs, exps = _wait_all_ended(http, cluster, imports, experiments)
        _check(jobs, exps, cluster)
        if not kill:  # every item replayed for real (a killed one may end failed, in words)
            assert [e["status"] for e in exps] == ["completed"] * EXPERIMENTS, [e["error"] for e in exps][:3]
            assert {i["status"] for e in exps for i in e["items"]} == {"completed"}
        assert len(fake.requests) == 2  # the replays asked no provider: answers from the cache
        succeeded = [j for j in jobs if j["status"] == "succeeded"]
        assert len(succeeded) == IMPORTS, [j.get("error") for j in jobs if j["status"] == "failed"][:3]
        # nothing imported twice: one run per job
        counts = cluster.python(
            "from runs.models import Run, ImportJob\n"
            "ids = set(ImportJob.objects.values_list('run_id', flat=True))\n"
            "print(len(ids), Run.unscoped.filter(run_id__in=ids).count(),"
            " Run.unscoped.filter(workflow_id='wf-bench').count())"
        ).split()
        assert counts == [str(IMPORTS)] * 3, counts
