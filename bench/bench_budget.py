"""Budgets: what a budget check adds to a model call.

Median time of ``runs.actions.budgets.check_run_budget`` (what ``POST /api/runs/{id}/budget/check``
runs before each SDK call) for a run with no budget anywhere (nobody asked), and for a run under its
workflow's budget (the call goes on); and of ``refuse_past_cap`` (before a playground send or an
experiment's or judge's call) with no cap and under a cap. SQLite file by default.

Environment: BENCH_BUDGET_CHECKS (default 400), BENCH_BUDGET_DB (a postgres:// URL works too).
Figures only; no target is asserted.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHECKS = int(os.environ.get("BENCH_BUDGET_CHECKS", "400"))
TMP = Path(tempfile.mkdtemp(prefix="bench_budget_"))
os.environ["DATABASE_URL"] = os.environ.get("BENCH_BUDGET_DB") or f"sqlite:///{TMP / 'budget.sqlite3'}"
os.environ.setdefault("WORKBENCH_VAR_DIR", str(TMP))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
os.environ.setdefault("DEBUG", "0")
os.environ.setdefault("SECRET_KEY", "bench-budget-not-secret-" + "x" * 40)
os.environ["WORKBENCH_TASKS_BACKEND"] = "dummy"
os.environ["WORKBENCH_TRANSCRIPTS"] = "0"
warnings.filterwarnings("ignore", message="No directory at")  # no collected static files: none served

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402

from accounts.tokens import create_token  # noqa: E402
from runs import actions  # noqa: E402
from runs.actions import budgets  # noqa: E402
from runs.actions.workspaces import get_or_create_workspace  # noqa: E402


def median_ms(fn) -> float:
    samples = []
    for _ in range(CHECKS):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1000


def main() -> int:
    call_command("migrate", verbosity=0)
    free = get_or_create_workspace("bench-free")
    held = get_or_create_workspace("bench-held")
    workflow = {"id": "wf-bench", "version": 1, "steps": [{"id": "s"}], "edges": []}
    for workspace in (free, held):
        actions.do_start_run(workspace=workspace, workflow=workflow, actor="bench", run_id="run_bench")
    budgets.do_set_budgets(
        workspace=held, monthly_cap="1000", run_default=None, workflows={"wf-bench": "100"}
    )
    rows = [
        (
            "run budget check, no budget (nobody asked)",
            lambda: budgets.check_run_budget(workspace=free, run_id="run_bench", step_id="s"),
        ),
        (
            "run budget check, under the workflow's budget",
            lambda: budgets.check_run_budget(workspace=held, run_id="run_bench", step_id="s"),
        ),
        ("monthly cap check, no cap", lambda: budgets.refuse_past_cap(free, what="a send")),
        ("monthly cap check, under the cap", lambda: budgets.refuse_past_cap(held, what="a send")),
    ]
    secret = create_token(workspace=held, name="bench", scopes=["read", "write"]).secret
    web = Client(HTTP_HOST="127.0.0.1", HTTP_AUTHORIZATION=f"Bearer {secret}")

    def over_rest() -> None:
        answer = web.post(
            "/api/runs/run_bench/budget/check",
            '{"stepId": "s"}',
            content_type="application/json",
            secure=True,
        )
        assert answer.status_code == 200 and answer.json()["allowed"] is True, (
            answer.status_code,
            answer.get("Location"),
        )

    rows.append(("POST /api/runs/{id}/budget/check (in process)", over_rest))
    print(f"budget checks ({CHECKS} each, {os.environ['DATABASE_URL'].split(':')[0]}):")
    for label, fn in rows:
        print(f"  {label:50s} {median_ms(fn):7.3f} ms median")
    print(
        "  what a budget check adds to a model call: the SDK's traced clients pay the REST line (the"
        " request through auth, the check, the answer) plus one loopback/LAN round trip; the playground"
        " and judges pay the monthly cap line in process, an experiment's fork the cap and the run budget lines"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
