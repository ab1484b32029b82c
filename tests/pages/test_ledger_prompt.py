"""The ledgers break cost down by the prompt version each model call was made with
(payload["workbench.prompt"]): a "By prompt version" table, only when some call used a prompt."""

from __future__ import annotations

import re

import pytest

from runs import actions
from tests.pages.test_ledger_pages import WORKFLOW, _response, _row_labels, _table

pytestmark = pytest.mark.django_db

RANGE = {"from": "2026-01-01", "to": "2026-12-31"}


@pytest.fixture
def prompted_run(workspace):
    """run_q: one call made with prompt greet version 2 (USD 0.10), one without a prompt (USD 0.20)."""
    actions.do_start_run(workspace=workspace, workflow=WORKFLOW, actor="t", run_id="run_q")
    events = [
        _response("run_q", 1, "2026-03-01T10:00:00.000Z", step="alpha", tokens=1000, cost=0.1),
        _response("run_q", 2, "2026-03-01T11:00:00.000Z", step="alpha", tokens=2000, cost=0.2),
    ]
    events[0]["payload"] = {"workbench.prompt": {"name": "greet", "version": 2}}
    actions.do_append_events(workspace=workspace, run_id="run_q", events=events)


def _assert_prompt_table(html: str) -> None:
    assert ">By prompt version</h2>" in html
    table = _table(html, "byPrompt")
    assert _row_labels(table) == ["greet@2", "(unattributed)", "Total"]
    # greet@2: 1 call, 1,000 tokens, USD 0.10; the call without a prompt is unattributed
    assert re.search(r'greet@2</th><td class="num">1</td>.*?<td class="num">1,000</td>.*?USD 0.10<', table)
    assert re.search(r'\(unattributed\)</th><td class="num">1</td>.*?<td class="num">2,000</td>', table)
    assert re.search(r'Total</th><td class="num">2</td>.*?<td class="num">3,000</td>.*?USD 0.30<', table)


def test_the_workspace_ledger_shows_cost_by_prompt_version(client, alice, prompted_run):
    client.force_login(alice)
    _assert_prompt_table(client.get("/ledger/", RANGE).content.decode())


def test_the_run_ledger_shows_cost_by_prompt_version(client, alice, prompted_run):
    client.force_login(alice)
    _assert_prompt_table(client.get("/runs/run_q/ledger/").content.decode())


def test_no_prompt_table_when_no_call_used_a_prompt(client, alice, workspace):
    actions.do_start_run(workspace=workspace, workflow=WORKFLOW, actor="t", run_id="run_n")
    actions.do_append_events(
        workspace=workspace,
        run_id="run_n",
        events=[_response("run_n", 1, "2026-03-01T10:00:00.000Z", step="alpha", tokens=10, cost=0.1)],
    )
    client.force_login(alice)
    for url, params in (("/ledger/", RANGE), ("/runs/run_n/ledger/", {})):
        html = client.get(url, params).content.decode()
        assert 'data-rollup="byProvider"' in html
        assert 'data-rollup="byPrompt"' not in html and "By prompt version" not in html
