"""The workspace ledger of many users (issue 52): its "By user" table in pages of TABLE_ROWS rows,
a row summing the rows on the other pages (the table still adds up to the totals), links to the
neighbouring pages that keep the date range, and a page number out of range clamped."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest

from runs import actions
from runs.presenters.ledger_pages import TABLE_ROWS, page_of, sum_totals
from tests.pages.test_ledger_pages import WORKFLOW, _response, _row_labels, _table

pytestmark = pytest.mark.django_db

USERS = 2 * TABLE_ROWS + 10
RANGE = "from=2000-01-01&to=2099-12-31"  # the runs start now


@pytest.fixture
def many_users(workspace):
    for i in range(USERS):
        run_id = f"run_u{i:03d}"
        actions.do_start_run(
            workspace=workspace, workflow=WORKFLOW, actor="t", run_id=run_id, subject={"userId": f"u-{i:03d}"}
        )
        actions.do_append_events(
            workspace=workspace,
            run_id=run_id,
            events=[_response(run_id, 1, "2026-03-01T10:00:00.000Z", step="alpha", tokens=100, cost=0.01)],
        )


def _cost_cells(table: str) -> list[str]:
    return re.findall(r'<span title="USD ([0-9.]+)">', table)


def test_a_long_ledger_table_is_paged_and_still_adds_up(client, alice, many_users):
    client.force_login(alice)
    html = client.get(f"/ledger/?{RANGE}").content.decode()
    users = _table(html, "byUser")
    labels = _row_labels(users)
    assert labels[:TABLE_ROWS] == [f"u-{i:03d}" for i in range(TABLE_ROWS)]
    assert labels[TABLE_ROWS:] == [f"{USERS - TABLE_ROWS} rows on other pages", "Total"]
    # the rows shown and the others' row add up to the total (exactly: 60 x 0.01)
    costs = [Decimal(c) for c in _cost_cells(users)]
    assert sum(costs[:-1]) == costs[-1] == Decimal("0.6")
    assert f"Rows 1–{TABLE_ROWS} of {USERS} (page 1 of 3)" in html
    assert "data-page-prev" not in html.split('data-rollup="byUser"', 1)[1].split("</nav>", 1)[0]
    nxt = re.search(r'<a href="([^"]+)" rel="next" data-page-next="byUser"', html)
    assert nxt and "from=2000-01-01" in nxt.group(1) and "page_byUser=2" in nxt.group(1)
    second = client.get("/ledger/" + nxt.group(1).replace("&amp;", "&").split("#")[0]).content.decode()
    assert _row_labels(_table(second, "byUser"))[0] == f"u-{TABLE_ROWS:03d}"
    assert 'data-page-prev="byUser"' in second
    # the other tables keep their first page; a page beyond the last is the last
    last = client.get(f"/ledger/?{RANGE}&page_byUser=99").content.decode()
    rows = _row_labels(_table(last, "byUser"))
    assert rows[: USERS - 2 * TABLE_ROWS] == [f"u-{i:03d}" for i in range(2 * TABLE_ROWS, USERS)]
    assert 'data-page-next="byUser"' not in last
    assert client.get(f"/ledger/?{RANGE}&page_byUser=nope").status_code == 200


def test_sums_are_exact_and_keep_each_currency():
    rows = [
        {"eventCount": 1, "totalTokens": 10, "durationMs": 100.4, "costByCurrency": {"USD": 0.1}},
        {"eventCount": 2, "totalTokens": 5, "durationMs": 0.2, "costByCurrency": {"USD": 0.2, "EUR": 1}},
    ]
    total = sum_totals(rows)
    assert total["eventCount"] == 3 and total["totalTokens"] == 15
    assert total["durationMs"] == Decimal("100.6")
    assert total["costByCurrency"] == {"USD": Decimal("0.3"), "EUR": 1}


def test_a_short_table_is_one_page_with_no_others_row():
    rows = [{"label": "a", "totals": {"eventCount": 1}}]
    paged = page_of(rows, 3)
    assert paged["rows"] == rows and paged["others"] is None and paged["pages"] == 1
    assert paged["previous"] is None and paged["next"] is None
