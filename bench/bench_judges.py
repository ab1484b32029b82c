"""A shadow judge at a gate: what it adds to a gate request, and what it costs.

100 runs each reach a PAUSE_BEFORE gate; an LLM gate judge (a prompt version and claude-haiku-4-5,
through the real Anthropic SDK against the loopback fake) proposes on each. Printed: the gate
request alone (the append that opens the gate), the judge's task per gate until its proposal is
available (p50, p95), and the judge's cost per 100 gates as the ledger priced it.

The judge runs in the task worker after the gate request commits: the request itself pays only
the listener's one query (measured as the difference of the two "gate request" figures).

Environment: BENCH_JUDGE_GATES (default 100), BENCH_PAGES_DB (as bench_pages).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

os.environ["WORKBENCH_TASKS_BACKEND"] = "dummy"  # the bench calls the judges' task itself
import bench_pages  # noqa: E402,F401  (sets up Django on its own temporary database)
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from judges import actions as judge_actions  # noqa: E402
from judges.models import Proposal  # noqa: E402
from runs import actions  # noqa: E402
from runs.actions.permissions import ROLE_SCOPES  # noqa: E402
from runs.actions.prompts import do_save_prompt_version  # noqa: E402
from runs.actions.workspaces import get_or_create_workspace  # noqa: E402
from runs.engine import commands as cmd  # noqa: E402
from tests.fakes.anthropic_api import FakeAnthropic  # noqa: E402

GATES = int(os.environ.get("BENCH_JUDGE_GATES", "100"))
WORKFLOW = {
    "id": "bench-judged",
    "version": 1,
    "steps": [{"id": "parse"}, {"id": "review", "gatePolicy": "PAUSE_BEFORE"}],
    "edges": [{"id": "e1", "from": "parse", "to": "review"}],
}
PROMPT = (
    "Run {{run}}: should {{step}} pass its {{gate}} gate? Answer JSON with decision, confidence, rationale."
)


def gate_request(workspace, run_id: str) -> tuple[object, float]:
    run = actions.do_start_run(workspace=workspace, workflow=WORKFLOW, run_id=run_id, actor="bench")
    started = time.perf_counter()
    actions.do_commands(
        workspace=workspace,
        run_id=run_id,
        commands=[cmd.BeginStep(step_id="parse"), cmd.CompleteStep(step_id="parse")],
        actor="bench",
    )
    return run, (time.perf_counter() - started) * 1000


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def main() -> int:
    call_command("migrate", verbosity=0)
    settings.WORKBENCH_EGRESS_ALLOW = ["127.0.0.0/8"]
    workspace = get_or_create_workspace("bench-judges")
    with FakeAnthropic() as fake:
        settings.WORKBENCH_JUDGE_PROVIDERS = {
            "anthropic": {"base_url": fake.url, "api_key": "test-anthropic-key", "max_retries": 0}
        }
        alone = [gate_request(workspace, f"run_plain_{i:04d}")[1] for i in range(GATES)]
        do_save_prompt_version(workspace, name="bench/judge", body=PROMPT, scopes=ROLE_SCOPES["owner"])
        judge = judge_actions.do_create_judge(
            workspace=workspace, name="bench", kind="llm", workflow_id=WORKFLOW["id"], step_id="review",
            gate="PAUSE_BEFORE", config={"provider": "anthropic", "model": "claude-haiku-4-5",
                                         "prompt": "bench/judge", "promptVersion": 1},
        )  # fmt: skip
        with_judge, judged = [], []
        for i in range(GATES):
            run, ms = gate_request(workspace, f"run_judged_{i:04d}")
            with_judge.append(ms)
            reply = {"decision": "approve", "confidence": 0.9, "rationale": "ok"}
            fake.script({"text": json.dumps(reply)})
            started = time.perf_counter()
            judge_actions.judge_run(run.pk)
            judged.append((time.perf_counter() - started) * 1000)
        proposals = Proposal.objects.filter(judge=judge)
        cost = sum((p.cost for p in proposals), Decimal(0))
        ready = proposals.filter(status="proposed").count()
        for failed in proposals.exclude(status="proposed")[:1]:
            print(f"not proposed: {failed.status} {failed.error}")
        print(f"gates: {GATES}, proposals available: {ready}, provider requests: {len(fake.requests)}")
        print(f"gate request alone: p50 {statistics.median(alone):.2f} ms, p95 {pct(alone, 0.95):.2f} ms")
        print(
            f"gate request with a judge attached (listener only): p50 {statistics.median(with_judge):.2f} ms, "
            f"p95 {pct(with_judge, 0.95):.2f} ms"
        )
        print(
            f"judge's task until the proposal is available (added latency): p50 {statistics.median(judged):.2f} ms, "
            f"p95 {pct(judged, 0.95):.2f} ms"
        )
        print(
            f"judge's cost per 100 gates on the fake: USD {cost * 100 / GATES:.6f} (ledger-priced claude-haiku-4-5)"
        )
    return 0 if ready == GATES else 1


if __name__ == "__main__":
    raise SystemExit(main())
