"""A cost nobody could work out says why: "no cache-read price for <model>" (a price row without the
rate the call needs), "no price for <model>" (no source knows it), on the run ledger's call row."""

from __future__ import annotations

from decimal import Decimal

import pytest

from runs import actions
from runs.providers.pricing import PRICING_KEY, Price, price_event

WORKFLOW = {"id": "wf-price", "version": 1, "steps": [{"id": "alpha"}], "edges": []}


def _response(model: str, *, cached: int = 0) -> dict:
    return {
        "id": f"evt_{model}",
        "runId": "run_u",
        "ts": "2026-03-01T10:00:00.000Z",
        "type": "model_io",
        "direction": "response",
        "stepId": "alpha",
        "provider": "acme",
        "model": model,
        "usage": {"inputTokens": 1000, "outputTokens": 10, "totalTokens": 1010, "cachedInputTokens": cached},
    }


def test_a_missing_cache_read_price_is_named():
    table = {"acme-1": Price(input=Decimal("1"), output=Decimal("2"))}  # no cache-read rate
    event = _response("acme-1", cached=600)
    assert price_event(event, table) is None and "cost" not in event
    assert event["payload"][PRICING_KEY] == {"source": "unpriced", "why": "no cache-read price for acme-1"}
    priced = _response("acme-1")  # no cached tokens: the row prices it
    assert price_event(priced, table) is not None and priced["cost"]["amount"] > 0
    unknown = _response("nobody-knows-7")
    price_event(unknown, table)
    assert unknown["payload"][PRICING_KEY]["why"].startswith("no price for nobody-knows-7")


@pytest.mark.django_db
def test_the_run_ledger_says_why_a_cost_is_unknown(client, alice, workspace):
    actions.do_start_run(workspace=workspace, workflow=WORKFLOW, actor="t", run_id="run_u")
    event = _response("acme-1", cached=600)
    price_event(event, {"acme-1": Price(input=Decimal("1"), output=Decimal("2"))})
    actions.do_append_events(workspace=workspace, run_id="run_u", events=[event])
    client.force_login(alice)
    html = client.get("/runs/run_u/ledger/").content.decode()
    assert 'unknown <span class="muted">(no cache-read price for acme-1)</span>' in html
