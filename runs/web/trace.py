"""Context builders of the run page's trace view (``templates/runs/trace.html``): a span tree
loaded one level at a time beside a detail pane.

    trace     trace_context(run, url_id=, span=, view=, q=)   the panel (None: the run has no spans)
    nodes     level_context(run, url_id=, span=, after=, depth=)  one page of a span's children
                                                              (of the roots without ``span``)
    list      list_context(run, url_id=, view="failed"|q=, after=)   failed spans or a text search, flat
    detail    span_detail_context(run, seq, url_id=)          one span, its children on its own axis

Every function takes a run already fetched through the workspace; reads go through
``runs.selectors.spans`` (bounded index range scans).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.urls import reverse
from django.utils import timezone

from runs.models import Run
from runs.presenters.span_detail import attribute_rows, contents
from runs.presenters.span_tree import Axis, SpanNode, close, end_of, first_end_after, node_of, place
from runs.selectors.runs import has_spans
from runs.selectors.spans import (
    FAILED_COUNT_CAP,
    failed_count,
    failed_spans,
    had_spans_by,
    search_spans,
    span_ancestors,
    span_at,
    span_events,
    span_extent,
    span_level,
    spans_between,
)


def _urls(url_id: str) -> dict[str, str]:
    detail = reverse("runs:demo") if url_id == "demo" else reverse("runs:detail", args=[url_id])
    return {
        "detail_url": detail,
        "tree_url": reverse("runs:span_tree", args=[url_id]),
        "span_base": reverse("runs:span_detail", args=[url_id, 1])[: -len("1/")],
    }


def run_axis(run: Run) -> Axis:
    """The roots' time axis: the spans' own extent (not the run's end: a trace ingested from OTLP
    ends 30 s after its last span, and back-dated spans lie long before the run's start); the
    run's own times for a run without spans."""
    extent = span_extent(run)
    if extent is not None:
        return Axis.of(*extent)
    end = run.ended_at or timezone.now()
    return Axis.of(run.started_at.isoformat(), end.isoformat())


def span_axis(node: SpanNode) -> Axis:
    return Axis.of(node.start_ts, end_of(node.start_ts, node.duration_ms), duration_ms=node.duration_ms)


def level_context(
    run: Run, *, url_id: str | None = None, span: int | None = None, after: int = 0, depth: int = 1
) -> dict[str, Any] | None:
    """One page of the roots (no ``span``) or of the children of the span started at seq
    ``span``, bars on the parent's time axis (the run's for the roots). None: no such span."""
    url_id = url_id or run.run_id
    urls = _urls(url_id)
    if span is None:
        level = span_level(run, after=after, axis=run_axis(run))
        more = f"{urls['tree_url']}?{urlencode({'after': level.next_after, 'depth': depth})}"
    else:
        parent = span_at(run, span)
        if parent is None:
            return None
        level = span_level(
            run,
            parent=parent.span_id,
            lo=parent.start_seq,
            hi=parent.end_seq,
            after=after,
            axis=span_axis(parent),
        )
        more = f"{urls['tree_url']}?{urlencode({'span': span, 'after': level.next_after, 'depth': depth})}"
    return {
        **urls,
        "url_id": url_id,
        "nodes": level.level.nodes,
        "depth": depth,
        "more_url": more if level.next_after else "",
    }


def _failed(run: Run) -> dict[str, Any]:
    """The failed spans' count; ``failed_over`` (the cap) when there are more than it counts."""
    failed = failed_count(run)
    return {"failed": failed, "failed_over": FAILED_COUNT_CAP if failed > FAILED_COUNT_CAP else None}


def trace_context(
    run: Run, *, url_id: str | None = None, span: int | None = None, view: str = "", q: str = ""
) -> dict[str, Any] | None:
    """The trace view of the run page, or None when the run has no spans (no panel at all)."""
    if not has_spans(run):
        return None
    url_id = url_id or run.run_id
    ctx: dict[str, Any] = {
        **_urls(url_id),
        "url_id": url_id,
        **_failed(run),
        "view": view if view == "failed" else "",
        "q": q,
        "axis_ms": run_axis(run).total_ms,
    }
    if ctx["failed"]:
        first, _more = failed_spans(run, limit=1)
        ctx["first_failed"] = first[0].start_seq if first and first[0].start_seq else None
    if q or ctx["view"]:
        ctx["list"] = list_context(run, url_id=url_id, view=ctx["view"], q=q)
    else:
        ctx["roots"] = level_context(run, url_id=url_id)
        node = span_at(run, span) if span else None
        if node is not None:
            _open_to(run, ctx["roots"], [*span_ancestors(run, node), node], url_id=url_id)
    ctx["selected"] = span_detail_context(run, span, url_id=url_id) if span else None
    return ctx


def _open_to(run: Run, level: dict[str, Any] | None, path: list[SpanNode], *, url_id: str) -> None:
    """Open the tree along ``path`` (a root first, the selected span last): each span of the path
    shown in its level (put first when its level's page does not hold it), its children loaded
    under it, the last one selected."""
    for i, wanted in enumerate(path):
        if level is None:
            return
        nodes: list[SpanNode] = level["nodes"]
        found = next((n for n in nodes if n.start_seq == wanted.start_seq), None)
        if found is None:
            if i == 0:
                place(wanted, run_axis(run))
            else:
                place(wanted, span_axis(path[i - 1]))
            wanted.has_children = wanted.has_children or i < len(path) - 1
            nodes.insert(0, wanted)
            found = wanted
        if i == len(path) - 1:
            found.selected = True
            return
        found.has_children = True
        found.children_level = level = level_context(
            run, url_id=url_id, span=found.start_seq, depth=int(level.get("depth", 1)) + 1
        )


def list_context(
    run: Run, *, url_id: str | None = None, view: str = "", q: str = "", after: int = 0
) -> dict[str, Any]:
    """The failed spans (``view="failed"``) or the spans a text search finds, flat, one page."""
    url_id = url_id or run.run_id
    urls = _urls(url_id)
    if q:
        nodes, more = search_spans(run, q, after=after)
        params = {"q": q}
    else:
        nodes, more = failed_spans(run, after=after)
        params = {"view": "failed"}
    return {
        **urls,
        "url_id": url_id,
        "nodes": nodes,
        "depth": 1,
        "flat": True,
        "more_url": f"{urls['tree_url']}?{urlencode({**params, 'after': more})}" if more else "",
    }


def span_detail_context(run: Run, seq: int, *, url_id: str | None = None) -> dict[str, Any] | None:
    """One span for the detail pane, with the first page of its children on its own time axis
    (the zoom: bars relative to the selected span). None: no span starts at ``seq``."""
    node = span_at(run, seq)
    if node is None:
        return None
    url_id = url_id or run.run_id
    urls = _urls(url_id)
    children = span_level(
        run, parent=node.span_id, lo=node.start_seq, hi=node.end_seq, axis=span_axis(node), limit=50
    )
    detail = urls["detail_url"]
    events, more_events = span_events(run, node)
    inside = contents(events, truncated=more_events)
    return {
        **urls,
        "url_id": url_id,
        "span": node,
        # the span's own error, else the first error inside it (an error event, a failed step)
        "error": node.error or (inside.errors[0][1] if inside.errors else ""),
        "contents": inside,
        "attributes": attribute_rows(node.attributes),
        "children": children.level.nodes,
        "more_children": children.next_after is not None,
        "start_link": f"{detail}?at={node.start_seq}#seq-{node.start_seq}",
        "end_link": f"{detail}?at={node.end_seq}#seq-{node.end_seq}" if node.end_seq else "",
        "share_link": f"{detail}?span={node.start_seq}#trace",
    }


def live_spans_context(run: Run, *, after: int, upto: int) -> dict[str, Any] | None:
    """What a live update of seqs ``after``+1..``upto`` adds to an open trace view (None: no span
    event in it). A page that showed no span yet gets the whole panel (``section``); else the
    spans started in the range (``nodes``, in seq order, each with ``parent_id`` so the page puts
    it under its parent if that level is loaded), the ends of spans started before it (``ends``:
    status and duration for a node already shown) and, when a span failed, the failed count."""
    starts, ends = spans_between(run, after, upto)
    if not starts and not ends:
        return None
    if not had_spans_by(run, after):
        section = trace_context(run)
        return {"section": section} if section else None
    ends_by_id: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for seq, body in ends:
        ends_by_id.setdefault(str(body.get("spanId") or ""), []).append((seq, body))
    axis = run_axis(run)
    parents = {str(body.get("parentSpanId") or "") for _seq, body in starts}
    nodes: list[SpanNode] = []
    closed: set[int] = set()
    for seq, body in starts:
        node = node_of(seq, body)
        end = first_end_after(seq, ends_by_id.get(node.span_id, []))
        if end is not None:
            close(node, *end)
            closed.add(end[0])
        node.has_children = node.span_id in parents
        if not node.parent_id:
            place(node, axis)
        nodes.append(node)
    later: list[SpanNode] = []
    for seq, body in ends:
        if seq in closed:
            continue
        node = node_of(0, {"spanId": body.get("spanId"), "name": body.get("spanId")})
        close(node, seq, body)
        later.append(node)
    ctx: dict[str, Any] = {"nodes": nodes, "ends": later}
    if any(n.status == "error" for n in [*nodes, *later]):
        ctx["trace"] = {**_urls(run.run_id), **_failed(run)}
        first, _more = failed_spans(run, limit=1)
        ctx["trace"]["first_failed"] = first[0].start_seq if first and first[0].start_seq else None
    return ctx
