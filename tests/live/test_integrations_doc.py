"""docs/integrations.md cannot rot: each ``# recipe:`` block runs, as written, in a fresh process
against a live server (daphne on loopback) with the official SDKs pointed at loopback fakes.

A reviewer thread decides the gates the recipes open (the first decision on a run is a rejection
with a note, the next ones approvals), as a person in the inbox would.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from workbench_sdk import WorkbenchClient

from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.openai_api import FakeOpenAI
from tests.live.cluster import ROOT, Cluster

pytestmark = pytest.mark.slow

DOC = ROOT / "docs" / "integrations.md"
RECIPE = re.compile(r"```python\n# recipe: (?P<name>[\w-]+)\n(?P<code>.*?)```", re.S)


def recipes() -> dict[str, str]:
    return {m["name"]: m["code"] for m in RECIPE.finditer(DOC.read_text(encoding="utf-8"))}


def test_the_page_has_the_recipes_the_readme_promises():
    assert set(recipes()) == {
        "observe-openai",
        "anthropic",
        "gates",
        "langgraph",
        "replay",
        "otel-genai",
        "otel-openinference",
    }
    assert "docs/integrations.md" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_tested_versions_are_the_ones_the_suite_runs():
    """The page's "Tested with" pins (its pip lines) name the versions installed here, with which
    the recipes below run: a bump of the test extra without the page (or back) fails."""
    from importlib.metadata import PackageNotFoundError, version

    text = (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")
    pins = dict(re.findall(r'"([A-Za-z0-9_.-]+)==([^"]+)"', text))
    assert {
        "opentelemetry-sdk",
        "opentelemetry-exporter-otlp-proto-http",
        "opentelemetry-instrumentation-openai-v2",
        "openinference-instrumentation-openai",
    } <= set(pins)
    for name, pinned in pins.items():
        try:
            installed = version(name)
        except PackageNotFoundError:
            pytest.skip(f"{name} is not installed (the otel-tests extra)")
        assert installed == pinned, f"docs/integrations.md says {name}=={pinned}, the suite runs {installed}"


@pytest.fixture(scope="module")
def live():
    with (
        Cluster(database="sqlite") as cluster,
        FakeOpenAI() as gpt_fake,
        FakeAnthropic() as claude_fake,
    ):
        seed = cluster.seed(workflow={"id": "seed", "version": 0, "steps": [{"id": "only"}]})
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))},
            "WORKBENCH_URL": f"http://127.0.0.1:{cluster.ports[0]}",
            "WORKBENCH_TOKEN": seed["token"],
            "OPENAI_BASE_URL": gpt_fake.url + "/v1",
            "OPENAI_API_KEY": "test-openai-key",
            "ANTHROPIC_BASE_URL": claude_fake.url,
            "ANTHROPIC_API_KEY": "test-anthropic-key",
            "PYTHONPATH": str(ROOT / "sdk" / "python"),  # this checkout's SDK
        }
        client = WorkbenchClient(env["WORKBENCH_URL"], seed["token"])
        yield env, client
        client.close()


class Reviewer(threading.Thread):
    """Rejects the first gate of each run (with a note) and approves every later one."""

    def __init__(self, client: WorkbenchClient) -> None:
        super().__init__(daemon=True)
        self.client = client
        self.stop = threading.Event()
        self.decided: dict[str, int] = {}

    def run(self) -> None:
        while not self.stop.is_set():
            for item in self.client.list_runs(limit=50):
                if item["status"] != "running":
                    continue
                state, _ = self.client.get_run_state(item["id"])
                trace = state["trace"]
                opened = [e for e in trace if e["type"] == "human_gate_requested"]
                if len(opened) <= len([e for e in trace if e["type"] == "human_gate_resolved"]):
                    continue
                gate = opened[-1]
                corr = gate.get("correlationId") or ""
                first = self.decided.get(item["id"], 0) == 0
                self.client.resolve_gate(
                    item["id"],
                    step_id=gate["stepId"],
                    gate=gate["gate"],
                    checkpoint=corr[len("checkpoint:") :] or None if corr.startswith("checkpoint:") else None,
                    decision="rejected" if first else "approved",
                    note="warmer, please" if first else "good",
                )
                self.decided[item["id"]] = self.decided.get(item["id"], 0) + 1
            time.sleep(0.2)


OTEL_RECIPES = ("otel-genai", "otel-openinference")


@pytest.mark.parametrize(
    "name", ["observe-openai", "anthropic", "gates", "langgraph", "replay", *OTEL_RECIPES]
)
def test_recipe_runs(live, name, tmp_path: Path):
    if name in OTEL_RECIPES:
        pytest.importorskip(
            "opentelemetry.instrumentation.openai_v2"
            if name == "otel-genai"
            else "openinference.instrumentation.openai"
        )
    env, client = live
    script = tmp_path / f"recipe_{name.replace('-', '_')}.py"
    script.write_text(recipes()[name], encoding="utf-8")
    before = {r["id"] for r in client.list_runs(limit=500)}
    reviewer = Reviewer(client)
    reviewer.start()
    try:
        proc = subprocess.run(
            [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
    finally:
        reviewer.stop.set()
        reviewer.join(5)
    assert proc.returncode == 0, proc.stderr[-3000:]
    new = [r for r in client.list_runs(limit=500) if r["id"] not in before]
    if name in OTEL_RECIPES:
        # The embedded profile queues OTLP spans (WORKBENCH_OTLP_QUEUE): its worker process stores
        # them within about a second of the exporter's 2xx, so the run may show a moment later.
        deadline = time.monotonic() + 15
        while not _otel_run_stored(client, new) and time.monotonic() < deadline:
            time.sleep(0.1)
            new = [r for r in client.list_runs(limit=500) if r["id"] not in before]
        _check_otel_run(client, name, new)
        return
    assert new and all(r["status"] == "completed" for r in new), new
    if name in ("gates", "langgraph"):
        assert list(reviewer.decided.values()) == [2]  # rejected once, then approved
        state, _ = client.get_run_state(new[0]["id"])
        starts = [e["stepId"] for e in state["trace"] if e["type"] == "step_started"]
        assert starts.count({"gates": "write", "langgraph": "draft"}[name]) == 2
    if name == "replay":
        assert "'cacheHits': 1" in proc.stdout and "'providerCalls': 0" in proc.stdout


def _otel_run_stored(client: WorkbenchClient, new: list[dict]) -> bool:
    if len(new) != 1:
        return False
    state, _ = client.get_run_state(new[0]["id"])
    return any(e["type"] == "model_io" and e["direction"] == "response" for e in state["trace"])


def _check_otel_run(client: WorkbenchClient, name: str, new: list[dict]) -> None:
    """The trace became one run of its own (no run id anywhere), tagged with the service, with
    the model call priced from the price source and the user's message captured."""
    assert len(new) == 1, new
    assert "service:weather-app" in new[0]["tags"]
    if name == "otel-openinference":
        assert "session:conversation-7" in new[0]["tags"]
    state, _ = client.get_run_state(new[0]["id"])
    trace = state["trace"]
    response = next(e for e in trace if e["type"] == "model_io" and e["direction"] == "response")
    assert response["model"].startswith("gpt-4o-mini") and response["usage"]["inputTokens"] > 0
    assert response["cost"]["amount"] > 0 and response["payload"]["workbench.pricing"]["source"]
    request = next(e for e in trace if e["type"] == "model_io" and e["direction"] == "request")
    assert "The weather in Oslo?" in json.dumps(request)
    assert {e["type"] for e in trace} >= {"span_started", "span_ended"}
