"""Context builders of the run page's partials, shared by the pages and the live fragments.

Partials (``templates/runs/run_detail.html``) and the functions that build their context, so that
every adapter that renders them (the run page, its htmx fragments, the live-status websocket
consumer through ``runs.live.fragments``) shows the very same markup:

    status_badge   status_context(run, url_id=...)
    graph          graph_context(run, state, url_id=...)
    gate_panel     gate_panel_context(run, state, url_id=..., can_review=...)
    timeline_rows  timeline_context(run, url_id=..., after=N)   (just the <li> rows)
    ledger_totals  ledger_totals_context(run)
    waterfall      waterfall_context(run, url_id=..., after=N)   (the span tree; None without spans)
    compare page   compare_context(run_a, run_b, pos=...)    (templates/runs/compare.html, #aligned)

Every context function takes a run already fetched through the workspace (never a bare id).
``url_id`` is the id used in URLs: the run id, or ``"demo"`` for the public demo. Reads go through
``runs.selectors.runs``; nothing here imports the page modules.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote, urlencode

from django.urls import reverse

from runs.engine.state import RunState, gate_payload_key
from runs.models import Run
from runs.presenters.compare import artifact_rows, fold_same, step_rows, total_rows
from runs.presenters.graph import layout_workflow
from runs.presenters.timeline import summarize
from runs.presenters.waterfall import build_waterfall
from runs.protocol.validate import EVENT_TYPES
from runs.selectors.compare import (
    Cursor,
    SharedHistory,
    aligned_page,
    cached_first_divergence,
    carried_events,
    run_summary,
    shared_history,
)
from runs.selectors.gatepolicy import gate_status
from runs.selectors.runs import (
    TIMELINE_PAGE,
    TimelineFilters,
    children,
    event_row,
    gate_history,
    has_spans,
    parents,
    span_window,
    timeline_page,
)
from runs.web.gate_edit import FORM, default_edit_key, gate_edit

HISTORY_LIMIT = 50
PAYLOAD_CHARS = 20_000


def status_context(run: Run, *, url_id: str | None = None, oob: bool = False) -> dict[str, Any]:
    return {"run": run, "url_id": url_id or run.run_id, "oob": oob}


def graph_context(
    run: Run, state: RunState, *, url_id: str | None = None, oob: bool = False
) -> dict[str, Any]:
    pending = state.pending_gates()
    layout = layout_workflow(
        state.run.get("workflowSnapshot") or {},
        step_status=state.step_status,
        gate_state=state.gate_state,
        pending_steps={g["stepId"] for g in pending},
        rejected_steps=set(state.rejections),
        attempts=state.step_attempts,
    )
    return {"run": run, "url_id": url_id or run.run_id, "layout": layout, "oob": oob}


def gate_panel_context(
    run: Run,
    state: RunState,
    *,
    url_id: str | None = None,
    can_review: bool = False,
    error: str = "",
    error_at: tuple[str, str, str] = ("", "", ""),
    oob: bool = False,
    typed: Any = None,
    notice: str = "",
) -> dict[str, Any]:
    """`error_at` (step, gate, field) places `error` next to that gate's field ("edit": the artifact
    edit); without a field it is said at the top of the panel. Each gate's edit starts from the
    current version of the artifact it asks about, in the artifact's schema form when it has one
    (``edit``, a :class:`runs.web.gate_edit.GateEdit`; ``editKey``, ``editText`` for the JSON box);
    after a refusal, ``typed`` (the posted form) is what that gate's edit shows again."""
    history = gate_history(run, limit=HISTORY_LIMIT)
    pending = state.pending_gates()
    for slot, gate in enumerate(pending, start=1):  # what the host asked about (escaped by the template)
        gate["policyStatus"] = gate_status(run, state.run, gate)  # quorum, votes, limit (gatepolicy)
        at_error = bool(error_at[2]) and (gate["stepId"], gate["gate"]) == error_at[:2]
        if error and at_error:
            gate["fieldError"] = {"field": error_at[2], "message": error}
            error = ""
        artifact = state.artifacts.get(gate_payload_key(gate["stepId"], gate["gate"], gate["checkpoint"]))
        if artifact is not None and "data" in artifact:
            gate["payload"] = json.dumps(artifact["data"], indent=2, ensure_ascii=False)[:PAYLOAD_CHARS]
            gate["payloadKey"] = artifact["artifactKey"]
        # "Approve with edits" starts from the current version, not an empty box
        gate["editKey"] = default_edit_key(state, gate)
        mine = typed is not None and at_error
        if mine:
            gate["editKey"] = typed.get("edit_key", "")
            gate["typedNote"] = typed.get("note", "")  # a refused decision keeps its note too
        gate["edit"] = gate_edit(state, gate["editKey"], prefix=f"g{slot}-", post=typed if mine else None)
        gate["editText"] = gate["edit"].text if gate["edit"] is not None else ""
        if mine and typed.get("edit_editor") != FORM:
            gate["editText"] = typed.get("edit_data", "")
    return {
        "run": run,
        "url_id": url_id or run.run_id,
        "pending": pending,
        "history": history,
        "can_review": can_review and not run.is_finished,
        "artifact_keys": list(state.artifacts),
        "gate_error": error,
        "gate_notice": notice,
        "oob": oob,
    }


def ledger_totals_context(run: Run, *, oob: bool = False) -> dict[str, Any]:
    return {"run": run, "oob": oob}


def timeline_context(
    run: Run,
    *,
    url_id: str | None = None,
    after: int = 0,
    before: int | None = None,
    filters: TimelineFilters | None = None,
    limit: int = TIMELINE_PAGE,
    expanded: int | None = None,
    oob: bool = False,
) -> dict[str, Any]:
    """One page of light timeline rows (type, step, time, summary); the row ``expanded`` (a
    permalink's event) comes opened, the others load their detail when opened."""
    filters = filters or TimelineFilters()
    page = timeline_page(run, after=after, before=before, filters=filters, limit=limit)
    url_id = url_id or run.run_id
    detail_url = reverse("runs:demo") if url_id == "demo" else reverse("runs:detail", args=[url_id])
    bases = _row_url_bases(run, url_id, detail_url)
    for row in page.rows:
        # light rows: an opened row loads its detail from <event_base><seq>/detail/ (workbench.js)
        row.links = {"permalink": f"{detail_url}?at={row.seq}#seq-{row.seq}"}
        if expanded is not None and row.seq <= expanded <= max(row.seq, row.last_seq):
            row.open = True
            row.links.update(row_actions(run, row, url_id=url_id, bases=bases))
    return {
        "run": run,
        "url_id": url_id,
        "page": page,
        "rows": page.rows,
        "filters": filters,
        "filter_query": filters.as_query(),
        "event_types": EVENT_TYPES,
        "detail_url": detail_url,
        "timeline_url": reverse("runs:timeline", args=[url_id]),
        "expanded": expanded,
        "event_base": bases["event"],
        "oob": oob,
    }


def _row_url_bases(run: Run, url_id: str, detail_url: str) -> dict[str, str]:
    # URLs per row built by string concatenation: a {% url %} per row costs more than the query.
    return {
        "detail": detail_url,
        "event": reverse("runs:event_state", args=[url_id, 1])[: -len("1/")],
        "fork": reverse("runs:fork", args=[url_id]) if url_id != "demo" else "",
        "playground": reverse("playground:page") if url_id != "demo" else "",
    }


def row_actions(run: Run, row: Any, *, url_id: str, bases: dict[str, str]) -> dict[str, str]:
    """The links an opened timeline row offers (its permalink, filters by its step and
    correlation, the state after it, the playground and the fork actions)."""
    detail_url = bases["detail"]
    fork = bases["fork"]
    return {
        "permalink": f"{detail_url}?at={row.seq}#seq-{row.seq}",
        "state": f"{bases['event']}{row.last_seq}/",
        "step": f"{detail_url}?step={quote(row.step_id)}#timeline" if row.step_id else "",
        "corr": f"{detail_url}?corr={quote(row.correlation_id)}#timeline" if row.correlation_id else "",
        # Open a model call in the playground: the exact request restored, editable, re-runnable.
        "playground": f"{bases['playground']}?from_event={quote(run.run_id)}:{row.seq}"
        if bases["playground"] and row.type == "model_io"
        else "",
        "replay": f"{fork}?mode=replay&seq={row.seq}" if fork else "",
        "branch": f"{fork}?mode=branch&seq={row.seq}" if fork else "",
    }


def event_detail_context(
    run: Run, seq: int, *, url_id: str | None = None, upto: int | None = None
) -> dict[str, Any] | None:
    """What an opened timeline row shows (``event_detail`` partial), or None for no such event."""
    row = event_row(run, seq, upto=upto)
    if row is None:
        return None
    url_id = url_id or run.run_id
    detail_url = reverse("runs:demo") if url_id == "demo" else reverse("runs:detail", args=[url_id])
    row.links = row_actions(run, row, url_id=url_id, bases=_row_url_bases(run, url_id, detail_url))
    return {"run": run, "url_id": url_id, "row": row, "detail_url": detail_url}


def lineage_context(run: Run) -> dict[str, Any]:
    return {"parents": parents(run.workspace, run), "children": children(run.workspace, run.run_id)}


def waterfall_context(run: Run, *, url_id: str | None = None, after: int = 0) -> dict[str, Any] | None:
    """The span tree of one window of spans (None when the run has none: no section at all)."""
    if after <= 0 and not has_spans(run):
        return None
    window = span_window(run, after=after)
    doc_end = run.ended_at.isoformat() if run.ended_at else None
    wf = build_waterfall(window.started, window.ended, run_end_ts=doc_end)
    url_id = url_id or run.run_id
    detail_url = reverse("runs:demo") if url_id == "demo" else reverse("runs:detail", args=[url_id])
    for row in wf.rows:
        row.links = {
            "start": f"{detail_url}?at={row.start_seq}#seq-{row.start_seq}",
            "end": f"{detail_url}?at={row.end_seq}#seq-{row.end_seq}" if row.end_seq else "",
        }
    return {
        "waterfall": wf,
        "spans_after": window.after,
        "spans_next": window.next_after,
        "spans_ends_to": window.ends_to,
        "spans_url": reverse("runs:spans", args=[url_id]),
        "detail_url": detail_url,
    }


# --- two runs compared (runs/pages/compare.py, templates/runs/compare.html) ------------------------


def compare_url(a: str, b: str, **params: str) -> str:
    """The shareable URL of the comparison of runs ``a`` and ``b`` (ids percent-encoded)."""
    return reverse("runs:compare") + "?" + urlencode({"a": a, "b": b, **params}, quote_via=quote)


def compare_summary_context(run_a: Run, run_b: Run) -> dict[str, Any]:
    """The ``summary`` partial of the compare page: totals, steps and artifacts of A and B."""
    sa, sb = run_summary(run_a), run_summary(run_b)
    return {
        "a": run_a,
        "b": run_b,
        "deferred": False,
        "totals": total_rows(sa, sb),
        "steps": step_rows(sa, sb),
        "artifacts": artifact_rows(sa, sb),
    }


def _collapses(default: Cursor, shared: SharedHistory) -> bool:
    """Whether rows before the default page start are collapsed into a "Show it" row (a fork from
    state: only alike events after its fork point; its carried history has a row of its own)."""
    if shared.carried:
        return default != shared.start
    return bool(default.a or default.b)


def compare_context(
    run_a: Run, run_b: Run, *, pos: Cursor | None = None, jump: bool = False, summary: bool = True
) -> dict[str, Any]:
    """The compare page: totals, steps and artifacts side by side, the first divergence, and one
    page of aligned trace rows (``aligned`` partial) from ``pos``. By default (and with ``jump``)
    the page starts at the first divergence: what comes before it (a fork's copied history, and
    whatever else both runs did alike) is one collapsed row that ``pos=0.0`` opens. Without
    ``summary``, the totals are left to a request of their own (``summary_url``, htmx on load)."""
    shared = shared_history(run_a, run_b)
    start = shared.start  # a fork's copied or carried history is never a divergence
    search = cached_first_divergence(run_a, run_b, start=start)
    found = search.found
    default = found.before if found else start
    after = default if jump or pos is None else pos
    if shared.carried:  # what a fork from state carried in is not the source's: never aligned with it
        after = Cursor(max(after.a, start.a), max(after.b, start.b))
    carried_run = run_b if shared.fork_of == "b" else run_a
    page = aligned_page(run_a, run_b, after=after)
    for row in page.rows:
        seqs = (row.a.seq if row.a else None, row.b.seq if row.b else None)
        row.first_divergence = found is not None and seqs == (found.seq_a, found.seq_b)
    ids = (run_a.run_id, run_b.run_id)
    if summary:
        parts = compare_summary_context(run_a, run_b)
    else:
        parts = {
            "deferred": True,
            "summary_url": compare_url(*ids, part="summary"),
            "summary_page_url": compare_url(*ids, summary="1"),
        }
    return {
        **parts,
        "a": run_a,
        "b": run_b,
        "shared": shared,
        "search": search,
        "divergence": found,
        "divergence_url": compare_url(*ids, pos=str(found.before)) + "#first-divergence" if found else "",
        "scan_more_url": compare_url(*ids, pos=str(search.scanned_to)) if search.scanned_to else "",
        "prefix": default if after == default and _collapses(default, shared) else None,
        "prefix_url": compare_url(*ids, pos=str(start) if shared.carried else "0.0"),
        "carried": [(e, summarize(e.body)) for e in carried_events(carried_run, shared)],
        "carried_run": carried_run,
        "page": page,
        "blocks": fold_same(page.rows),
        "next_url": compare_url(*ids, pos=str(page.next_after)) if page.next_after else "",
        "first_url": compare_url(*ids) if after != default else "",
        "swap_url": compare_url(run_b.run_id, run_a.run_id),
        "nav_active": "runs",
    }
