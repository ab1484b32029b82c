"""The run ledger of a 10,000-response run: its responses in keyset pages (``?after=<seq>``), the
first page first and a next link that works, each page read from the (run, type, seq) index."""

from __future__ import annotations

import re
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs import actions
from runs.models import Run
from runs.selectors.ledger import CALLS_PAGE, calls_after
from tests.pages.test_ledger_pages import WORKFLOW, _response

pytestmark = pytest.mark.django_db

RESPONSES = 10_000


@pytest.fixture
def big_run(workspace):
    actions.do_start_run(workspace=workspace, workflow=WORKFLOW, actor="t", run_id="run_big")
    for start in range(0, RESPONSES, 2000):
        events = [
            _response("run_big", n, "2026-03-01T10:00:00.000Z", step="alpha", tokens=100, cost=0.001)
            for n in range(start + 1, start + 2001)
        ]
        actions.do_append_events(workspace=workspace, run_id="run_big", events=events)
    return Run.objects.get(run_id="run_big")


def _seqs(html: str) -> list[int]:
    table = html.split('data-ledger="calls"', 1)[1].split("</table>", 1)[0]
    return [int(s) for s in re.findall(r'<th scope="row"><a href="[^"]*">#(\d+)</a>', table)]


def test_the_run_ledger_pages_its_responses(client, alice, big_run):
    client.force_login(alice)
    started = time.perf_counter()
    html = client.get("/runs/run_big/ledger/").content.decode()
    first = _seqs(html)
    assert len(first) == CALLS_PAGE and first == sorted(first) and first[0] == 1
    assert f"The first {CALLS_PAGE} of 10,000" in html
    assert "10,000" in html  # the tables above count them all
    nxt = re.search(r'<a href="(/runs/run_big/ledger/\?after=(\d+))#calls" id="calls-next"', html)
    assert nxt and int(nxt.group(2)) == first[-1]
    # the next link (plain) and its htmx fragment
    second_html = client.get(nxt.group(1)).content.decode()
    second = _seqs(second_html)
    assert second[0] == first[-1] + 1 and len(second) == CALLS_PAGE
    assert 'id="calls-first"' in second_html
    fragment = client.get(nxt.group(1) + "&part=calls", headers={"HX-Request": "true"}).content.decode()
    assert fragment.lstrip().startswith('<section class="panel" id="calls"') and _seqs(fragment) == second
    # the last page has no next link
    last = client.get(f"/runs/run_big/ledger/?after={RESPONSES - 5}").content.decode()
    assert _seqs(last) == list(range(RESPONSES - 4, RESPONSES + 1)) and 'id="calls-next"' not in last
    assert time.perf_counter() - started < 60  # (a sanity bound, not a speed target)


def test_a_later_page_reads_a_range_from_its_cursor_not_the_rows_before_it(big_run):
    with CaptureQueriesContext(connection) as ctx:
        calls, cursor = calls_after(big_run, after=9000, limit=CALLS_PAGE)
    assert [c["seq"] for c in calls] == list(range(9001, 9001 + CALLS_PAGE)) and cursor == 9000 + CALLS_PAGE
    (sql,) = [q["sql"] for q in ctx.captured_queries]
    assert '"seq" > 9000' in sql and "LIMIT" in sql and "OFFSET" not in sql
    assert calls_after(big_run, after=0, limit=0) == ([], 0)


def test_a_bad_cursor_is_the_first_page(client, alice, big_run):
    client.force_login(alice)
    for bad in ("nonsense", "-5", "99999999999999999999"):
        response = client.get("/runs/run_big/ledger/", {"after": bad})
        assert response.status_code == 200 and _seqs(response.content.decode())[0] == 1
