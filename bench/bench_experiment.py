"""An experiment over 100 items whose change affects only the last step.

100 runs of a three-step pipeline (classify, draft, polish; one model call each, through the real
Anthropic SDK against the loopback fake, which counts requests) are recorded; a dataset holds
them (``fromRuns``); an experiment changes the polish step's model (``configurable.polishModel``)
and forks each run from the polish step: classify and draft are the source's fixed history, only
polish asks the provider. Printed: wall time of the experiment, provider requests it made (the
fake's count), cache hits, and the cost delta.

Environment: BENCH_EXPERIMENT_ITEMS (default 100), BENCH_EXPERIMENT_WORKERS (default 1: one SQLite
connection; more uses that many threads), BENCH_PAGES_DB (as bench_pages).
"""

from __future__ import annotations

import os
import sys
import time
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

os.environ["WORKBENCH_TASKS_BACKEND"] = "dummy"  # the experiment runner runs the forks itself
import bench_pages  # noqa: E402,F401  (sets up Django on its own temporary database)
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402

from evals import actions  # noqa: E402
from evals.runner import run_experiment  # noqa: E402
from runs.actions.workspaces import get_or_create_workspace  # noqa: E402
from runs.engine import programs  # noqa: E402
from runs.execution.host import Workbench  # noqa: E402
from runs.models import Workspace  # noqa: E402
from runs.providers.base import ProviderSettings  # noqa: E402
from runs.providers.pricing import Price  # noqa: E402
from tests.fakes.anthropic_api import FakeAnthropic  # noqa: E402

ITEMS = int(os.environ.get("BENCH_EXPERIMENT_ITEMS", "100"))
WORKERS = int(os.environ.get("BENCH_EXPERIMENT_WORKERS", "1"))
STEPS = ("classify", "draft", "polish")
WORKFLOW = {
    "id": "bench-experiment",
    "version": 1,
    "steps": [
        {"id": "classify", "outputs": ["category"]},
        {"id": "draft", "inputs": ["category"], "outputs": ["draft"]},
        {"id": "polish", "inputs": ["draft"], "outputs": ["reply"]},
    ],
    "edges": [{"id": "e1", "from": "classify", "to": "draft"}, {"id": "e2", "from": "draft", "to": "polish"}],
}
PRICES = {
    "claude-haiku-4-5": Price(input=Decimal("1"), output=Decimal("5")),
    "claude-sonnet-4-5": Price(input=Decimal("3"), output=Decimal("15")),
}


class Pipeline:
    configurable_steps = {"polishModel": "polish"}
    step_order = list(STEPS)

    def __init__(self, url: str) -> None:
        self.provider = ProviderSettings(
            kind="anthropic",
            api_key="test-anthropic-key",
            base_url=url,
            max_retries=0,
            egress_allow=("127.0.0.0/8",),
        )

    def __call__(self, s) -> None:
        ticket = s.run.run_doc["metadata"]["ticket"]
        previous = ticket
        for step, output in zip(STEPS, ("category", "draft", "reply"), strict=True):
            model = (
                s.configurable.get("polishModel", "claude-sonnet-4-5")
                if step == "polish"
                else "claude-haiku-4-5"
            )
            s.begin_step(step)
            request = {
                "model": model,
                "max_tokens": 32,
                "messages": [{"role": "user", "content": f"{step}: {previous}"}],
            }
            answer = s.model_call(
                self.provider, request, step_id=step, correlation_id=f"c-{step}", price=PRICES[model]
            )
            s.write_artifact(output, "text", {"text": answer.text}, step_id=step)
            s.complete_step(step)
            previous = answer.text
        s.complete()


def main() -> int:
    call_command("migrate", verbosity=0)
    settings.WORKBENCH_EGRESS_ALLOW = ["127.0.0.0/8"]
    workspace = get_or_create_workspace("bench-experiment")
    with FakeAnthropic() as fake:
        programs.register(WORKFLOW["id"], Pipeline(fake.url))
        wb = Workbench(workspace=workspace, actor="bench")
        t0 = time.perf_counter()
        runs = [
            wb.run_workflow(workflow=WORKFLOW, metadata={"ticket": f"ticket {i}"}).run for i in range(ITEMS)
        ]
        recorded_ms = (time.perf_counter() - t0) * 1000
        recorded_requests = len(fake.requests)
        dataset = actions.do_create_dataset(workspace=workspace, name="bench")
        actions.do_add_items(
            dataset=dataset, items=actions.items_from_runs(workspace, [r.run_id for r in runs])
        )
        experiment = actions.do_create_experiment(
            workspace=workspace,
            dataset=dataset,
            name="haiku polish",
            change={"configurable": {"polishModel": "claude-haiku-4-5"}},
        )
        t0 = time.perf_counter()
        experiment = run_experiment(experiment.pk, workers=WORKERS)
        experiment_ms = (time.perf_counter() - t0) * 1000
        summary = experiment.summary
        print(
            f"experiment over {ITEMS} items, change affects the last step only: {experiment_ms:.0f} ms "
            f"({experiment_ms / ITEMS:.1f} ms/item, {WORKERS} worker(s)), "
            f"{len(fake.requests) - recorded_requests} provider requests (fake's count; summary says "
            f"{summary['providerCalls']}), {summary['cacheHits']} cache hits, cost delta {summary['costDelta']} USD, "
            f"statuses {summary['statuses']}; recording the {ITEMS} runs took {recorded_ms:.0f} ms "
            f"({recorded_requests} provider requests)"
        )
        programs.unregister(WORKFLOW["id"])
    Workspace.objects.filter(slug__startswith="bench-").delete()
    return 0


if __name__ == "__main__":
    sys.exit(main())
