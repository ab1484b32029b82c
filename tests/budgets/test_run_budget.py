"""A run budget: an SDK pipeline (official openai SDK, traced, against a loopback fake) stops before
the call that would pass its budget, at a CHECKPOINT gate named ``budget``; the fake counts no
request until a person raises the limit (the decision names it). Nobody asked: nothing paused."""

from __future__ import annotations

import threading
import time

import openai
import pytest
from workbench_sdk import BudgetExceeded, RemoteRun, WorkbenchClient, traced_openai

from accounts.tokens import create_token
from runs.actions import budgets
from runs.models import Event, Run
from runs.models_budgets import BudgetRecord
from runs.protocol.validate import validate_event
from runs.protocol.values import loads
from tests.fakes.openai_api import FakeOpenAI

WORKFLOW = {"id": "wf-budget", "version": 1, "steps": [{"id": "draft"}], "edges": []}
# each call: 1000 prompt tokens at $2.50/M + 100 completion tokens at $10/M = $0.0035
PRICES = {"gpt-4o": {"input": "2.5", "output": "10", "cache_read": "1.25", "source": "workspace"}}
USAGE = {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}


@pytest.fixture
def token(transactional_db, workspace):
    return create_token(workspace=workspace, name="host", scopes=["read", "write", "review"]).secret


@pytest.fixture
def fake():
    with FakeOpenAI() as server:
        server.script(*({"usage": USAGE} for _ in range(10)))
        yield server


def pipeline(live_server, token, fake, calls: int, outcome: dict) -> None:
    """Three drafts in one step, each a traced chat completion."""
    with WorkbenchClient(live_server.url, token) as wb:
        run = RemoteRun.start(wb, workflow=WORKFLOW, run_id=outcome["run_id"], prices=PRICES)
        client = traced_openai(
            openai.OpenAI(api_key="test-openai-key", base_url=fake.url + "/v1", max_retries=0),
            run.tracer("draft"),
        )
        try:
            with run.step("draft"):
                for n in range(calls):
                    client.chat.completions.create(
                        model="gpt-4o", messages=[{"role": "user", "content": f"draft {n}"}]
                    )
                    outcome["calls"] = n + 1
            run.finish()
        except BudgetExceeded as exc:
            outcome["stopped"] = str(exc)


def _events(run_id: str) -> list[dict]:
    return [
        loads(b)
        for b in Event.objects.filter(run__run_id=run_id).order_by("seq").values_list("body", flat=True)
    ]


def _wait_for(predicate, seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_a_run_pauses_at_its_budget_gate_until_a_person_raises_the_limit(live_server, workspace, token, fake):
    budgets.do_set_budgets(
        workspace=workspace, monthly_cap=None, run_default=None, workflows={"wf-budget": "0.008"}, actor="t"
    )
    outcome: dict = {"run_id": "run_budgeted"}
    worker = threading.Thread(target=pipeline, args=(live_server, token, fake, 3, outcome), daemon=True)
    worker.start()
    # two calls ($0.007) fit; the third (about $0.0035 more) would pass $0.008: the run pauses
    _wait_for(lambda: any(e["type"] == "human_gate_requested" for e in _events("run_budgeted")))
    gate = next(e for e in _events("run_budgeted") if e["type"] == "human_gate_requested")
    assert gate["gate"] == "CHECKPOINT" and gate["correlationId"] == "checkpoint:budget"
    assert "would pass it" in gate["reason"] and "USD 0.008" in gate["reason"]
    time.sleep(0.5)
    assert len(fake.requests) == 2 and outcome.get("calls") == 2  # nothing is called meanwhile
    assert worker.is_alive()
    # a person raises the limit (REST, reviewer): the gate is approved with a note naming it
    with WorkbenchClient(live_server.url, token) as wb:
        raised = wb._object("POST", "/runs/run_budgeted/budget", json={"limit": "0.02"})
    assert raised["resumed"] is True and "Budget raised to USD 0.02 (was USD 0.008)" in raised["note"]
    worker.join(timeout=20)
    assert not worker.is_alive() and outcome.get("calls") == 3 and "stopped" not in outcome
    assert len(fake.requests) == 3
    events = _events("run_budgeted")
    for event in events:
        validate_event(event, "event")  # the budget gate and its decision are protocol events
    decision = next(e for e in events if e["type"] == "human_gate_resolved")
    assert decision["decision"] == "approved" and "USD 0.02" in decision["note"]
    kinds = list(
        BudgetRecord.objects.filter(workspace=workspace, run_id="run_budgeted").values_list("kind", flat=True)
    )
    assert sorted(kinds) == ["paused", "raised"]
    assert Run.objects.get(run_id="run_budgeted").status == "completed"


def test_stopping_at_the_budget_gate_stops_the_pipeline_without_a_call(live_server, workspace, token, fake):
    budgets.do_set_budgets(workspace=workspace, monthly_cap=None, run_default="0.001", actor="t")
    outcome: dict = {"run_id": "run_stopped"}
    worker = threading.Thread(target=pipeline, args=(live_server, token, fake, 3, outcome), daemon=True)
    worker.start()
    # the first call fits (nothing spent); the second would pass $0.001
    _wait_for(lambda: any(e["type"] == "human_gate_requested" for e in _events("run_stopped")))
    with WorkbenchClient(live_server.url, token) as wb:
        wb._object("POST", "/runs/run_stopped/budget", json={"stop": True})
    worker.join(timeout=20)
    assert "Stopped at its budget" in outcome["stopped"]
    assert len(fake.requests) == 1
    assert BudgetRecord.objects.filter(workspace=workspace, run_id="run_stopped", kind="stopped").exists()


def test_nobody_asked_no_budget_nothing_paused(live_server, workspace, token, fake):
    outcome: dict = {"run_id": "run_free"}
    pipeline(live_server, token, fake, 3, outcome)
    assert outcome.get("calls") == 3 and len(fake.requests) == 3
    assert not any(e["type"] == "human_gate_requested" for e in _events("run_free"))
    assert not BudgetRecord.objects.filter(workspace=workspace).exists()
