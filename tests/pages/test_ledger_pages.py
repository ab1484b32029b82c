"""Ledger pages: tables that add up to the totals ("(unattributed)" rows), one precision for money
and whole numbers for tokens, a per-day chart with a data table, steps in workflow order."""

from __future__ import annotations

import re

import pytest

from runs import actions

pytestmark = pytest.mark.django_db

# Declared (and DAG) order zeta -> alpha -> mid: not alphabetical.
WORKFLOW = {
    "id": "wf-order",
    "version": 1,
    "steps": [{"id": "zeta"}, {"id": "mid"}, {"id": "alpha"}],
    "edges": [{"id": "e1", "from": "zeta", "to": "alpha"}, {"id": "e2", "from": "alpha", "to": "mid"}],
}


def _response(run_id: str, n: int, ts: str, *, step: str | None, tokens: int, cost: float) -> dict:
    event = {
        "id": f"evt_{run_id}_{n}",
        "runId": run_id,
        "ts": ts,
        "type": "model_io",
        "direction": "response",
        "provider": "openai",
        "model": "gpt-4.1-mini",
        "usage": {"inputTokens": tokens - 10, "outputTokens": 10, "totalTokens": tokens},
        "cost": {"amount": cost, "currency": "USD"},
        "durationMs": 100.4,
    }
    if step:
        event["stepId"] = step
    return event


@pytest.fixture
def two_runs(workspace):
    """run_a (tenant t-1) and run_b (no tenant, one response without a step), over two days."""
    for run_id, subject in (("run_a", {"userId": "u-1", "tenantId": "t-1"}), ("run_b", {"userId": "u-2"})):
        actions.do_start_run(
            workspace=workspace, workflow=WORKFLOW, actor="t", run_id=run_id, subject=subject
        )
    actions.do_append_events(
        workspace=workspace,
        run_id="run_a",
        events=[
            _response("run_a", 1, "2026-03-01T10:00:00.000Z", step="alpha", tokens=1000, cost=0.1),
            _response("run_a", 2, "2026-03-01T11:00:00.000Z", step="zeta", tokens=2000, cost=0.2),
        ],
    )
    actions.do_append_events(
        workspace=workspace,
        run_id="run_b",
        events=[
            _response("run_b", 1, "2026-03-03T09:00:00.000Z", step="mid", tokens=500, cost=0.00035),
            _response("run_b", 2, "2026-03-03T09:30:00.000Z", step=None, tokens=1500, cost=0.0000004),
        ],
    )


def _table(html: str, rollup: str) -> str:
    start = html.index(f'data-rollup="{rollup}"')
    return html[start : html.index("</table>", start)]


def _row_labels(table: str) -> list[str]:
    return re.findall(r'<th scope="row">([^<]*)</th>', table)


def test_workspace_ledger_tables_add_up_with_unattributed_rows(client, alice, two_runs):
    client.force_login(alice)
    html = client.get("/ledger/", {"from": "2026-01-01", "to": "2026-12-31"}).content.decode()
    tenant = _table(html, "byTenant")
    assert _row_labels(tenant) == ["t-1", "(unattributed)", "Total"]
    # t-1: 2 responses, 3,000 tokens; unattributed: run_b's 2 responses, 2,000 tokens; total 5,000
    assert re.search(r"t-1</th><td class=\"num\">2</td>.*?<td class=\"num\">3,000</td>", tenant)
    assert re.search(r"\(unattributed\)</th><td class=\"num\">2</td>.*?<td class=\"num\">2,000</td>", tenant)
    assert re.search(r"Total</th><td class=\"num\">4</td>.*?<td class=\"num\">5,000</td>", tenant)
    step = _table(html, "byStep")
    assert _row_labels(step) == ["zeta", "alpha", "mid", "(unattributed)", "Total"]  # workflow order
    assert "(unattributed)" not in _table(html, "byProvider")  # every response names its provider


def test_money_has_one_precision_and_tokens_are_whole(client, alice, two_runs):
    client.force_login(alice)
    html = client.get("/ledger/", {"from": "2026-01-01", "to": "2026-12-31"}).content.decode()
    step = _table(html, "byStep")
    # runs.presenters.numbers.money: to the cent, below a cent 2 significant digits (never 0)
    assert "USD 0.10<" in step and "USD 0.00035<" in step
    assert "USD 0.0000004<" in html  # a tiny cost is not shown as zero
    assert '<span title="USD 0.3003504">USD 0.30</span>' in html  # the total, exact on hover
    assert '<span title="401.6 ms">402 ms</span>' in html  # durations humanised, exact ms on hover
    assert "summarize" not in html.lower() and "Telemetry" not in html


def test_cost_and_tokens_per_day_chart_with_a_data_table(client, alice, two_runs):
    client.force_login(alice)
    html = client.get("/ledger/", {"from": "2026-01-01", "to": "2026-12-31"}).content.decode()
    assert 'aria-labelledby="days-title days-desc"' in html
    chart = html[html.index('class="day-chart"') : html.index("</svg>", html.index('class="day-chart"'))]
    # one bar per day of the chosen range, days without a response drawn as zero; no CDN, no script
    assert chart.count('class="bar-cost"') == 365 and "2026-03-02: USD 0</title>" in chart
    assert "2026-01-01 to 2026-12-31" in chart
    assert "<script" not in chart and "http" not in chart.replace("http://www.w3.org", "")
    table = html[html.index("Per day (data table)") :]
    assert re.search(r"2026-03-01</th><td class=\"num\">2</td><td class=\"num\">3,000</td>", table)
    assert re.search(r"2026-03-03</th><td class=\"num\">2</td><td class=\"num\">2,000</td>", table)


def test_run_ledger_lists_steps_in_workflow_order(client, alice, two_runs):
    client.force_login(alice)
    html = client.get("/runs/run_a/ledger/").content.decode()
    assert _row_labels(_table(html, "byStep")) == ["zeta", "alpha", "Total"]
    assert "(unattributed)" in _table(html, "byPlan")  # run_a's subject names no plan
    chart_title = re.search(r'<title id="chart-title">([^<]*)</title>', html).group(1)
    assert chart_title.index("zeta") < chart_title.index("alpha")


@pytest.fixture
def priced_run(workspace):
    """run_p: four responses priced by the workspace's prices, by genai-prices, by the caller, none."""
    actions.do_start_run(workspace=workspace, workflow=WORKFLOW, actor="t", run_id="run_p")
    events = [
        _response("run_p", n, f"2026-03-01T10:0{n}:00.000Z", step="alpha", tokens=1000, cost=n / 10)
        for n in (1, 2, 3, 4)
    ]
    events[0]["payload"] = {"workbench.pricing": {"source": "workspace", "model": "gpt-4.1-mini"}}
    events[1]["payload"] = {
        "workbench.pricing": {"source": "genai-prices", "model": "gpt-4.1-mini", "version": "0.0.9"}
    }
    del events[3]["cost"]
    actions.do_append_events(workspace=workspace, run_id="run_p", events=events)


PRICE_SOURCES = [
    "Workspace prices",
    "genai-prices 0.0.9",
    "Cost recorded by the caller",
    "Not priced",
    "Total",
]


def test_the_run_ledger_says_which_source_priced_the_calls(client, alice, priced_run):
    """payload["workbench.pricing"] (written wherever a call is priced) becomes a "Price source"
    table: the workspace's prices, genai-prices with its version, a cost the caller sent, none."""
    client.force_login(alice)
    table = _table(client.get("/runs/run_p/ledger/").content.decode(), "byPricing")
    assert _row_labels(table) == PRICE_SOURCES
    assert "USD 0.20<" in table and "USD 0.30<" in table


def test_the_workspace_ledger_says_which_source_priced_the_calls(client, alice, priced_run):
    client.force_login(alice)
    html = client.get("/ledger/", {"from": "2026-01-01", "to": "2026-12-31"}).content.decode()
    assert _row_labels(_table(html, "byPricing")) == PRICE_SOURCES


def test_the_run_ledger_lists_each_response_with_the_source_that_priced_it(client, alice, priced_run):
    """Per call: the workspace's prices, genai-prices with its version, a caller's cost, no price."""
    client.force_login(alice)
    html = client.get("/runs/run_p/ledger/").content.decode()
    calls = html[
        html.index('data-ledger="calls"') : html.index("</table>", html.index('data-ledger="calls"'))
    ]
    sources = re.findall(r'<td class="priced-by" data-source="([^"]*)">([^<]*)</td>', calls)
    assert sources == [
        ("workspace", "Workspace prices"),
        ("genai-prices", "genai-prices 0.0.9"),
        ("recorded", "Cost recorded by the caller"),
        ("unpriced", "Not priced"),
    ]
    # each row links to its event in the trace; costs through the one money rule
    assert "?at=" in calls and "USD 0.10<" in calls and ">unknown</td>" in calls


def test_the_ledgers_say_per_provider_and_model_which_sources_priced_its_calls(client, alice, priced_run):
    """The "Provider / model" table's "Priced by" column: the run ledger from the events, the
    workspace ledger from the rollups (which key every row by its price source), alike."""
    client.force_login(alice)
    want = "Cost recorded by the caller (1); Not priced (1); Workspace prices (1); genai-prices 0.0.9 (1)"
    for html in (
        client.get("/runs/run_p/ledger/").content.decode(),
        client.get("/ledger/", {"from": "2026-01-01", "to": "2026-12-31"}).content.decode(),
    ):
        table = _table(html, "byProviderModel")
        assert '<th scope="col">Priced by</th>' in table
        assert f'<td class="priced-by">{want}</td>' in table
        assert "Priced by" not in _table(html, "byModel")  # only the provider / model table


def test_the_run_ledger_lists_the_first_responses_and_counts_them_all(client, alice, priced_run, monkeypatch):
    from runs.pages import ledger

    monkeypatch.setattr(ledger, "CALLS_PAGE", 2)
    client.force_login(alice)
    html = client.get("/runs/run_p/ledger/").content.decode()
    assert "The first 2 of 4; the tables above count all 4." in html
    assert html.count('<td class="priced-by" data-source=') == 2


def test_the_ledger_api_says_which_source_priced_each_call(client, alice, priced_run):
    """GET /api/runs/{id}/ledger: each call with its source; GET /api/ledger: the same sums from
    the rollups; both count each provider / model's calls per source."""
    client.force_login(alice)
    run = client.get("/api/runs/run_p/ledger").json()
    assert run["callsTotal"] == 4 and run["totals"]["eventCount"] == 4
    assert [(c["seq"] > 0, c["pricing"]["source"], c["pricing"]["label"]) for c in run["calls"]] == [
        (True, "workspace", "Workspace prices"),
        (True, "genai-prices", "genai-prices 0.0.9"),
        (True, "recorded", "Cost recorded by the caller"),
        (True, "unpriced", "Not priced"),
    ]
    assert run["calls"][1]["pricing"]["note"] == {
        "source": "genai-prices",
        "model": "gpt-4.1-mini",
        "version": "0.0.9",
    }
    assert [row["label"] for row in run["byPricing"]] == PRICE_SOURCES[:-1]
    want = [{"label": label, "calls": 1} for label in sorted(PRICE_SOURCES[:-1])]
    assert run["byProviderModel"][0]["pricedBy"] == want
    assert len(client.get("/api/runs/run_p/ledger", {"limit": 1}).json()["calls"]) == 1
    workspace = client.get("/api/ledger", {"from": "2026-01-01", "to": "2026-12-31"}).json()
    assert workspace["runCount"] == 1 and workspace["from"] == "2026-01-01"
    assert (
        workspace["byPricing"] == run["byPricing"] and workspace["byProviderModel"] == run["byProviderModel"]
    )
    assert (
        client.get("/api/ledger", {"from": "2026-01-01\x00"}).status_code == 200
    )  # an unreadable day: the default
    client.logout()
    assert client.get("/api/ledger").status_code == 401
    assert client.get("/api/runs/run_p/ledger").status_code == 401
