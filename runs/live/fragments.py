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
from collections.abc import Iterable
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
    batch = render_batch(run_pk=run_pk, roles=(role,), after_seq=after_seq, upto_seq=upto_seq)
    update = batch.for_role(role)
    assert update is not None  # rendered for this very role
    return update


@dataclass(frozen=True)
class RenderedBatch:
    """One read of the store for every page of a run in a process: the rows once, the panels once
    per kind of control (`can_review`), so every role present shares the same read."""

    after_seq: int
    upto_seq: int
    status: str
    rows: Fragment | None
    panels: dict[bool, tuple[Fragment, ...]]  # can_review -> panels
    spans: Fragment | None = None  # the same for every role (runs.web.trace)

    def for_role(self, role: str) -> RenderedUpdate | None:
        """This batch as `role` sees it; None when it was not rendered for that role's controls."""
        panels = self.panels.get(role_allows(role, Action.RESOLVE_GATE))
        if panels is None:
            return None
        return RenderedUpdate(self.after_seq, self.upto_seq, self.status, self.rows, panels, self.spans)


def render_batch(*, run_pk: int, roles: Iterable[str], after_seq: int, upto_seq: int) -> RenderedBatch:
    """Rows after_seq+1..upto_seq and, when they may have changed, the panels, read once for all of
    `roles` (the gate panel is rendered once per distinct `can_review` among them)."""
    kinds = sorted({role_allows(role, Action.RESOLVE_GATE) for role in roles}) or [False]
    run = Run.unscoped.defer(*HEAVY_FIELDS).get(pk=run_pk)
    rows = spans = None
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
            neutral = (_events_fragment(run),)
            return RenderedBatch(
                after_seq, upto_seq, run.status, rows, {True: neutral, False: neutral}, spans
            )
    run = Run.unscoped.select_related("workspace").get(pk=run_pk)
    state = run_state(run)
    shared = (
        ("status_badge", partials.status_context(run, oob=True)),
        ("graph", partials.graph_context(run, state, oob=True)),
        ("ledger_totals", partials.ledger_totals_context(run, oob=True)),
    )
    common = {name: _render_panel(name, ctx) for name, ctx in shared}
    events = _events_fragment(run)
    panels: dict[bool, tuple[Fragment, ...]] = {}
    for can_review in kinds:
        gate_ctx = partials.gate_panel_context(run, state, can_review=can_review, oob=True)
        gate = _render_panel("gate_panel", gate_ctx)
        panels[can_review] = (common["status_badge"], gate, common["graph"], common["ledger_totals"], events)
    return RenderedBatch(after_seq, upto_seq, run.status, rows, panels, spans)


def _render_panel(name: str, ctx: dict) -> Fragment:
    ctx["csrf_token"] = CSRF_PLACEHOLDER
    return _fragment(name, render_to_string(f"{TEMPLATE}#{name}", ctx))


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
