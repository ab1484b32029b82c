"""The HTML a live update carries: the run page's own partials, as htmx out-of-band swaps.

Renders `templates/runs/run_detail.html` partials with the context builders of `runs.web.partials`, the
same ones the page uses, so a live page and a reloaded page show the same markup:

- `timeline_rows` (events after_seq+1..upto_seq), appended to the timeline list;
- `live_spans` (the spans those events start or end: `templates/runs/trace.html#live_spans`),
  merged into the span tree by static/workbench/trace.js;
- `status_badge`, `gate_panel`, `graph`, `ledger_totals`, `run_events`, replacing their current versions
  (`run_events`, the header's event count, comes with every update, rows only or not).

The partials render their own `hx-swap-oob` attribute when their context says `oob`. A panel
whose HTML did not change since a subscriber last got it is left out of that subscriber's update
(the consumer compares digests), and panels are not even rendered when the new events cannot
change them (tool calls, annotations, spans), so a burst of timeline rows does not resend the graph. Per-user
values are not baked in: the CSRF token is a placeholder the consumer replaces for each socket,
so one rendering serves every subscriber with the same role.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import orjson
from django.template.loader import render_to_string

from runs.actions.permissions import Action, role_allows
from runs.models import Run
from runs.selectors.runs import run_state
from runs.web import partials
from runs.web.trace import live_spans_context

TEMPLATE = "runs/run_detail.html"
ROWS_TARGET = "#timeline-list"
CSRF_PLACEHOLDER = "__live_csrf_token__"
# Events that only add timeline rows: no status, gate, graph or ledger change can come from them.
PANEL_NEUTRAL_TYPES = frozenset({"tool_call", "annotation", "span_started", "span_ended"})
HEAVY_FIELDS = ("doc", "state", "imported_engine", "import_doc")


@dataclass(frozen=True)
class Fragment:
    """One piece of an update's HTML: `encoded` is its JSON string body (escaped, no quotes), so
    pieces can be joined into a JSON string without encoding the HTML again per subscriber."""

    name: str
    digest: str
    encoded: str


@dataclass(frozen=True)
class RenderedUpdate:
    after_seq: int
    upto_seq: int
    status: str
    rows: Fragment | None
    panels: tuple[Fragment, ...]
    spans: Fragment | None = None  # what the range adds to the trace view (runs.web.trace)


def _fragment(name: str, html: str) -> Fragment:
    encoded = orjson.dumps(html).decode()[1:-1]
    return Fragment(name, hashlib.blake2b(html.encode(), digest_size=12).hexdigest(), encoded)


def render_fragments(*, run_pk: int, role: str, after_seq: int, upto_seq: int) -> RenderedUpdate:
    """Rows after_seq+1..upto_seq and, when they may have changed, the current panels. The run is
    read fresh; `role` decides which controls show (the gate panel's buttons)."""
    run = Run.unscoped.defer(*HEAVY_FIELDS).get(pk=run_pk)
    rows = None
    if upto_seq > after_seq:
        rows_ctx = partials.timeline_context(run, after=after_seq, limit=upto_seq - after_seq)
        html = render_to_string(f"{TEMPLATE}#timeline_rows", rows_ctx)
        rows = _fragment(
            "timeline_rows",
            f'<template><ol hx-swap-oob="beforeend:{ROWS_TARGET}" data-live-from="{after_seq}" '
            f'data-live-to="{upto_seq}">{html}</ol></template>',
        )
        spans = _spans_fragment(run, after_seq, upto_seq)
        if {row.type for row in rows_ctx["rows"]} <= PANEL_NEUTRAL_TYPES:
            return RenderedUpdate(after_seq, upto_seq, run.status, rows, (_events_fragment(run),), spans)
    else:
        spans = None
    run = Run.unscoped.select_related("workspace").get(pk=run_pk)
    state = run_state(run)
    can_review = role_allows(role, Action.RESOLVE_GATE)
    contexts = (
        ("status_badge", partials.status_context(run, oob=True)),
        ("gate_panel", partials.gate_panel_context(run, state, can_review=can_review, oob=True)),
        ("graph", partials.graph_context(run, state, oob=True)),
        ("ledger_totals", partials.ledger_totals_context(run, oob=True)),
    )
    panels = []
    for name, ctx in contexts:
        ctx["csrf_token"] = CSRF_PLACEHOLDER
        panels.append(_fragment(name, render_to_string(f"{TEMPLATE}#{name}", ctx)))
    panels.append(_events_fragment(run))
    return RenderedUpdate(after_seq, upto_seq, run.status, rows, tuple(panels), spans)


def _spans_fragment(run: Run, after_seq: int, upto_seq: int) -> Fragment | None:
    """The span tree's share of an update: a <template class="live-spans"> that
    static/workbench/trace.js merges into the tree (None: no span event in the range)."""
    live = live_spans_context(run, after=after_seq, upto=upto_seq)
    if live is None:
        return None
    return _fragment("live_spans", render_to_string("runs/trace.html#live_spans", {"live": live}))


def _events_fragment(run: Run) -> Fragment:
    """The header's "Events N (last seq M)": cheap (the run row alone), sent with every update."""
    ctx = partials.ledger_totals_context(run, oob=True)
    return _fragment("run_events", render_to_string(f"{TEMPLATE}#run_events", ctx))
