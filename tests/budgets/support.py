"""A run paused at its ``budget`` gate, for the tests of the gate's decisions (page, REST, MCP,
Slack, e-mail): it spent USD 0.01 against a default run budget of USD 0.01."""

from __future__ import annotations

from datetime import UTC, datetime

from runs import actions
from runs.actions import budgets
from runs.engine import commands as cmd
from runs.models import Event
from runs.protocol.values import loads

WORKFLOW = {"id": "wf-spend", "version": 1, "steps": [{"id": "draft"}], "edges": []}
GATE = {"stepId": "draft", "gate": "CHECKPOINT", "checkpoint": "budget"}


def pause_at_budget(workspace, run_id: str = "run_spend", *, title: str = "Drafts") -> None:
    budgets.do_set_budgets(workspace=workspace, monthly_cap=None, run_default="0.01")
    actions.do_start_run(
        workspace=workspace, workflow=WORKFLOW, actor="user:alice", run_id=run_id, title=title
    )
    actions.do_command(workspace=workspace, run_id=run_id, command=cmd.BeginStep("draft"), actor="t")
    spent = {
        "id": f"evt_{run_id}",
        "runId": run_id,
        "ts": datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
        "type": "model_io",
        "direction": "response",
        "provider": "openai",
        "model": "gpt-4o",
        "stepId": "draft",
        "cost": {"amount": 0.01, "currency": "USD"},
    }
    actions.do_append_events(workspace=workspace, run_id=run_id, events=[spent])
    answer = budgets.check_run_budget(workspace=workspace, run_id=run_id, step_id="draft")
    assert answer["allowed"] is False and answer["gate"]["checkpoint"] == "budget"


def gate_decisions(run_id: str = "run_spend") -> list[dict]:
    rows = Event.objects.filter(run__run_id=run_id, type="human_gate_resolved").order_by("seq")
    return [loads(body) for body in rows.values_list("body", flat=True)]


def wait_at_review(workspace, run_id: str) -> None:
    """A run waiting at another checkpoint (``review``): it keeps its plain Approve."""
    actions.do_start_run(workspace=workspace, workflow=WORKFLOW, actor="t", run_id=run_id)
    actions.do_command(
        workspace=workspace,
        run_id=run_id,
        command=cmd.RequestGate(step_id="draft", gate="CHECKPOINT", reason="look", checkpoint="review"),
        actor="t",
    )
