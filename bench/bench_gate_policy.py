"""Gate policies: what a policy adds to a decision, and what the escalation sweep costs.

1. Median time of one gate decision (one run per decision, a PAUSE_BEFORE gate waiting) by
   - the engine command alone (``do_command(ResolveGate)``, as before policies),
   - ``do_decide_gate`` with no policy set (the policy read, the channel row),
   - ``do_decide_gate`` under a 2-of-2 quorum: the first vote (an annotation) and the deciding
     vote (the resolution and the quorum annotation), each timed.
2. The escalation sweep (``do_escalate_gates``) over BENCH_GATE_RUNS waiting runs with a one-tier
   policy: the sweep that tells every gate's tier, and the next one that finds nothing to do.

Environment: BENCH_GATE_RUNS (default 300), BENCH_GATE_DB (default: a SQLite file in a temporary
directory). Figures only; no target is asserted.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RUNS = int(os.environ.get("BENCH_GATE_RUNS", "300"))
TMP = Path(tempfile.mkdtemp(prefix="bench_gate_policy_"))
os.environ["DATABASE_URL"] = os.environ.get("BENCH_GATE_DB") or f"sqlite:///{TMP / 'gates.sqlite3'}"
os.environ.setdefault("WORKBENCH_VAR_DIR", str(TMP))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "workbench.settings")
os.environ.setdefault("DEBUG", "0")
os.environ.setdefault("SECRET_KEY", "bench-gate-policy-not-secret-" + "x" * 40)
os.environ["WORKBENCH_TASKS_BACKEND"] = "dummy"
os.environ["WORKBENCH_TRANSCRIPTS"] = "0"

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.utils import timezone  # noqa: E402

from runs import actions  # noqa: E402
from runs.actions.gatepolicy import do_decide_gate, do_escalate_gates, do_set_gate_policy  # noqa: E402
from runs.actions.workspaces import add_member, get_or_create_workspace  # noqa: E402
from runs.engine import commands as c  # noqa: E402

WORKFLOW = {
    "id": "wf-gates",
    "version": 1,
    "steps": [{"id": "review", "gatePolicy": "PAUSE_BEFORE"}],
    "edges": [],
}


def start(ws, prefix: str, n: int) -> list[str]:
    ids = [f"run_{prefix}_{i}" for i in range(n)]
    for run_id in ids:
        actions.do_start_run(workspace=ws, workflow=WORKFLOW, run_id=run_id, actor="user:starter")
    return ids


def median_ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:.2f} ms"


def timed(fn, /, **kwargs) -> float:
    t0 = time.perf_counter()
    fn(**kwargs)
    return time.perf_counter() - t0


def main() -> int:
    call_command("migrate", verbosity=0)
    users = get_user_model()
    plain = get_or_create_workspace("plain", name="Plain")
    quorum = get_or_create_workspace("quorum", name="Quorum")
    for name in ("bob", "dave"):
        user = users.objects.create_user(name, email=f"{name}@example.com")
        add_member(plain, user, "reviewer")
        add_member(quorum, user, "reviewer")
    do_set_gate_policy(
        workspace=quorum, policy={"quorum": 2, "escalation": [{"afterSeconds": 60, "notify": ["dave"]}]}
    )
    n = min(RUNS, 200)
    engine_runs, plain_runs, quorum_runs = start(plain, "e", n), start(plain, "p", n), start(quorum, "q", n)
    resolve = c.ResolveGate(step_id="review", gate="PAUSE_BEFORE", decision="approved")
    engine, policy, first, deciding = [], [], [], []
    gate = {"step_id": "review", "gate": "PAUSE_BEFORE", "decision": "approved"}
    for e_id, p_id, q_id in zip(engine_runs, plain_runs, quorum_runs, strict=True):
        engine.append(
            timed(actions.do_command, workspace=plain, run_id=e_id, command=resolve, actor="user:bob")
        )
        policy.append(timed(do_decide_gate, workspace=plain, run_id=p_id, actor="user:bob", **gate))
        first.append(timed(do_decide_gate, workspace=quorum, run_id=q_id, actor="user:bob", **gate))
        deciding.append(timed(do_decide_gate, workspace=quorum, run_id=q_id, actor="user:dave", **gate))
    print(f"one decision, median of {n} ({os.environ['DATABASE_URL'].split(':')[0]}):")
    print(f"  engine command alone            {median_ms(engine)}")
    print(f"  do_decide_gate, no policy       {median_ms(policy)}")
    print(f"  2-of-2 quorum, first vote       {median_ms(first)}")
    print(f"  2-of-2 quorum, deciding vote    {median_ms(deciding)}")

    start(quorum, "w", RUNS)
    later = timezone.now() + timedelta(hours=1)
    t_first = timed(
        lambda: print(
            f"escalation sweep over {RUNS} waiting runs: {do_escalate_gates(now=later)} e-mails", end=""
        )
    )
    t_again = timed(lambda: do_escalate_gates(now=later))
    print(f" in {t_first * 1000:.0f} ms; the next sweep (nothing due) {t_again * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
