"""A run with some calls priced and others not says "3 of 5 calls priced" (page and REST), never a
partial sum alone; unknown usage is unknown, never 0; a missing cache-read price is named."""

from __future__ import annotations

import pytest

from accounts.tokens import create_token
from runs import actions
from runs.presenters.priced import priced_calls

pytestmark = pytest.mark.django_db

WORKFLOW = {"id": "wf-priced", "version": 1, "steps": [{"id": "s"}], "edges": []}


def _response(n: int, **fields) -> dict:
    return {
        "id": f"evt_run_5_{n}",
        "runId": "run_5",
        "ts": f"2026-03-01T10:0{n}:00.000Z",
        "type": "model_io",
        "direction": "response",
        "provider": "openai",
        "model": "local-llm",
        **fields,
    }


@pytest.fixture
def five_calls(workspace):
    """Three priced calls, one with cached tokens and no cache-read price, one without usage."""
    actions.do_start_run(workspace=workspace, workflow=WORKFLOW, actor="t", run_id="run_5")
    usage = {"inputTokens": 1000, "outputTokens": 100, "totalTokens": 1100}
    events = [_response(n, usage=usage, cost={"amount": 0.01, "currency": "USD"}) for n in (1, 2, 3)]
    why = {"workbench.pricing": {"source": "unpriced", "why": "no cache-read price for local-llm"}}
    events.append(_response(4, usage={**usage, "cachedInputTokens": 512}, payload=why))
    events.append(_response(5))
    actions.do_append_events(workspace=workspace, run_id="run_5", events=events)


def test_rest_says_three_of_five_calls_priced_and_why(client, workspace, five_calls):
    secret = create_token(workspace=workspace, name="t", scopes=["read"]).secret
    body = client.get("/api/runs/run_5/ledger", HTTP_AUTHORIZATION=f"Bearer {secret}").json()
    assert body["pricedCalls"] == {
        "calls": 5,
        "priced": 3,
        "unpriced": 2,
        "complete": False,
        "text": "3 of 5 calls priced: the cost shown is for those 3 only",
    }
    assert {"why": "no cache-read price for local-llm", "calls": 1} in body["unpricedReasons"]
    assert {"why": "no usage reported", "calls": 1} in body["unpricedReasons"]
    no_usage = [c for c in body["calls"] if c["seq"] and not c["usage"]]
    assert len(no_usage) == 1 and no_usage[0]["cost"] is None  # unknown, never 0


def test_the_run_ledger_page_says_three_of_five_calls_priced(client, alice, five_calls):
    client.force_login(alice)
    html = client.get("/runs/run_5/ledger/").content.decode()
    assert "3 of 5 calls priced" in html
    assert "no cache-read price for local-llm (1)" in html


def test_the_words_for_every_count():
    row = {"key": "unpriced", "totals": {"eventCount": 2}}
    assert priced_calls([row], 5)["text"].startswith("3 of 5 calls priced")
    assert priced_calls([], 4)["text"] == "all 4 calls priced"
    assert priced_calls([{"key": "unpriced", "totals": {"eventCount": 3}}], 3)["complete"] is False
    assert priced_calls([], 0)["text"] == "no model call"
