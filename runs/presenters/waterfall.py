"""The span tree of a run as a latency waterfall. Pure: span events in, rows to draw out.

    wf = build_waterfall(started, ended, run_end_ts=...)   # started/ended: [(seq, body)] in seq order

``started`` are ``span_started`` events (one window of them, in seq order), ``ended`` the
``span_ended`` events that may close them. A span id may be reused once its span has ended, so an
end closes the span of that id that is open at its seq. Rows come in tree order (children under
their parent, by start), each with its depth, its start offset and duration in milliseconds, its
status (``ok``, ``error`` or ``open``) and the bar's position in percent of the window's time axis.

The duration is the span's own ``durationMs`` when it gives one, else the time between the two
events' ``ts``; a span still open (or whose end lies outside the window) runs to the latest
instant known (the run's end, or the last timestamp seen) and says so. A parent outside the window
makes a span a root of this window.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

MIN_BAR_PCT = 0.4  # a zero-length span still shows a sliver
MAX_DEPTH_SHOWN = 12  # deeper spans are drawn at this indentation (their depth is still said)


@dataclass
class SpanRow:
    span_id: str
    name: str
    kind: str
    step_id: str
    parent_id: str
    start_seq: int
    end_seq: int | None = None
    start_ms: float = 0.0  # from the window's first start
    duration_ms: float | None = None
    status: str = "open"  # ok | error | open
    error: str = ""
    depth: int = 0
    x_pct: float = 0.0
    w_pct: float = MIN_BAR_PCT
    children: list[SpanRow] = field(default_factory=list)
    links: dict[str, str] = field(default_factory=dict)  # filled by the page (start and end events)
    _start: datetime | None = None
    _end: datetime | None = None

    @property
    def indent(self) -> int:
        return min(self.depth, MAX_DEPTH_SHOWN)

    @property
    def level(self) -> int:
        return self.depth + 1


@dataclass
class Waterfall:
    rows: list[SpanRow]
    total_ms: float
    errors: int
    open: int


def parse_ts(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None


def _ms(delta: timedelta) -> float:
    return delta.total_seconds() * 1000.0


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value >= 0 else None


def _error_text(body: dict[str, Any]) -> str:
    error = body.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        code = error.get("code")
        return f"[{code}] {error['message']}" if isinstance(code, str) and code else error["message"]
    return ""


def build_waterfall(
    started: list[tuple[int, dict[str, Any]]],
    ended: list[tuple[int, dict[str, Any]]],
    *,
    run_end_ts: str | None = None,
) -> Waterfall:
    events = sorted(
        [(seq, 0, body) for seq, body in started] + [(seq, 1, body) for seq, body in ended],
        key=lambda item: item[0],
    )
    open_spans: dict[str, SpanRow] = {}
    every: list[SpanRow] = []
    latest: datetime | None = parse_ts(run_end_ts)
    for seq, is_end, body in events:
        ts = parse_ts(body.get("ts"))
        if ts is not None and (latest is None or ts > latest):
            latest = ts
        span_id = body.get("spanId")
        if not isinstance(span_id, str):
            continue
        if not is_end:
            open_spans[span_id] = _new_row(seq, body, span_id, ts)
            every.append(open_spans[span_id])
            continue
        row = open_spans.pop(span_id, None)
        if row is not None:  # else the end of a span that started before this window (or never)
            _close_row(row, seq, body, ts)
    rows = _nest(every)
    flat: list[SpanRow] = []
    _flatten(rows, 0, flat)
    # the axis spans the spans themselves: the run's end (for a trace ingested from OTLP, its last
    # span plus the quiet period) only counts while a span is still open and runs to it
    t0, total = _time_axis(flat, latest if any(r.end_seq is None for r in flat) else None)
    for row in flat:
        if row._start is not None and t0 is not None:
            _place(row, row._start, t0, total, latest)
    return Waterfall(
        rows=flat,
        total_ms=total,
        errors=sum(1 for r in flat if r.status == "error"),
        open=sum(1 for r in flat if r.status == "open"),
    )


def _new_row(seq: int, body: dict[str, Any], span_id: str, ts: datetime | None) -> SpanRow:
    """A ``span_started``: a new open row (placed under its parent by :func:`_nest`)."""
    parent_id = body.get("parentSpanId")
    return SpanRow(
        span_id=span_id,
        name=str(body.get("name") or span_id),
        kind=str(body.get("kind") or ""),
        step_id=str(body.get("stepId") or ""),
        parent_id=parent_id if isinstance(parent_id, str) else "",
        start_seq=seq,
        _start=ts,
    )


def _covers(parent: SpanRow, child: SpanRow) -> bool:
    if parent._start is None or child._start is None:
        return parent.start_seq < child.start_seq
    return parent._start <= child._start and (parent._end is None or child._start <= parent._end)


def _nest(every: list[SpanRow]) -> list[SpanRow]:
    """Rows under their parents, whatever order their events arrived in (a trace's root span is
    exported, so stored, after its children): a child goes under the instance of its parent's id
    whose time covers its start (else the one started last before it by seq, else the first).
    Children and roots by start time, then seq. Returns the roots (a parent outside the window
    makes a span a root of this window)."""
    by_id: dict[str, list[SpanRow]] = {}
    for row in every:
        by_id.setdefault(row.span_id, []).append(row)
    roots: list[SpanRow] = []
    for row in every:
        candidates = [p for p in by_id.get(row.parent_id, ()) if p is not row] if row.parent_id else []
        parent = next((p for p in candidates if _covers(p, row)), None)
        if parent is None and candidates:
            before = [p for p in candidates if p.start_seq < row.start_seq]
            parent = before[-1] if before else candidates[0]
        (parent.children if parent is not None else roots).append(row)
    if any(row.parent_id and row.parent_id in by_id for row in every):
        _break_cycles(roots, every)

    def when(row: SpanRow) -> tuple[bool, datetime, int]:
        return (row._start is None, row._start or datetime.min, row.start_seq)  # noqa: DTZ901  (min only beside other unstarted rows)

    for row in every:
        row.children.sort(key=when)
    roots.sort(key=when)
    return roots


def _break_cycles(roots: list[SpanRow], every: list[SpanRow]) -> None:
    """Spans that name each other as parents (a malformed trace) are reachable from no root: the
    first of each such loop becomes a root (its own children stay under it)."""
    reached: set[int] = set()
    stack = list(roots)
    while stack:
        row = stack.pop()
        if id(row) in reached:
            continue
        reached.add(id(row))
        stack.extend(row.children)
    for row in every:
        if id(row) in reached:
            continue
        for other in every:
            if any(child is row for child in other.children):
                other.children = [child for child in other.children if child is not row]
        roots.append(row)
        stack = [row]
        while stack:
            item = stack.pop()
            if id(item) not in reached:
                reached.add(id(item))
                stack.extend(item.children)


def _close_row(row: SpanRow, seq: int, body: dict[str, Any], ts: datetime | None) -> None:
    """A ``span_ended`` closing ``row``: its status, error and duration (own, else between the events)."""
    row.end_seq = seq
    row.status = "error" if body.get("status") == "error" or body.get("error") else "ok"
    row.error = _error_text(body)
    own = _number(body.get("durationMs"))
    if own is not None:
        row.duration_ms = own
    elif row._start is not None and ts is not None:
        row.duration_ms = max(0.0, _ms(ts - row._start))
    if row._start is not None and row.duration_ms is not None:
        row._end = row._start + timedelta(milliseconds=row.duration_ms)


def _time_axis(flat: list[SpanRow], latest: datetime | None) -> tuple[datetime | None, float]:
    """The window's first start and its length in ms (to the last end or the latest instant known)."""
    starts = [r._start for r in flat if r._start is not None]
    t0 = min(starts) if starts else None
    ends = [r._end for r in flat if r._end is not None]
    if latest is not None:
        ends.append(latest)
    t1 = max(ends) if ends else t0
    total = _ms(t1 - t0) if t0 is not None and t1 is not None and t1 > t0 else 0.0
    return t0, total


def _place(row: SpanRow, start: datetime, t0: datetime, total: float, latest: datetime | None) -> None:
    """A started row's (``start``: its ``_start``) offset and bar on the time axis; a row still open runs to ``latest``."""
    row.start_ms = _ms(start - t0)
    end = row._end
    if row.end_seq is None and latest is not None and latest >= start:
        end = latest  # still open: runs to the latest instant known
        row.duration_ms = _ms(latest - start)
    if total > 0:
        row.x_pct = round(min(100.0, 100.0 * row.start_ms / total), 3)
        length = _ms(end - start) if end is not None else 0.0
        row.w_pct = round(max(MIN_BAR_PCT, min(100.0 - row.x_pct, 100.0 * length / total)), 3)


def _flatten(rows: list[SpanRow], depth: int, out: list[SpanRow]) -> None:
    # iterative: a deep chain of nested spans must not hit the recursion limit
    stack = [(row, depth) for row in reversed(rows)]
    while stack:
        row, d = stack.pop()
        row.depth = d
        out.append(row)
        stack.extend((child, d + 1) for child in reversed(row.children))
