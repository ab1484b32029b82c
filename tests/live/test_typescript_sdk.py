"""The TypeScript SDK (``sdk/typescript``, zero runtime dependencies) against a real server:
Node's own test runner (``node --test``) drives runs with gates whose ``wait()`` returns when this
test decides them over REST, the official ``openai`` and ``@anthropic-ai/sdk`` clients wrapped
(priced calls, a replay from the response cache), the Vercel AI SDK's ``generateText`` and
``streamText`` through the middleware, the AI SDK's own OTel telemetry exported to ``/v1/traces``,
and a LangGraph.js graph whose ``interrupt()`` is rejected with a note and loops back. The
provider calls go to the loopback fakes (tests/fakes/). The npm packages the tests need are
installed here with ``npm ci`` from the committed package-lock.json (``sdk/typescript/node_modules``,
gitignored); the cache keys are pinned by vectors that the Python SDK regenerates here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from workbench_sdk import WorkbenchAPIError, WorkbenchClient

from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.openai_api import FakeOpenAI
from tests.live.cluster import Cluster

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SDK = ROOT / "sdk" / "typescript"
NODE = shutil.which("node")
NPM = shutil.which("npm")
TITLE = "typescript sdk live"
SEED_WORKFLOW = {"id": "seed", "version": 0, "steps": [{"id": "only"}]}
# What the reviewer decides, per workflow: gate after gate (the last one repeats), or by step.
DECISIONS: dict[str, list[tuple[str, str]] | dict[str, tuple[str, str]]] = {
    "ts-sdk": [("approved", "ship it")],
    "nextjs-chat": [("approved", "send it")],
    "ts-articles": [("rejected", "cite your sources"), ("approved", "good now")],
    "ts-routed": [("rejected", "not for us")],
    "ts-parallel": {"review": ("approved", "checked"), "legal": ("rejected", "checked")},
    "chat": [("approved", "go ahead")],  # the docs' recipes
    "articles": [("rejected", "cite your sources"), ("approved", "good now")],
}


def test_vectors_json_is_what_the_python_sdk_computes():
    done = subprocess.run(
        [sys.executable, str(SDK / "test" / "make_vectors.py"), "--check"], capture_output=True, timeout=60
    )
    assert done.returncode == 0, "sdk/typescript/test/vectors.json is stale: run make_vectors.py"


def npm_ci() -> None:
    """Install the test's npm packages from the lockfile, once per lockfile (a stamp in node_modules)."""
    lock = SDK / "package-lock.json"
    stamp = SDK / "node_modules" / ".workbench-lock"
    wanted = lock.read_text(encoding="utf-8")
    if stamp.exists() and stamp.read_text(encoding="utf-8") == wanted:
        return
    done = subprocess.run(
        [str(NPM), "ci", "--no-audit", "--no-fund", "--ignore-scripts"],
        cwd=SDK,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    stamp.write_text(wanted, encoding="utf-8")


def gate_requests(client: WorkbenchClient, run_id: str) -> list[dict]:
    events = [item.get("event", item) for item in client.events(run_id, limit=1000).get("events", [])]
    return [e for e in events if e.get("type") == "human_gate_requested"]


def decide_gates(client: WorkbenchClient, stop: threading.Event, decided: list[tuple[str, str, str]]) -> None:
    """Decide every gate the node runs ask, once each, as a reviewer in the inbox would (by
    workflow: in turn, or by step for parallel branches)."""
    done: set[str] = set()
    counts: dict[str, int] = {}
    while not stop.wait(0.3):
        try:
            for run in client.list_runs(limit=500):
                plan = DECISIONS.get(run.get("workflowId", ""))
                if plan is None or run.get("status") != "running":
                    continue
                for request in gate_requests(client, run["id"]):
                    if request["id"] in done:
                        continue
                    if isinstance(plan, dict):
                        decision, note = plan[request["stepId"]]
                    else:
                        n = counts.get(run["id"], 0)
                        decision, note = plan[min(n, len(plan) - 1)]
                    checkpoint = (request.get("correlationId") or "").removeprefix("checkpoint:") or None
                    client.resolve_gate(
                        run["id"],
                        step_id=request["stepId"],
                        gate=request["gate"],
                        checkpoint=checkpoint,
                        decision=decision,
                        note=note,
                    )
                    done.add(request["id"])
                    counts[run["id"]] = counts.get(run["id"], 0) + 1
                    decided.append((run["workflowId"], decision, note))
        except WorkbenchAPIError as exc:  # a refusal (rate limit, a race): try again
            print("decide:", exc, flush=True)


@pytest.mark.skipif(NODE is None or NPM is None, reason="node and npm are not installed")
def test_node_test_runner_passes_against_a_live_server():
    npm_ci()
    with Cluster(database="sqlite") as cluster, FakeOpenAI() as gpt_fake, FakeAnthropic() as claude_fake:
        seed = cluster.seed(workflow=SEED_WORKFLOW, users=(("alice", "owner"),))
        url = f"http://127.0.0.1:{cluster.ports[0]}"
        client = WorkbenchClient(url, seed["token"], retries=0)
        stop = threading.Event()
        decided: list[tuple[str, str, str]] = []
        decider = threading.Thread(target=decide_gates, args=(client, stop, decided), daemon=True)
        decider.start()
        env = {
            **os.environ,
            "WORKBENCH_URL": url,
            "WORKBENCH_TOKEN": seed["token"],
            "WORKBENCH_TS_TITLE": TITLE,
            "OPENAI_FAKE_URL": gpt_fake.url,
            "ANTHROPIC_FAKE_URL": claude_fake.url,
            # the docs' recipes use the SDKs' defaults: these point them at the fakes
            "OPENAI_BASE_URL": gpt_fake.url + "/v1",
            "OPENAI_API_KEY": "test-openai-key",
            "ANTHROPIC_BASE_URL": claude_fake.url,
            "ANTHROPIC_API_KEY": "test-anthropic-key",
        }
        try:
            done = subprocess.run(
                [
                    str(NODE),
                    "--test",
                    "--test-concurrency=2",
                    *sorted(str(p) for p in SDK.glob("test/*.test.js")),
                ],
                cwd=SDK,
                env=env,
                capture_output=True,
                text=True,
                timeout=420,
            )
        finally:
            stop.set()
            decider.join(10)
            client.close()
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert "# fail 0" in done.stdout and "# skipped 0" in done.stdout, done.stdout[-3000:]
    assert ("ts-articles", "rejected", "cite your sources") in decided
    assert ("nextjs-chat", "approved", "send it") in decided
    assert ("chat", "approved", "go ahead") in decided and ("articles", "approved", "good now") in decided
