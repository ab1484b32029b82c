"""The span tree / latency waterfall: the pure builder, the selector's window, the run page section."""

from __future__ import annotations

import re

import pytest

from runs.presenters.waterfall import build_waterfall
from tests.pages.conftest import XSS, login


def _start(seq, sid, name, ms, parent=None, **extra):
    body = {"type": "span_started", "spanId": sid, "name": name, "ts": f"2026-01-01T00:00:00.{ms:03d}Z"}
    if parent:
        body["parentSpanId"] = parent
    return (seq, {**body, **extra})


def _end(seq, sid, ms, **extra):
    return (seq, {"type": "span_ended", "spanId": sid, "ts": f"2026-01-01T00:00:00.{ms:03d}Z", **extra})


def test_rows_in_tree_order_with_depth_durations_and_errors():
    started = [
        _start(1, "root", "pipeline", 0),
        _start(2, "a", "fetch", 10, parent="root"),
        _start(4, "b", "llm call", 50, parent="root", kind="client"),
        _start(5, "c", "parse answer", 60, parent="b"),
    ]
    ended = [
        _end(3, "a", 40),
        _end(6, "c", 70, status="error", error={"message": "bad json", "code": "E1"}),
        _end(7, "b", 90, durationMs=35),
        _end(8, "root", 100),
    ]
    wf = build_waterfall(started, ended)
    assert [(r.name, r.depth) for r in wf.rows] == [
        ("pipeline", 0),
        ("fetch", 1),
        ("llm call", 1),
        ("parse answer", 2),
    ]
    by = {r.span_id: r for r in wf.rows}
    assert by["a"].duration_ms == pytest.approx(30)  # from the two timestamps
    assert by["b"].duration_ms == 35  # its own durationMs wins
    assert by["c"].status == "error" and by["c"].error == "[E1] bad json"
    assert wf.errors == 1 and wf.open == 0
    assert wf.total_ms == pytest.approx(100)
    assert by["root"].x_pct == 0 and by["root"].w_pct == pytest.approx(100)
    assert by["b"].x_pct == pytest.approx(50) and by["b"].w_pct == pytest.approx(35)
    assert by["b"].end_seq == 7 and by["b"].start_seq == 4


def test_open_spans_run_to_the_latest_instant_and_ids_may_be_reused():
    started = [_start(1, "x", "first", 0), _start(3, "x", "second", 20), _start(5, "y", "never ends", 30)]
    ended = [_end(2, "x", 10), _end(4, "x", 50)]
    wf = build_waterfall(started, ended, run_end_ts="2026-01-01T00:00:00.080Z")
    first, second, never = wf.rows
    assert (first.end_seq, first.duration_ms) == (2, pytest.approx(10))
    assert (second.end_seq, second.duration_ms) == (4, pytest.approx(30))
    assert never.status == "open" and never.duration_ms == pytest.approx(50) and wf.open == 1


def test_deep_nesting_and_odd_input_do_not_break_it():
    started = [_start(i + 1, f"s{i}", f"n{i}", 0, parent=f"s{i - 1}" if i else None) for i in range(3000)]
    started.append((9000, {"type": "span_started", "name": "no id"}))
    started.append((9001, {"type": "span_started", "spanId": "t", "ts": "not a time"}))
    wf = build_waterfall(started, [_end(9002, "nobody", 5)])
    assert wf.rows[-2].depth == 2999 and wf.rows[-2].indent == 12
    assert wf.rows[-1].name == "t" and wf.rows[-1].duration_ms is None


# --- storage and pages -------------------------------------------------------------------------


def _spans(run, workspace, n, *, nested=True, error_every=0):
    from runs import actions
    from runs.engine import commands as c

    cmds = [c.StartSpan(name="root", span_id="root")]
    for i in range(n):
        cmds.append(
            c.StartSpan(name=f"child {i}", span_id=f"s{i}", parent_span_id="root" if nested else None)
        )
        cmds.append(c.LogToolCall(name=f"tool {i}"))
        err = {"message": f"boom {i}"} if error_every and i % error_every == 0 else None
        cmds.append(c.EndSpan(span_id=f"s{i}", status="error" if err else "ok", error=err))
    cmds.append(c.EndSpan(span_id="root", status="ok"))
    actions.do_commands(workspace=workspace, run_id=run.run_id, commands=cmds, actor="pipeline")
    run.refresh_from_db()
    return run


@pytest.mark.django_db
def test_run_page_shows_the_span_tree_with_links_to_events(client, alice, run, workspace):
    from runs.engine import commands as c

    _spans(run, workspace, 3, error_every=2)
    from runs import actions

    actions.do_command(
        workspace=workspace, run_id=run.run_id, command=c.StartSpan(name=XSS, span_id="evil"), actor="p"
    )
    html = login(client, alice).get(f"/runs/{run.run_id}/?view=waterfall").content.decode()
    section = html[html.index('id="spans"') : html.index('id="timeline"')]
    names = re.findall(
        r'<th scope="row" class="span-name d-(\d+)">.*?<a href="([^"]+)"[^>]*>([^<]+)</a>', section
    )
    assert [(d, n) for d, _, n in names] == [
        ("0", "root"),
        ("1", "child 0"),
        ("1", "child 1"),
        ("1", "child 2"),
        ("0", "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;"),
    ]
    root_seq = int(re.search(r"\?at=(\d+)#seq-\1", names[0][1]).group(1))
    assert '"type":"span_started"' in run.events.get(seq=root_seq).body
    assert section.count("✕ error") == 2 and "boom 0" in section and "boom 2" in section
    assert "level 2: " in section  # the depth said in words, not only by indentation
    assert "not ended" in section  # the evil span is still open
    assert "<script>" not in section


@pytest.mark.django_db
def test_no_section_without_spans(client, alice, run):
    html = login(client, alice).get(f"/runs/{run.run_id}/").content.decode()
    assert 'id="spans"' not in html and 'id="trace"' not in html


@pytest.mark.django_db
def test_spans_are_paged_and_far_ends_are_found(client, alice, run, workspace, monkeypatch):
    from runs.selectors import runs as selectors

    monkeypatch.setattr(selectors, "SPAN_PAGE", 5)
    monkeypatch.setattr(selectors, "SPAN_END_SCAN", 3)  # the root's end lies beyond the scan
    _spans(run, workspace, 8, nested=False)
    login(client, alice)
    html = client.get(f"/runs/{run.run_id}/?view=waterfall").content.decode()
    assert html.count('class="span-row') == 5
    root = re.search(r'<tr class="span-row span-(\w+)" data-span="root"', html)
    assert root and root.group(1) == "ok"  # its end was looked up by id
    later = re.search(r'hx-get="([^"]+/spans/\?after=(\d+))"', html)
    assert later
    frag = client.get(later.group(1), headers={"HX-Request": "true"}).content.decode()
    assert frag.lstrip().startswith('<section class="panel" id="spans"')
    assert (
        frag.count('class="span-row') == 4
        and "child 7" in frag
        and "child 4" in frag
        and "child 3" not in frag
    )
    assert "First spans" in frag and "Later spans" not in frag
    # without htmx: the run page at that window
    response = client.get(f"/runs/{run.run_id}/spans/?after={later.group(2)}")
    assert response.status_code == 302 and f"spans_after={later.group(2)}" in response["Location"]
    page = client.get(response["Location"]).content.decode()
    assert page.count('class="span-row') == 4


@pytest.mark.django_db
def test_far_end_lookup_is_bounded_and_says_so(client, alice, run, workspace, monkeypatch):
    from runs.selectors import runs as selectors

    monkeypatch.setattr(selectors, "SPAN_END_SCAN", 2)
    monkeypatch.setattr(selectors, "SPAN_END_WINDOW", 6)  # the root's end is further away
    _spans(run, workspace, 8, nested=False)
    html = login(client, alice).get(f"/runs/{run.run_id}/?view=waterfall").content.decode()
    root = re.search(r'<tr class="span-row span-(\w+)" data-span="root".*?</tr>', html, re.S)
    assert root.group(1) == "open"
    window = selectors.span_window(run)
    assert f"not ended by #{window.ends_to}" in root.group(0) and window.ends_to < run.last_seq


@pytest.mark.django_db
def test_spans_fragment_answers_404_to_outsiders(client, charlie, run):
    assert login(client, charlie).get(f"/runs/{run.run_id}/spans/").status_code == 404


@pytest.mark.django_db
def test_a_big_run_reads_one_window(client, alice, run, workspace, django_assert_max_num_queries):
    _spans(run, workspace, 400)
    login(client, alice)
    with django_assert_max_num_queries(30):
        html = client.get(f"/runs/{run.run_id}/?view=waterfall").content.decode()
    from runs.selectors.runs import SPAN_PAGE

    assert html.count('class="span-row') == SPAN_PAGE
