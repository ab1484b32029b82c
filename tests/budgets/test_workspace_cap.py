"""The workspace's monthly cap: past it, the playground, experiments and judges are refused with
BUDGET_EXCEEDED in words (the fake counts 0 requests); runs that report their own calls are
recorded as always and raise an alert; every refusal is in the budget trail. Nobody asked: nothing
refused."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from accounts.tokens import create_token
from playground import compose as c
from playground.models import ModelEntry, ProviderConfig
from runs import actions
from runs.actions import ActionError, budgets
from runs.execution import model_calls
from runs.models import Run
from runs.models_budgets import BudgetRecord
from runs.providers.base import ProviderSettings
from runs.selectors.budgets import month_spend
from tests.fakes.openai_api import FakeOpenAI
from tests.task_backends import IMMEDIATE, task_backend

pytestmark = pytest.mark.django_db

WORKFLOW = {"id": "wf-spend", "version": 1, "steps": [{"id": "s"}], "edges": []}


@pytest.fixture(autouse=True)
def egress_allows_loopback(settings):
    settings.WORKBENCH_EGRESS_ALLOW = ["127.0.0.0/8", "::1/128"]


@pytest.fixture
def fake():
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def model(workspace, fake):
    provider = ProviderConfig(
        workspace=workspace, name="Fake", kind="openai", base_url=fake.url + "/v1", max_retries=0
    )
    provider.set_api_key("test-openai-key")
    provider.save()
    return ModelEntry.objects.create(
        workspace=workspace, provider=provider, model_id="gpt-4o", display_name="GPT", context_window=8192
    )


def spend(workspace, amount: float, run_id: str = "run_spent") -> None:
    """A run that reported (SDK-style) one call costing ``amount`` USD today."""
    actions.do_start_run(workspace=workspace, workflow=WORKFLOW, actor="t", run_id=run_id)
    now = datetime.now(tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    event = {
        "id": f"evt_{run_id}",
        "runId": run_id,
        "ts": now,
        "type": "model_io",
        "direction": "response",
        "provider": "openai",
        "model": "gpt-4o",
        "usage": {"inputTokens": 1000, "outputTokens": 100, "totalTokens": 1100},
        "cost": {"amount": amount, "currency": "USD"},
    }
    actions.do_append_events(workspace=workspace, run_id=run_id, events=[event])


@pytest.fixture
def immediate():
    """Playground executions run as soon as their rows are committed."""
    with task_backend(IMMEDIATE) as backend:
        yield backend


def send(client, model):
    body = {"session": c.session_to_json(c.Session(prompt="hi")), "model": model.pk}
    return client.post("/playground/send/", json.dumps(body), content_type="application/json")


def test_past_the_cap_the_playground_answers_budget_exceeded_and_calls_nothing(
    client, alice, workspace, model, fake
):
    spend(workspace, 0.75)
    assert month_spend(workspace, "USD") == Decimal("0.75")
    budgets.do_set_budgets(workspace=workspace, monthly_cap="0.50", run_default=None, actor="user:alice")
    client.force_login(alice)
    answer = send(client, model)
    assert answer.status_code == 402
    error = answer.json()["error"]
    assert error["code"] == "BUDGET_EXCEEDED"
    assert "USD 0.75 this month" in error["message"] and "monthly cap of USD 0.5" in error["message"]
    assert "no provider was called" in error["message"]
    assert fake.requests == []
    refused = BudgetRecord.objects.get(workspace=workspace, kind="refused")
    assert refused.actor == "user:alice" and "playground send" in refused.message


def test_past_the_cap_an_experiment_or_judge_call_is_refused_before_the_provider(workspace, fake):
    spend(workspace, 2)
    budgets.do_set_budgets(workspace=workspace, monthly_cap="1", run_default=None)
    settings = ProviderSettings(
        kind="openai",
        api_key="test-openai-key",
        base_url=fake.url + "/v1",
        max_retries=0,
        egress_allow=("127.0.0.0/8",),
    )
    request = {"model": "gpt-4o", "messages": [{"role": "user", "content": "judge this"}]}
    with pytest.raises(ActionError) as refused:
        model_calls.call(settings, request, workspace=workspace, use_cache=False)
    assert refused.value.code == "BUDGET_EXCEEDED" and "experiment's or a judge's" in refused.value.message
    assert fake.requests == []


def test_self_reported_runs_are_recorded_past_the_cap_and_raise_one_alert(client, workspace):
    budgets.do_set_budgets(workspace=workspace, monthly_cap="0.10", run_default=None)
    spend(workspace, 0.25, "run_sdk")
    token = create_token(workspace=workspace, name="host", scopes=["read", "write"]).secret
    auth = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    for _ in range(2):
        answer = client.post("/api/runs/run_sdk/budget/check", "{}", content_type="application/json", **auth)
        assert answer.status_code == 200 and answer.json()["allowed"] is True
    assert "cannot stop them" in answer.json()["workspaceCap"]
    alerts = BudgetRecord.objects.filter(workspace=workspace, kind="alert")
    assert alerts.count() == 1 and "cannot stop them" in alerts.get().message
    doc = client.get("/api/budgets", **auth).json()
    assert doc["pastCap"] is True and doc["spentThisMonth"].startswith("0.25")


def test_nobody_asked_nothing_is_refused(
    client, alice, workspace, model, fake, django_capture_on_commit_callbacks
):
    spend(workspace, 1000)
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=False):
        answer = send(client, model)
    assert answer.status_code == 202
    assert not BudgetRecord.objects.filter(workspace=workspace).exists()
    assert budgets.past_cap(workspace) is None


def test_a_playground_send_over_its_run_budget_is_refused_and_calls_nothing(
    client, alice, workspace, model, fake, immediate, django_capture_on_commit_callbacks
):
    # the playground workflow's run budget is 0: the send's call would pass it
    budgets.do_set_budgets(
        workspace=workspace, monthly_cap=None, run_default=None, workflows={"playground": "0"}
    )
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        answer = send(client, model)
    assert answer.status_code == 202
    state = client.get(f"/playground/executions/{answer.json()['executions'][0]['id']}/").json()
    assert state["status"] == "failed" and state["error"]["code"] == "BUDGET_EXCEEDED"
    assert "budget of USD 0 (workflow budget)" in state["error"]["message"]
    assert "this playground send is refused and no provider was called" in state["error"]["message"]
    assert fake.requests == []
    refused = BudgetRecord.objects.get(workspace=workspace, kind="refused")
    assert refused.run_id and refused.actor == "user:alice"
    assert Run.objects.get(run_id=refused.run_id).status == "failed"

    # a budget the call fits in: sent
    budgets.do_set_budgets(
        workspace=workspace, monthly_cap=None, run_default="1", workflows={"playground": None}
    )
    with django_capture_on_commit_callbacks(execute=True):
        answer = send(client, model)
    state = client.get(f"/playground/executions/{answer.json()['executions'][0]['id']}/").json()
    assert state["status"] == "completed" and len(fake.requests) == 1


def test_nobody_asked_a_playground_send_is_not_held_by_run_budgets(
    client, alice, workspace, model, fake, immediate, django_capture_on_commit_callbacks
):
    client.force_login(alice)
    with django_capture_on_commit_callbacks(execute=True):
        answer = send(client, model)
    state = client.get(f"/playground/executions/{answer.json()['executions'][0]['id']}/").json()
    assert state["status"] == "completed" and len(fake.requests) == 1
    assert not BudgetRecord.objects.filter(workspace=workspace).exists()
