"""The span waterfall (runs.presenters.waterfall): the time axis covers the spans themselves, not
the run's end, and children whose root span is stored after them nest under it."""

from __future__ import annotations

from runs.presenters.waterfall import build_waterfall


def _start(span, ts, parent=None, name=None):
    body = {"type": "span_started", "spanId": span, "ts": ts, "name": name or span}
    if parent:
        body["parentSpanId"] = parent
    return body


def _end(span, ts, ms, status="ok"):
    return {"type": "span_ended", "spanId": span, "ts": ts, "durationMs": ms, "status": status}


def test_the_axis_ends_with_the_last_span_not_the_run():
    # an OTLP trace of 2 s whose run ended 30 s later (the quiet period)
    started = [
        (1, _start("root", "2026-03-01T10:00:00+00:00")),
        (3, _start("child", "2026-03-01T10:00:00.500+00:00", "root")),
    ]
    ended = [
        (4, _end("child", "2026-03-01T10:00:01.500+00:00", 1000)),
        (5, _end("root", "2026-03-01T10:00:02+00:00", 2000)),
    ]
    wf = build_waterfall(started, ended, run_end_ts="2026-03-01T10:00:32+00:00")
    assert wf.total_ms == 2000
    root, child = wf.rows
    assert (root.x_pct, root.w_pct) == (0, 100) and (child.x_pct, child.w_pct) == (25, 50)


def test_an_open_span_still_runs_to_the_latest_instant_known():
    started = [(1, _start("root", "2026-03-01T10:00:00+00:00"))]
    wf = build_waterfall(started, [], run_end_ts="2026-03-01T10:00:10+00:00")
    assert wf.total_ms == 10_000 and wf.rows[0].status == "open" and wf.rows[0].w_pct == 100


def test_back_dated_spans_are_drawn_on_their_own_extent():
    started = [(1, _start("a", "2025-01-01T00:00:00+00:00"))]
    ended = [(2, _end("a", "2025-01-01T00:00:00.300+00:00", 300))]
    wf = build_waterfall(started, ended, run_end_ts="2026-01-01T00:00:00+00:00")
    assert wf.total_ms == 300 and wf.rows[0].w_pct == 100


def test_children_stored_before_their_root_nest_under_it():
    # exported as OTLP exports: the children first (they end first), the root last
    started = [
        (1, _start("b", "2026-03-01T10:00:01+00:00", "root")),
        (3, _start("a", "2026-03-01T10:00:00.100+00:00", "root")),
        (6, _start("root", "2026-03-01T10:00:00+00:00")),
    ]
    ended = [
        (2, _end("b", "2026-03-01T10:00:01.500+00:00", 500)),
        (4, _end("a", "2026-03-01T10:00:00.600+00:00", 500)),
        (7, _end("root", "2026-03-01T10:00:02+00:00", 2000)),
    ]
    wf = build_waterfall(started, ended)
    assert [(r.span_id, r.depth) for r in wf.rows] == [("root", 0), ("a", 1), ("b", 1)]
    assert wf.total_ms == 2000 and wf.rows[1].x_pct == 5


def test_a_reused_span_id_nests_under_the_instance_that_covers_it():
    started = [
        (1, _start("p", "2026-03-01T10:00:00+00:00", name="first")),
        (3, _start("p", "2026-03-01T10:00:05+00:00", name="second")),
        (4, _start("c", "2026-03-01T10:00:06+00:00", "p")),
    ]
    ended = [
        (2, _end("p", "2026-03-01T10:00:01+00:00", 1000)),
        (5, _end("c", "2026-03-01T10:00:07+00:00", 1000)),
        (6, _end("p", "2026-03-01T10:00:08+00:00", 3000)),
    ]
    wf = build_waterfall(started, ended)
    assert [(r.name, r.depth) for r in wf.rows] == [("first", 0), ("second", 0), ("c", 1)]


def test_spans_naming_each_other_as_parents_are_still_drawn():
    started = [
        (1, _start("x", "2026-03-01T10:00:00+00:00", "y")),
        (2, _start("y", "2026-03-01T10:00:01+00:00", "x")),
    ]
    wf = build_waterfall(started, [])
    assert sorted(r.span_id for r in wf.rows) == ["x", "y"]
