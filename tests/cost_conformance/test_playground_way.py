"""The cost suite through the playground: a send to a loopback fake that reports the case's usage,
recorded as a run; the recorded response and the execution carry the expected cost."""

from __future__ import annotations

from typing import Any

import pytest

from playground import compose as c
from playground import execute
from playground.models import Execution, ModelEntry, ProviderConfig
from runs.models import Event
from runs.protocol.values import loads
from runs.providers.pricing import PRICING_KEY
from tests.cost_conformance.conftest import assert_cost, assert_usage, cases_through, workspace_row

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def egress_allows_loopback(settings):
    settings.WORKBENCH_EGRESS_ALLOW = ["127.0.0.0/8", "::1/128"]


def _entry(workspace, case: dict[str, Any], fake) -> ModelEntry:
    kind = "anthropic" if case["provider"] == "anthropic" else "openai"
    provider = ProviderConfig(
        workspace=workspace,
        name=f"Fake {kind}",
        kind=kind,
        base_url=fake.url if kind == "anthropic" else fake.url + "/v1",
        max_retries=0,
    )
    provider.set_api_key(f"test-{kind}-key")
    provider.save()
    row = workspace_row(case) or {}
    return ModelEntry.objects.create(
        workspace=workspace,
        provider=provider,
        model_id=case["model"],
        display_name=case["model"],
        context_window=200_000,
        input_price=row.get("input"),
        output_price=row.get("output"),
        cache_read_price=row.get("cache_read"),
        cache_write_price=row.get("cache_write"),
        cache_write_1h_price=row.get("cache_write_1h"),
        currency=row.get("currency", "USD"),
    )


@pytest.mark.parametrize("case", cases_through("playground"))
def test_through_the_playground(
    case, workspace, alice, anthropic_fake, openai_fake, immediate_tasks, django_capture_on_commit_callbacks
):
    fake = anthropic_fake if case["provider"] == "anthropic" else openai_fake
    fake.script({"usage": case["usage"]})
    entry = _entry(workspace, case, fake)
    composition = c.compose(c.Session(prompt="How much?"), entry.spec(), None)
    with django_capture_on_commit_callbacks(execute=True):
        ex = execute.submit(workspace=workspace, user=alice, entry=entry, composition=composition)
    ex = Execution.objects.get(pk=ex.pk)
    assert ex.status == "completed", ex.error_message
    bodies = [
        loads(b)
        for b in Event.objects.filter(run__run_id=ex.run_id, type="model_io").values_list("body", flat=True)
    ]
    response = [b for b in bodies if b["direction"] == "response"][-1]
    assert_usage(case, response.get("usage"), reasoning=case["provider"] == "openai")
    why = ((response.get("payload") or {}).get(PRICING_KEY) or {}).get("why")
    assert_cost(case, response.get("cost"), why)
    if case["expected"]["cost"] is None:
        assert ex.cost is None  # unknown, never 0
