"""Workflow DAG layout for the server-rendered SVG graph. Pure: plain data in, coordinates out.

    layout = layout_workflow(workflow_snapshot, step_status={...}, gate_state={...}, pending={...})
    # layout.width, layout.height, layout.nodes (x, y, label, status, gate...), layout.edges (path "d")

Steps are placed in columns by longest path from a source (a layered drawing, left to right);
inside a column they keep workflow order. Edges are cubic curves from the right side of the
source box to the left side of the target box. The template draws it; text is escaped there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

NODE_W = 168
NODE_H = 54
COL_GAP = 56
ROW_GAP = 22
MARGIN = 12
MAX_LABEL = 22


@dataclass
class NodeBox:
    id: str
    label: str
    title: str
    x: int
    y: int
    status: str
    policy: str
    gate: str  # "" | "pending" (a gate waits for a decision now) | "rejected"
    gate_text: str
    attempts: int = 0  # how many times the step started (shown from the second attempt on)
    w: int = NODE_W
    h: int = NODE_H

    @property
    def cx(self) -> int:
        return self.x + self.w // 2

    @property
    def text_y(self) -> int:
        return self.y + 22

    @property
    def sub_y(self) -> int:
        return self.y + 40


@dataclass
class EdgePath:
    id: str
    source: str
    target: str
    d: str


@dataclass
class GraphLayout:
    width: int
    height: int
    nodes: list[NodeBox] = field(default_factory=list)
    edges: list[EdgePath] = field(default_factory=list)


def _short(text: str, limit: int = MAX_LABEL) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def layers(step_ids: list[str], edges: list[tuple[str, str]]) -> dict[str, int]:
    """Column of each step: the longest path from any source (Kahn's order; cycles fall back to 0)."""
    preds: dict[str, list[str]] = {s: [] for s in step_ids}
    succs: dict[str, list[str]] = {s: [] for s in step_ids}
    for a, b in edges:
        if a in preds and b in preds and a != b:
            succs[a].append(b)
            preds[b].append(a)
    indegree = {s: len(preds[s]) for s in step_ids}
    layer = dict.fromkeys(step_ids, 0)
    queue = [s for s in step_ids if indegree[s] == 0]
    seen = 0
    while queue:
        current = queue.pop(0)
        seen += 1
        for nxt in succs[current]:
            layer[nxt] = max(layer[nxt], layer[current] + 1)
            indegree[nxt] -= 1
            if indegree[nxt] == 0:
                queue.append(nxt)
    return layer


def _gate_info(
    step_id: str, gate_state: dict[str, Any], pending: set[str], rejected: set[str]
) -> tuple[str, str]:
    if step_id in pending:
        return "pending", "gate waiting"
    if step_id in rejected:
        return "rejected", "gate rejected"
    gs = gate_state.get(step_id) or {}
    parts = []
    if gs.get("before") == "approved" and gs.get("after") == "approved":
        return "", ""
    if gs.get("before") == "pending":
        parts.append("before: pending")
    if gs.get("after") == "pending":
        parts.append("after: pending")
    return "", ", ".join(parts)


def layout_workflow(
    workflow: dict[str, Any],
    *,
    step_status: dict[str, str] | None = None,
    gate_state: dict[str, Any] | None = None,
    pending_steps: set[str] | None = None,
    rejected_steps: set[str] | None = None,
    attempts: dict[str, int] | None = None,
) -> GraphLayout:
    steps = [s for s in workflow.get("steps", []) if isinstance(s, dict) and isinstance(s.get("id"), str)]
    step_ids = [s["id"] for s in steps]
    raw_edges = [
        (e.get("from"), e.get("to"), str(e.get("id", i)))
        for i, e in enumerate(workflow.get("edges", []) or [])
        if isinstance(e, dict)
    ]
    edges = [
        (a, b, eid)
        for a, b, eid in raw_edges
        if isinstance(a, str) and isinstance(b, str) and a in step_ids and b in step_ids and a != b
    ]
    layer = layers(step_ids, [(a, b) for a, b, _ in edges])
    columns: dict[int, list[str]] = {}
    for sid in step_ids:
        columns.setdefault(layer[sid], []).append(sid)
    step_status = step_status or {}
    gate_state = gate_state or {}
    pending_steps = pending_steps or set()
    rejected_steps = rejected_steps or set()
    by_id = {s["id"]: s for s in steps}
    boxes: dict[str, NodeBox] = {}
    max_rows = max((len(c) for c in columns.values()), default=0)
    for col, members in sorted(columns.items()):
        # centre shorter columns vertically against the tallest one
        offset = (max_rows - len(members)) * (NODE_H + ROW_GAP) // 2
        for row, sid in enumerate(members):
            step = by_id[sid]
            title = str(step.get("title") or sid)
            gate, gate_text = _gate_info(sid, gate_state, pending_steps, rejected_steps)
            boxes[sid] = NodeBox(
                id=sid,
                label=_short(title),
                title=title if title == sid else f"{title} ({sid})",
                x=MARGIN + col * (NODE_W + COL_GAP),
                y=MARGIN + offset + row * (NODE_H + ROW_GAP),
                status=step_status.get(sid, "pending"),
                policy=str(step.get("gatePolicy") or "AUTO"),
                gate=gate,
                gate_text=gate_text,
                attempts=(attempts or {}).get(sid, 0),
            )
    paths = []
    for a, b, eid in edges:
        s, t = boxes[a], boxes[b]
        x1, y1 = s.x + s.w, s.y + s.h // 2
        x2, y2 = t.x - 6, t.y + t.h // 2
        mid = (x1 + x2) // 2
        paths.append(EdgePath(id=eid, source=a, target=b, d=f"M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}"))
    ncols = len(columns)
    width = MARGIN * 2 + max(ncols, 1) * NODE_W + max(ncols - 1, 0) * COL_GAP
    height = MARGIN * 2 + max(max_rows, 1) * NODE_H + max(max_rows - 1, 0) * ROW_GAP
    return GraphLayout(width=width, height=height, nodes=[boxes[s] for s in step_ids], edges=paths)


# --- bar chart (ledger) -------------------------------------------------------------------------

CHART_ROW_H = 22
CHART_LABEL_W = 130
CHART_BAR_W = 150
CHART_GAP = 16


@dataclass
class ChartBar:
    label: str
    y: int
    cost: float
    currency: str
    tokens: int
    cost_w: int
    tokens_w: int
    cost_x: int
    tokens_x: int


@dataclass
class BarChart:
    width: int
    height: int
    bars: list[ChartBar]
    cost_header_x: int
    tokens_header_x: int


def bar_chart(rows: list[dict[str, Any]]) -> BarChart:
    """Two aligned horizontal bar columns per row (cost, tokens), scaled to their own maxima."""
    max_cost = max((float(r.get("cost") or 0) for r in rows), default=0.0)
    max_tokens = max((int(r.get("tokens") or 0) for r in rows), default=0)
    cost_x = CHART_LABEL_W
    tokens_x = CHART_LABEL_W + CHART_BAR_W + CHART_GAP + 70
    bars = []
    for i, r in enumerate(rows):
        cost = float(r.get("cost") or 0)
        tokens = int(r.get("tokens") or 0)
        bars.append(
            ChartBar(
                label=_short(str(r.get("label", "")), 18),
                y=24 + i * CHART_ROW_H,
                cost=cost,
                currency=str(r.get("currency", "")),
                tokens=tokens,
                cost_w=int(CHART_BAR_W * cost / max_cost) if max_cost > 0 else 0,
                tokens_w=int(CHART_BAR_W * tokens / max_tokens) if max_tokens > 0 else 0,
                cost_x=cost_x,
                tokens_x=tokens_x,
            )
        )
    width = tokens_x + CHART_BAR_W + 80
    return BarChart(
        width=width,
        height=30 + len(rows) * CHART_ROW_H,
        bars=bars,
        cost_header_x=cost_x,
        tokens_header_x=tokens_x,
    )


# --- workflow order (ledger tables) --------------------------------------------------------------


def workflow_step_order(snapshot: Any) -> list[str]:
    """The workflow's steps in DAG order: by column (longest path from a source), then as declared.
    Every edge goes from an earlier step to a later one."""
    if not isinstance(snapshot, dict):
        return []
    steps = [
        s["id"] for s in snapshot.get("steps") or [] if isinstance(s, dict) and isinstance(s.get("id"), str)
    ]
    edges = [(e.get("from"), e.get("to")) for e in snapshot.get("edges") or [] if isinstance(e, dict)]
    column = layers(steps, [(a, b) for a, b in edges if isinstance(a, str) and isinstance(b, str)])
    declared = {s: i for i, s in enumerate(steps)}
    return sorted(dict.fromkeys(steps), key=lambda s: (column[s], declared[s]))


def merged_step_order(snapshots: list[Any]) -> list[str]:
    """Step order over several workflows: each one's own order, first seen first."""
    order: dict[str, None] = {}
    for snapshot in snapshots:
        for step in workflow_step_order(snapshot):
            order.setdefault(step, None)
    return list(order)


# --- time series (ledger: cost and tokens per day) -----------------------------------------------

DAY_CHART_MAX_DAYS = 366
DAY_PANEL_H = 110
DAY_CHART_LEFT = 96
DAY_CHART_PLOT_W = 720
DAY_SLOT_MAX = 56
DAY_LABEL_W = 40


@dataclass
class DayBar:
    day: str
    x: int
    w: int
    cost: float
    tokens: int
    cost_y: int
    cost_h: int
    tokens_y: int
    tokens_h: int
    tick: bool  # the day's label is drawn under the axis


@dataclass
class DayChart:
    width: int
    height: int
    bars: list[DayBar]
    currency: str
    max_cost: float
    max_tokens: int
    cost_top: int
    cost_base: int
    tokens_top: int
    tokens_base: int
    first: str
    last: str
    clipped: int  # earlier days left out (beyond DAY_CHART_MAX_DAYS)


def day_chart(
    days: list[dict[str, Any]], *, currency: str, first: date | None = None, last: date | None = None
) -> DayChart | None:
    """Two aligned bar panels (cost in ``currency`` above, tokens below), one bar per calendar day
    from ``first`` (default: the first day in ``days``) to ``last`` (default: the last one);
    ``days`` holds ``{"day": "YYYY-MM-DD", "cost": float, "tokens": int}``, days without a model
    response are drawn as zero. None without days."""

    by_day: dict[date, dict[str, Any]] = {}
    for row in days:
        try:
            by_day[date.fromisoformat(str(row["day"]))] = row
        except (KeyError, ValueError):
            continue
    if not by_day:
        return None
    first = min(first, min(by_day)) if first is not None else min(by_day)
    last = max(last, max(by_day)) if last is not None else max(by_day)
    span = (last - first).days + 1
    clipped = max(0, span - DAY_CHART_MAX_DAYS)
    start = first + timedelta(days=clipped)
    calendar = [start + timedelta(days=i) for i in range(span - clipped)]
    values = [
        (
            d,
            float(by_day[d].get("cost") or 0) if d in by_day else 0.0,
            int(by_day[d].get("tokens") or 0) if d in by_day else 0,
        )
        for d in calendar
    ]
    max_cost = max(v[1] for v in values)
    max_tokens = max(v[2] for v in values)
    slot = max(2, min(DAY_SLOT_MAX, DAY_CHART_PLOT_W // len(values)))
    w = max(1, slot - (max(2, slot // 4) if slot > 4 else 0))
    # at most about 8 day labels, never closer than one label's width ("MM-DD")
    every = max(1, -(-len(values) // 8), -(-DAY_LABEL_W // slot))
    cost_top, cost_base = 20, 20 + DAY_PANEL_H
    tokens_top, tokens_base = cost_base + 40, cost_base + 40 + DAY_PANEL_H
    bars = []
    for i, (d, cost, tokens) in enumerate(values):
        ch = round(DAY_PANEL_H * cost / max_cost) if max_cost > 0 else 0
        th = round(DAY_PANEL_H * tokens / max_tokens) if max_tokens > 0 else 0
        bars.append(
            DayBar(
                day=d.isoformat(),
                x=DAY_CHART_LEFT + i * slot,
                w=w,
                cost=cost,
                tokens=tokens,
                cost_y=cost_base - ch,
                cost_h=ch,
                tokens_y=tokens_base - th,
                tokens_h=th,
                tick=i % every == 0,
            )
        )
    return DayChart(
        width=DAY_CHART_LEFT + len(values) * slot + 24,
        height=tokens_base + 34,
        bars=bars,
        currency=currency,
        max_cost=max_cost,
        max_tokens=max_tokens,
        cost_top=cost_top,
        cost_base=cost_base,
        tokens_top=tokens_top,
        tokens_base=tokens_base,
        first=calendar[0].isoformat(),
        last=calendar[-1].isoformat(),
        clipped=clipped,
    )
