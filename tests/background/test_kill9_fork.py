"""kill -9 of a real `manage.py worker` while it re-executes a fork (issue 47's matrix: replay and
fork, and the fork an experiment's item makes). A daphne server and worker processes on a SQLite
file database; the step code (tests/replay/test_replay.py's pipeline: draft, a reviewed gate,
publish) calls the loopback Anthropic fake, which counts requests. The worker is killed while
the fork's second call (publish) waits for its answer, a new worker is started; afterwards:

* the fork ends (completed; an experiment's item ends with the reason in words, none stays running);
* the draft, answered before the kill, was asked once: the resumed fork took its recorded answer;
* the fork's events are the source's, one for one: no event twice.
"""

from __future__ import annotations

import json
import os
import signal
import time

import httpx
import pytest

from tests.conftest import LINEAR_WORKFLOW
from tests.fakes.anthropic_api import FakeAnthropic
from tests.live.cluster import Cluster

pytestmark = pytest.mark.slow

RECORD = """
from runs.execution.host import Workbench
from runs.models import Workspace
from tests.replay.test_replay import WORKFLOW
session = Workbench(workspace=Workspace.objects.get(slug="acme"), actor="pipeline").run_workflow(workflow=WORKFLOW)
print(session.run.run_id, session.run.status)
"""

EVENTS = """
import json
from runs.models import Event, Run, RunFork
out = {}
for fork in RunFork.objects.select_related("run"):
    out[fork.run.run_id] = {
        "status": fork.status, "error": fork.error_code, "attempts": fork.attempts, "source": fork.source_run_id,
        "events": [e.data for e in Event.objects.filter(run=fork.run).order_by("seq")],
    }
source = Run.unscoped.get(run_id=next(iter(out.values()))["source"]) if out else None
out["__source__"] = [e.data for e in Event.objects.filter(run=source).order_by("seq")] if source else []
print(json.dumps(out))
"""


def _wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def _prompts(fake: FakeAnthropic) -> list[str]:
    return [json.dumps(r["messages"]) for r in fake.requests]


def _shape(e: dict) -> tuple:
    return (e["type"], e.get("stepId"), e.get("direction"), e.get("name"), e.get("status"))


def _is_marker(e: dict) -> bool:
    return e["type"] in ("run_forked", "replay_diverged") or "divergence" in (e.get("tags") or [])


@pytest.mark.parametrize("kind", ["fork", "experiment"])
def test_kill9_mid_fork_resumes_without_a_second_call_or_event(kind):
    with FakeAnthropic() as fake:
        env = {
            "WORKBENCH_WORKER_LEASE_SECONDS": "3",
            "WORKBENCH_PROGRAM_MODULES": "runs.demo.job_search,tests.background.programs",
            "WORKBENCH_TEST_FAKE_URL": fake.url,
            "WORKBENCH_EGRESS_ALLOW": "127.0.0.0/8",
        }
        with Cluster(database="sqlite", servers=1, workers=1, extra_env=env) as cluster:
            seed = cluster.seed(workflow=LINEAR_WORKFLOW)
            source, status = cluster.python(RECORD).split()[-2:]
            assert status == "completed" and len(fake.requests) == 2  # draft, publish
            fake.script(
                {}, {"misbehave": "slow", "delay": 120}
            )  # the fork's draft answers, its publish hangs
            http = httpx.Client(headers={"Authorization": f"Bearer {seed['token']}"}, timeout=60)
            experiment = None
            if kind == "fork":
                made = http.post(
                    cluster.url(0, f"/api/runs/{source}:fork"), json={"mode": "branch", "fromSeq": 1}
                )
                assert made.status_code == 201, made.text
            else:
                ds = http.post(cluster.url(0, "/api/datasets"), json={"name": "kill"}).json()["id"]
                item = {"input": {"q": 1}, "expected": "x", "source": {"runId": source}}
                assert (
                    http.post(cluster.url(0, f"/api/datasets/{ds}/items"), json={"items": [item]}).status_code
                    == 200
                )
                made = http.post(
                    cluster.url(0, "/api/experiments"),
                    json={"datasetId": ds, "name": "kill", "change": {"configurable": {"retry": 1}}},
                )
                assert made.status_code == 201, made.text
                experiment = made.json()["id"]
            _wait(lambda: len(fake.requests) == 4, 90, "the fork's publish call to reach the fake")
            os.kill(cluster.workers[0].pid, signal.SIGKILL)  # mid-call: its answer never comes
            assert cluster.workers[0].wait(timeout=10) == -signal.SIGKILL
            cluster.start_worker()

            def forks() -> dict:
                return json.loads(cluster.python(EVENTS).strip().splitlines()[-1])

            _wait(
                lambda: all(
                    f["status"] not in ("pending", "running") for k, f in forks().items() if k != "__source__"
                ),
                120,
                "the fork to end",
            )
            if experiment is not None:
                _wait(
                    lambda: (
                        http.get(cluster.url(0, f"/api/experiments/{experiment}")).json()["status"]
                        not in ("pending", "running")
                    ),
                    60,
                    "the experiment to end",
                )
                ended = http.get(cluster.url(0, f"/api/experiments/{experiment}")).json()
                (row,) = ended["items"]
                assert row["status"] in ("completed", "failed"), ended
                if row["status"] == "failed":
                    assert row["error"], ended  # in words
            data = forks()
            recorded = data.pop("__source__")
            (fork,) = data.values()
            assert fork["status"] == "completed" and fork["attempts"] == 2, fork
            prompts = _prompts(fake)
            drafts = [p for p in prompts if '"content": "Summarise ticket 42"' in p]
            assert len(drafts) == 2  # the source's and the fork's: never asked again after the kill
            assert len(prompts) == 5  # + the publish that was cut off, asked again once
            own = [e for e in fork["events"] if not _is_marker(e)]
            assert len({e["id"] for e in own}) == len(own)
            assert [_shape(e) for e in own] == [_shape(e) for e in recorded]
            responses = [e for e in own if e["type"] == "model_io" and e.get("direction") == "response"]
            assert len(responses) == 2  # one answer per call: nothing recorded twice
