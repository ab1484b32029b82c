"""The HTML a live update carries: the run page's own partials, as htmx out-of-band swaps.

Renders `templates/runs/run_detail.html` partials with the context builders of `runs.views`, the
same ones the page uses, so a live page and a reloaded page show the same markup:

- `timeline_rows` (events after_seq+1..upto_seq), appended to the timeline list;
- `status_badge`, `gate_panel`, `graph`, `ledger_totals`, replacing their current versions.

The partials render their own `hx-swap-oob` attribute when their context says `oob`. Per-user
values are not baked in: the CSRF token is a placeholder the consumer replaces for each socket,
so one rendering serves every subscriber with the same role.
"""

from __future__ import annotations

from django.template.loader import render_to_string

from runs.models import Role, Run

TEMPLATE = "runs/run_detail.html"
ROWS_TARGET = "#timeline-list"
CSRF_PLACEHOLDER = "__live_csrf_token__"


def render_fragments(*, run_id: str, role: str, after_seq: int, upto_seq: int) -> tuple[str, str]:
    """(html, status) of one update. The run is read fresh; `role` decides what controls show."""
    from runs import views

    run = Run.objects.select_related("workspace").get(pk=run_id)
    state = views.run_state(run)
    can_review = role in (Role.OWNER, Role.REVIEWER)
    parts: list[str] = []
    if upto_seq > after_seq:
        rows_ctx = views.timeline_context(run, after=after_seq, limit=upto_seq - after_seq)
        rows = render_to_string(f"{TEMPLATE}#timeline_rows", rows_ctx)
        parts.append(
            f'<template><ol hx-swap-oob="beforeend:{ROWS_TARGET}" data-live-from="{after_seq}" '
            f'data-live-to="{upto_seq}">{rows}</ol></template>'
        )
    panels = (
        ("status_badge", views.status_context(run, oob=True)),
        ("gate_panel", views.gate_panel_context(run, state, can_review=can_review, oob=True)),
        ("graph", views.graph_context(run, state, oob=True)),
        ("ledger_totals", views.ledger_totals_context(run, oob=True)),
    )
    for name, ctx in panels:
        ctx["csrf_token"] = CSRF_PLACEHOLDER
        parts.append(render_to_string(f"{TEMPLATE}#{name}", ctx))
    return "".join(parts), run.status
