"""The trace view: a span tree read one level at a time (span_ref index), its detail pane, the
failed spans and a text search; URLs that restore the view; outsiders get 404."""

from __future__ import annotations

import re

import pytest

from runs.presenters.span_tree import Axis, build_level
from tests.pages.conftest import XSS, login
from tests.pages.test_waterfall import _end, _spans, _start

pytestmark = pytest.mark.django_db


def test_a_level_puts_failed_then_slowest_first_and_draws_bars_on_the_parent_axis():
    starts = [
        _start(1, "a", "a", 0, parent="p"),
        _start(2, "b", "b", 100, parent="p"),
        _start(3, "c", "c", 200),
    ]
    ends = {
        "a": [_end(4, "a", 300)],
        "b": [_end(5, "b", 150, status="error", error={"message": "no"})],
        "c": [_end(0, "c", 0), _end(6, "c", 900)],  # an end before the start closes another instance
    }
    axis = Axis.of("2026-01-01T00:00:00.000Z", "2026-01-01T00:00:01.000Z")
    level = build_level(starts, ends, axis=axis, parents_with_children={"a"})
    assert [n.span_id for n in level.nodes] == ["b", "c", "a"]
    b, c, a = level.nodes
    assert b.status == "error" and b.error == "no" and level.failed == 1
    assert c.end_seq == 6 and c.duration_ms == pytest.approx(700)
    assert a.has_children and not b.has_children
    assert (b.x_pct, b.w_pct) == (10.0, 5.0)


def _page(client, url, hx=True):
    return client.get(url, HTTP_HX_REQUEST="true") if hx else client.get(url)


def test_run_page_opens_the_roots_and_children_load_by_level(client, alice, run, workspace):
    _spans(run, workspace, 3, error_every=2)
    login(client, alice)
    html = client.get(f"/runs/{run.run_id}/").content.decode()
    section = html[html.index('id="trace"') : html.index('id="timeline"')]
    assert 'role="tree"' in section and "2 failed spans" in section
    roots = re.findall(r'role="treeitem" id="span-(\d+)"[^>]*aria-level="1" aria-expanded="false"', section)
    assert len(roots) == 1 and "child 0" not in section  # children collapsed, not even loaded
    kids = _page(client, f"/runs/{run.run_id}/spans/tree/?span={roots[0]}&depth=2").content.decode()
    names = re.findall(r'<span class="sn-name">([^<]+)</span>', kids)
    # failed first (between the two failed ones, the slower: their durations are the clock's)
    assert sorted(names[:2]) == ["child 0", "child 2"] and names[2] == "child 1"
    assert kids.count('aria-level="2"') == 3 and "<html" not in kids
    # the detail pane: a failed child, its error, its events
    seq = re.search(r'id="span-(\d+)"', kids).group(1)
    pane = _page(client, f"/runs/{run.run_id}/spans/{seq}/").content.decode()
    assert (
        f"boom {names[0].split()[1]}" in pane
        and f"?at={seq}#seq-{seq}" in pane
        and f"?span={seq}#trace" in pane
    )


def test_failed_spans_search_and_url_state(client, alice, run, workspace):
    from runs import actions
    from runs.engine import commands as c

    _spans(run, workspace, 4, error_every=2)
    actions.do_command(
        workspace=workspace, run_id=run.run_id, command=c.StartSpan(name=XSS, span_id="evil"), actor="p"
    )
    login(client, alice)
    failed = _page(client, f"/runs/{run.run_id}/spans/tree/?view=failed").content.decode()
    assert re.findall(r'<span class="sn-name">([^<]+)</span>', failed) == ["child 0", "child 2"]
    found = _page(client, f"/runs/{run.run_id}/spans/tree/?q=script").content.decode()
    assert "&lt;script&gt;" in found and "<script>" not in found

    # the view is in the URL: errors only, a search, a selected span
    def trace(url):
        html = client.get(url).content.decode()
        return html[html.index('id="trace"') : html.index('id="timeline"')]

    page = trace(f"/runs/{run.run_id}/?trace=failed")
    assert 'id="trace-all"' in page and "child 0" in page and "child 1" not in page
    page = trace(f"/runs/{run.run_id}/?trace_q=child+3")
    assert 'value="child 3"' in page and "child 3" in page and "child 2" not in page
    seq = re.search(r'id="jump-first-error" href="[^"]*\?span=(\d+)#trace"', page).group(1)
    selected = trace(f"/runs/{run.run_id}/?span={seq}")
    assert "boom 0" in selected[selected.index('id="span-detail"') :]
    # without htmx, the fragments fall back to the run page with that view
    assert _page(client, f"/runs/{run.run_id}/spans/{seq}/", hx=False)["Location"].endswith(
        f"?span={seq}#trace"
    )
    assert _page(client, f"/runs/{run.run_id}/spans/tree/?view=failed", hx=False)["Location"].endswith(
        "?trace=failed#trace"
    )


def test_missing_spans_and_outsiders_get_404(client, alice, charlie, run, workspace):
    _spans(run, workspace, 2)
    login(client, alice)
    assert _page(client, f"/runs/{run.run_id}/spans/{run.last_seq + 9}/").status_code == 404
    assert _page(client, f"/runs/{run.run_id}/spans/tree/?span={run.last_seq + 9}").status_code == 404
    login(client, charlie)
    for url in (f"/runs/{run.run_id}/spans/tree/", f"/runs/{run.run_id}/spans/2/"):
        assert _page(client, url).status_code == 404


def test_a_level_is_paged_and_reads_a_bounded_number_of_rows(
    client, alice, run, workspace, monkeypatch, django_assert_max_num_queries
):
    from runs.selectors import spans

    monkeypatch.setattr(spans, "LEVEL_PAGE", 5)
    _spans(run, workspace, 12)
    login(client, alice)
    root = re.search(r'id="span-(\d+)"', client.get(f"/runs/{run.run_id}/").content.decode()).group(1)
    with django_assert_max_num_queries(5 * 3 + 8):
        kids = _page(client, f"/runs/{run.run_id}/spans/tree/?span={root}&depth=2").content.decode()
    assert kids.count('class="sn sn-') == 5
    more = re.search(r'data-more="([^"]+)"', kids).group(1).replace("&amp;", "&")
    rest = _page(client, more).content.decode()
    assert rest.count('class="sn sn-') == 5 and not set(re.findall(r'id="span-(\d+)"', kids)) & set(
        re.findall(r'id="span-(\d+)"', rest)
    )


def test_the_failed_spans_are_counted_up_to_a_cap(client, alice, run, workspace, monkeypatch):
    """A run with more failed spans than FAILED_COUNT_CAP says "<cap>+": the count reads at most
    cap + 1 index entries, not every failed span of a ten-million-event run."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from runs.selectors import spans

    _spans(run, workspace, 6, error_every=2)
    login(client, alice)
    monkeypatch.setattr("runs.web.trace.FAILED_COUNT_CAP", 2)
    monkeypatch.setattr(spans.failed_count, "__kwdefaults__", {"cap": 2})
    with CaptureQueriesContext(connection) as queries:
        html = client.get(f"/runs/{run.run_id}/").content.decode()
    assert '<strong id="trace-failed">2+ failed spans</strong>' in html
    counts = [q["sql"] for q in queries if "COUNT(" in q["sql"] and "error:" in q["sql"]]
    assert counts and all("LIMIT 3" in sql for sql in counts)
    monkeypatch.setattr("runs.web.trace.FAILED_COUNT_CAP", 10)
    monkeypatch.setattr(spans.failed_count, "__kwdefaults__", {"cap": 10})
    assert "3 failed spans" in client.get(f"/runs/{run.run_id}/").content.decode()
