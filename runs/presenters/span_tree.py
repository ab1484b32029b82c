"""One level of a run's span tree, for the trace view. Pure: span events in, nodes to draw out.

    level = build_level(starts, ends, axis=Axis.of(start_ts, end_ts), parents_with_children=...)

``starts`` are the ``span_started`` events of one level (the children of one span instance, or the
roots), ``ends`` the ``span_ended`` events that may close them (an end closes the span of its id
that started before it: the first end after the start). Each node says its status (``ok``,
``error`` or ``open``), its duration (the end's own ``durationMs``, else the time between the two
events), whether it has child spans, and its bar in percent of the ``axis``: the level's parent
span (a zoomed axis) or, for the roots, the run. Nodes come failed first, then slowest first, then
in start order: what a reader looks for first is on top.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from runs.presenters.waterfall import parse_ts

MIN_BAR_PCT = 0.6


@dataclass(frozen=True)
class Axis:
    """The time axis bars are drawn on: from ``start``, ``total_ms`` long (0: no axis known)."""

    start: datetime | None
    total_ms: float

    @classmethod
    def of(cls, start: Any, end: Any, *, duration_ms: float | None = None) -> Axis:
        t0, t1 = parse_ts(start), parse_ts(end)
        if t0 is not None and duration_ms is not None:
            return cls(t0, max(0.0, duration_ms))
        if t0 is None or t1 is None or t1 <= t0:
            return cls(t0, 0.0)
        return cls(t0, (t1 - t0).total_seconds() * 1000.0)


@dataclass
class SpanNode:
    span_id: str
    name: str
    kind: str
    step_id: str
    parent_id: str
    start_seq: int
    start_ts: str
    end_seq: int | None = None
    status: str = "open"  # ok | error | open
    error: str = ""
    duration_ms: float | None = None
    has_children: bool = False
    offset_ms: float | None = None  # from the axis' start
    x_pct: float = 0.0
    w_pct: float = MIN_BAR_PCT
    attributes: dict[str, Any] = field(default_factory=dict)
    # the trace view opened to a selected span: the path's nodes carry their loaded children
    # (a level context) and the selected one says so
    children_level: dict[str, Any] | None = None
    selected: bool = False


@dataclass
class Level:
    nodes: list[SpanNode]
    failed: int
    open: int


def error_text(body: dict[str, Any]) -> str:
    error = body.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        code = error.get("code")
        return f"[{code}] {error['message']}" if isinstance(code, str) and code else error["message"]
    if isinstance(error, str):
        return error
    return ""


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value >= 0 else None


def node_of(seq: int, body: dict[str, Any]) -> SpanNode:
    """A node of a ``span_started`` event (still open until an end is applied)."""
    attributes = body.get("attributes")
    parent = body.get("parentSpanId")
    return SpanNode(
        span_id=str(body.get("spanId") or ""),
        name=str(body.get("name") or body.get("spanId") or "span"),
        kind=str(body.get("kind") or ""),
        step_id=str(body.get("stepId") or ""),
        parent_id=parent if isinstance(parent, str) else "",
        start_seq=seq,
        start_ts=str(body.get("ts") or ""),
        attributes=attributes if isinstance(attributes, dict) else {},
    )


def close(node: SpanNode, seq: int, body: dict[str, Any]) -> None:
    """Apply the ``span_ended`` event that closes ``node``."""
    node.end_seq = seq
    node.status = "error" if body.get("status") == "error" or body.get("error") else "ok"
    node.error = error_text(body)
    own = _number(body.get("durationMs"))
    if own is not None:
        node.duration_ms = own
        return
    t0, t1 = parse_ts(node.start_ts), parse_ts(body.get("ts"))
    if t0 is not None and t1 is not None:
        node.duration_ms = max(0.0, (t1 - t0).total_seconds() * 1000.0)


def place(node: SpanNode, axis: Axis) -> None:
    """The node's offset from the axis' start and its bar, in percent of the axis."""
    start = parse_ts(node.start_ts)
    if start is None or axis.start is None:
        return
    node.offset_ms = (start - axis.start).total_seconds() * 1000.0
    if axis.total_ms <= 0:
        return
    x = max(0.0, min(100.0, 100.0 * node.offset_ms / axis.total_ms))
    length = node.duration_ms or 0.0
    node.x_pct = round(min(x, 100.0 - MIN_BAR_PCT), 2)
    node.w_pct = round(max(MIN_BAR_PCT, min(100.0 - node.x_pct, 100.0 * length / axis.total_ms)), 2)


def first_end_after(seq: int, ends: list[tuple[int, dict[str, Any]]]) -> tuple[int, dict[str, Any]] | None:
    """The end (of this span's id, ``ends`` in seq order) that closes a span started at ``seq``."""
    for end_seq, body in ends:
        if end_seq > seq:
            return end_seq, body
    return None


def build_level(
    starts: list[tuple[int, dict[str, Any]]],
    ends_by_id: dict[str, list[tuple[int, dict[str, Any]]]],
    *,
    axis: Axis,
    parents_with_children: set[str] | None = None,
) -> Level:
    """The nodes of one level: failed first, then the slowest, then by start."""
    nodes: list[SpanNode] = []
    for seq, body in starts:
        node = node_of(seq, body)
        end = first_end_after(seq, ends_by_id.get(node.span_id, []))
        if end is not None:
            close(node, *end)
        node.has_children = node.span_id in (parents_with_children or set())
        place(node, axis)
        nodes.append(node)
    nodes.sort(key=lambda n: (n.status != "error", -(n.duration_ms or 0.0), n.start_seq))
    return Level(
        nodes=nodes,
        failed=sum(1 for n in nodes if n.status == "error"),
        open=sum(1 for n in nodes if n.status == "open"),
    )


def end_of(start_ts: str, duration_ms: float | None) -> str:
    """The instant a span ended (ISO), from its start and duration ("" when unknown)."""
    t0 = parse_ts(start_ts)
    if t0 is None or duration_ms is None:
        return ""
    return (t0 + timedelta(milliseconds=duration_ms)).isoformat()
