"""The TypeScript SDK (``sdk/typescript``, zero npm dependencies) against a real server: Node's own
test runner drives a run with a gate whose ``wait()`` returns when this test decides it over REST;
its cache keys are pinned by vectors that the Python SDK regenerates here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from workbench_sdk import WorkbenchAPIError, WorkbenchClient

from tests.live.cluster import Cluster

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "sdk" / "typescript"
NODE = shutil.which("node")
TITLE = "typescript sdk live"
SEED_WORKFLOW = {"id": "seed", "version": 0, "steps": [{"id": "only"}]}


def test_vectors_json_is_what_the_python_sdk_computes():
    done = subprocess.run(
        [sys.executable, str(SDK / "test" / "make_vectors.py"), "--check"], capture_output=True, timeout=60
    )
    assert done.returncode == 0, "sdk/typescript/test/vectors.json is stale: run make_vectors.py"


def gate_requested(client: WorkbenchClient, run_id: str) -> bool:
    events = [item.get("event", item) for item in client.events(run_id).get("events", [])]
    return any(e.get("type") == "human_gate_requested" and e.get("stepId") == "review" for e in events)


def decide_when_requested(client: WorkbenchClient, stop: threading.Event) -> None:
    """Approve the node run's gate once it is requested (a decision before the request would not
    be the one the node's wait() is for)."""
    while not stop.wait(0.5):
        try:
            for run in client.list_runs():
                if not gate_requested(client, run["id"]):
                    continue
                client.resolve_gate(
                    run["id"],
                    step_id="review",
                    gate="CHECKPOINT",
                    checkpoint="review",
                    decision="approved",
                    note="ship it",
                )
                return
        except WorkbenchAPIError as exc:  # a refusal (rate limit, a race): try again
            print("decide:", exc, flush=True)


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_node_test_runner_passes_against_a_live_server():
    with Cluster(database="sqlite") as cluster:
        seed = cluster.seed(workflow=SEED_WORKFLOW, users=(("alice", "owner"),))
        url = f"http://127.0.0.1:{cluster.ports[0]}"
        client = WorkbenchClient(url, seed["token"], retries=0)
        stop = threading.Event()
        decider = threading.Thread(target=decide_when_requested, args=(client, stop), daemon=True)
        decider.start()
        env = {
            **os.environ,
            "WORKBENCH_URL": url,
            "WORKBENCH_TOKEN": seed["token"],
            "WORKBENCH_TS_TITLE": TITLE,
        }
        try:
            done = subprocess.run(
                [str(NODE), "--test", "test/"], cwd=SDK, env=env, capture_output=True, text=True, timeout=240
            )
        finally:
            stop.set()
            decider.join(10)
            client.close()
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "# pass 5" in done.stdout, done.stdout[-2000:]
