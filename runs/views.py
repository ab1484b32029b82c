"""Workbench pages. Views parse input, call a selector or an action, and render; nothing else.

Partials (``templates/runs/run_detail.html``) and the functions that build their context, so that
other adapters (the live-status websocket consumer) can render the very same fragments:

    status_badge   status_context(run, url_id=...)
    graph          graph_context(run, state, url_id=...)
    gate_panel     gate_panel_context(run, state, url_id=..., can_review=...)
    timeline_rows  timeline_context(run, url_id=..., after=N)   (just the <li> rows; see timeline_page)
    ledger_totals  ledger_totals_context(run)

Every context function takes a run already fetched through the workspace (never a bare id).
``url_id`` is the id used in URLs: the run id, or ``"demo"`` for the public demo.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from functools import lru_cache, wraps
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jsonpatch
import orjson
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.db.models import Q, TextField
from django.db.models.functions import Cast
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers
from jsonschema import Draft202012Validator

from runs import actions
from runs.engine import commands as cmd
from runs.engine.state import RunState
from runs.graph import bar_chart, layout_workflow
from runs.models import ArtifactVersion, Event, Membership, Role, Run, RunStatus, loads
from runs.permissions import Action
from runs.protocol.schemas import SchemaRegistry, default_registry
from runs.protocol.validate import EVENT_TYPES
from runs.timeline import EventRecord, build_rows, changed_top_keys, diff_values
from runs.web import (
    actor_for,
    current_workspace,
    get_demo_run,
    get_run_for_user,
    may,
    require_action,
    switch_workspace,
)

RUNS_PER_PAGE = 50
TIMELINE_PAGE = 100
TIMELINE_MAX_PAGE = 500
SEARCH_WINDOW = 20_000  # events scanned per text-search request (keeps a search of a huge run bounded)
INBOX_LIMIT = 200
HISTORY_LIMIT = 50
NOTES_LIMIT = 10
ARTIFACT_ROWS_LIMIT = 2000


@lru_cache(maxsize=1)
def schema_registry() -> SchemaRegistry:
    return default_registry()


# --- access ---------------------------------------------------------------------------


@dataclass
class RunAccess:
    run: Run
    url_id: str
    demo: bool
    can_review: bool
    can_cancel: bool = False

    @property
    def read_only(self) -> bool:
        return not self.can_review


def run_access(request: HttpRequest, run_id: str) -> RunAccess:
    """The run a page shows: the public demo (read-only) or a run of the user's current workspace."""
    if run_id == "demo":
        return RunAccess(run=get_demo_run(), url_id="demo", demo=True, can_review=False)
    run = get_run_for_user(request, run_id)
    return RunAccess(
        run=run,
        url_id=run.run_id,
        demo=False,
        can_review=may(request, Action.RESOLVE_GATE),
        can_cancel=may(request, Action.CANCEL_RUN),
    )


def run_page(view):
    """Read-only run views: the demo is public, every other run needs a signed-in member."""

    @wraps(view)
    def wrapper(request: HttpRequest, run_id: str, *args, **kwargs):
        if run_id != "demo" and not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        return view(request, run_access(request, run_id), *args, **kwargs)

    return wrapper


def run_write(action: Action):
    """Writing run views: POST, signed in, and `action` allowed by the permission table."""

    def decorate(view):
        @wraps(view)
        @login_required
        @require_POST
        def wrapper(request: HttpRequest, run_id: str, *args, **kwargs):
            run = get_run_for_user(request, run_id)  # 404 first: a foreign run is never revealed
            require_action(request, action)
            return view(request, run, *args, **kwargs)

        return wrapper

    return decorate


def run_state(run: Run) -> RunState:
    return RunState.from_json(loads(run.state))


# --- partial contexts -------------------------------------------------------------------


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
    )
    return {"run": run, "url_id": url_id or run.run_id, "layout": layout, "oob": oob}


def gate_panel_context(
    run: Run,
    state: RunState,
    *,
    url_id: str | None = None,
    can_review: bool = False,
    error: str = "",
    oob: bool = False,
) -> dict[str, Any]:
    # One query per type so each is a backwards range scan of the (run, type, seq) index; an IN over
    # both types makes SQLite walk the whole trace by (run, seq) instead.
    history = sorted(
        (
            row
            for etype in ("human_gate_requested", "human_gate_resolved")
            for row in Event.objects.filter(run=run, type=etype)
            .order_by("-seq")
            .values("seq", "type", "ts", "step_id", "actor", "body")[:HISTORY_LIMIT]
        ),
        key=lambda row: -row["seq"],
    )[:HISTORY_LIMIT]
    for item in history:
        item["data"] = loads(item.pop("body"))
    return {
        "run": run,
        "url_id": url_id or run.run_id,
        "pending": state.pending_gates(),
        "history": history,
        "can_review": can_review and not run.is_finished,
        "artifact_keys": list(state.artifacts),
        "gate_error": error,
        "oob": oob,
    }


def ledger_totals_context(run: Run, *, oob: bool = False) -> dict[str, Any]:
    return {"run": run, "oob": oob}


@dataclass
class TimelineFilters:
    type: str = ""
    step: str = ""
    corr: str = ""
    q: str = ""

    @classmethod
    def from_query(cls, params) -> TimelineFilters:
        return cls(
            type=params.get("type", "").strip()[:40],
            step=params.get("step", "").strip()[:200],
            corr=params.get("corr", "").strip()[:200],
            q=params.get("q", "").strip()[:200],
        )

    @property
    def active(self) -> bool:
        return bool(self.type or self.step or self.corr or self.q)

    def as_query(self) -> dict[str, str]:
        return {
            k: v
            for k, v in (("type", self.type), ("step", self.step), ("corr", self.corr), ("q", self.q))
            if v
        }


@dataclass
class TimelinePage:
    rows: list
    first_seq: int | None
    last_seq: int | None
    next_after: int | None  # a newer page exists after this seq
    prev_before: int | None  # an older page may exist before this seq
    searched_to: int | None = None  # text search stopped at this seq (window exhausted)
    searched_from: int | None = None
    extra: dict = field(default_factory=dict)


def timeline_page(
    run: Run,
    *,
    after: int = 0,
    before: int | None = None,
    filters: TimelineFilters | None = None,
    limit: int = TIMELINE_PAGE,
) -> TimelinePage:
    """One keyset page of the trace: events with seq > after (or < before), filtered, in seq order.

    Only indexed range scans on (run, seq) / (run, type, seq) / (run, step_id, seq) /
    (run, correlation_id, seq); a text search scans at most SEARCH_WINDOW seqs per request and says
    where it stopped. Never counts or loads the whole trace.
    """
    filters = filters or TimelineFilters()
    limit = max(1, min(limit, TIMELINE_MAX_PAGE))
    qs = Event.objects.filter(run=run)
    if filters.type:
        qs = qs.filter(type=filters.type)
    if filters.step:
        qs = qs.filter(step_id=filters.step)
    if filters.corr:
        qs = qs.filter(correlation_id=filters.corr)
    if filters.q:
        qs = qs.filter(body__icontains=filters.q)
    cols = ("seq", "type", "ts", "step_id", "correlation_id", "actor", "body")
    searched_to = searched_from = None
    if before is not None:
        if filters.q:
            low = max(0, before - SEARCH_WINDOW)
            qs = qs.filter(seq__gte=low)
            searched_from = low if low > 1 else None
        raw = list(qs.filter(seq__lt=before).order_by("-seq").values_list(*cols)[: limit + 1])
        older = len(raw) > limit
        raw = list(reversed(raw[:limit]))
        next_after = raw[-1][0] if raw and raw[-1][0] < run.last_seq else None
        prev_before = raw[0][0] if raw and (older or searched_from) else None
    else:
        if filters.q:
            high = after + SEARCH_WINDOW
            qs = qs.filter(seq__lte=high)
            searched_to = high if high < run.last_seq else None
        raw = list(qs.filter(seq__gt=after).order_by("seq").values_list(*cols)[: limit + 1])
        newer = len(raw) > limit
        raw = raw[:limit]
        if newer:
            next_after = raw[-1][0]
        elif searched_to is not None:
            next_after = searched_to
        else:
            next_after = None
        prev_before = raw[0][0] if raw and raw[0][0] > 1 else (after + 1 if after > 0 else None)
    records = [
        EventRecord(seq, t, ts, step, corr, actor, loads(body)) for seq, t, ts, step, corr, actor, body in raw
    ]
    return TimelinePage(
        rows=build_rows(records),
        first_seq=records[0].seq if records else None,
        last_seq=records[-1].seq if records else None,
        next_after=next_after,
        prev_before=prev_before,
        searched_to=searched_to if searched_to and not (len(raw) >= limit) else None,
        searched_from=searched_from,
    )


def timeline_context(
    run: Run,
    *,
    url_id: str | None = None,
    after: int = 0,
    before: int | None = None,
    filters: TimelineFilters | None = None,
    limit: int = TIMELINE_PAGE,
    oob: bool = False,
) -> dict[str, Any]:
    filters = filters or TimelineFilters()
    page = timeline_page(run, after=after, before=before, filters=filters, limit=limit)
    url_id = url_id or run.run_id
    detail_url = reverse("runs:demo") if url_id == "demo" else reverse("runs:detail", args=[url_id])
    # URLs per row built by string concatenation: a {% url %} per row costs more than the query.
    state_base = reverse("runs:event_state", args=[url_id, 1])[: -len("1/")]
    playground = reverse("playground:page") if url_id != "demo" else ""
    for row in page.rows:
        row.links = {
            "permalink": f"{detail_url}?at={row.seq}#seq-{row.seq}",
            "state": f"{state_base}{row.last_seq}/",
            "step": f"{detail_url}?step={quote(row.step_id)}#timeline" if row.step_id else "",
            "corr": f"{detail_url}?corr={quote(row.correlation_id)}#timeline" if row.correlation_id else "",
            # Open a model call in the playground: the exact request restored, editable, re-runnable.
            "playground": f"{playground}?from_event={quote(run.run_id)}:{row.seq}"
            if playground and row.type == "model_io"
            else "",
        }
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
        "oob": oob,
    }


def lineage_context(run: Run) -> dict[str, Any]:
    from runs.selectors import children, parents

    return {"parents": parents(run.workspace, run), "children": children(run.workspace, run.run_id)}


def run_detail_context(
    run: Run,
    *,
    url_id: str | None = None,
    can_review: bool = False,
    can_cancel: bool = False,
    demo: bool = False,
    after: int = 0,
    before: int | None = None,
    filters: TimelineFilters | None = None,
) -> dict[str, Any]:
    url_id = url_id or run.run_id
    state = run_state(run)
    doc = state.run
    ctx: dict[str, Any] = {
        "run": run,
        "doc": doc,
        "url_id": url_id,
        "demo": demo,
        "can_review": can_review,
        "can_cancel": can_cancel,
        "state": state,
        "nav_active": "runs",
        "annotations": doc.get("annotations") or [],
        "notes": [
            {"seq": seq, "ts": ts, "actor": actor, "data": loads(body)}
            for seq, ts, actor, body in Event.objects.filter(run=run, type="annotation")
            .order_by("-seq")
            .values_list("seq", "ts", "actor", "body")[:NOTES_LIMIT]
        ],
    }
    ctx.update(lineage_context(run))
    ctx.update(graph_context(run, state, url_id=url_id))
    ctx.update(gate_panel_context(run, state, url_id=url_id, can_review=can_review))
    ctx.update(timeline_context(run, url_id=url_id, after=after, before=before, filters=filters))
    return ctx


def _int_param(params, name: str, default: int | None = None, minimum: int = 0) -> int | None:
    raw = params.get(name)
    if raw in (None, ""):
        return default
    try:
        return max(minimum, int(raw))
    except (TypeError, ValueError):
        return default


def _timeline_window(request: HttpRequest) -> tuple[int, int | None]:
    at = _int_param(request.GET, "at", None, minimum=1)
    if at is not None:
        return max(0, at - 11), None
    return _int_param(request.GET, "after", 0) or 0, _int_param(request.GET, "before", None, minimum=1)


# --- runs list and inbox --------------------------------------------------------------------


def _tag_filter(tag: str) -> Q:
    needles = {orjson.dumps(tag).decode(), json.dumps(tag)}
    q = Q()
    for needle in needles:
        q |= Q(tags_text__contains=needle)
    return q


@login_required
@require_GET
@vary_on_headers("HX-Request")
def run_list(request: HttpRequest) -> HttpResponse:
    workspace = current_workspace(request)
    qs = Run.objects.for_workspace(workspace)
    status = request.GET.get("status", "").strip()
    workflow = request.GET.get("workflow", "").strip()
    tag = request.GET.get("tag", "").strip()
    text = request.GET.get("q", "").strip()[:200]
    if status in RunStatus.values:
        qs = qs.filter(status=status)
    if workflow:
        qs = qs.filter(workflow_id=workflow)
    if tag:
        qs = qs.annotate(tags_text=Cast("tags", TextField())).filter(_tag_filter(tag))
    if text:
        qs = qs.filter(
            Q(run_id__icontains=text)
            | Q(title__icontains=text)
            | Q(workflow_id__icontains=text)
            | Q(doc__icontains=text)
        )
    cursor = request.GET.get("cursor", "")
    if cursor:
        try:
            ts_text, run_pk = cursor.split("|", 1)
            ts = datetime.fromisoformat(ts_text)
            qs = qs.filter(Q(started_at__lt=ts) | Q(started_at=ts, pk__lt=int(run_pk)))
        except ValueError:
            return HttpResponseBadRequest("bad cursor")
    runs = list(
        qs.order_by("-started_at", "-pk").only(
            "id",
            "run_id",
            "workflow_id",
            "title",
            "status",
            "started_at",
            "ended_at",
            "tags",
            "pending_gates",
            "event_count",
            "model_calls",
            "total_tokens",
            "cost_totals",
        )[: RUNS_PER_PAGE + 1]
    )
    next_cursor = ""
    if len(runs) > RUNS_PER_PAGE:
        runs = runs[:RUNS_PER_PAGE]
        last = runs[-1]
        next_cursor = f"{last.started_at.isoformat()}|{last.pk}"
    workflows = list(
        Run.objects.for_workspace(workspace)
        .order_by("workflow_id")
        .values_list("workflow_id", flat=True)
        .distinct()[:200]
    )
    context = {
        "runs": runs,
        "next_cursor": next_cursor,
        "cursor": cursor,
        "statuses": RunStatus.values,
        "workflows": workflows,
        "f": {"status": status, "workflow": workflow, "tag": tag, "q": text},
        "nav_active": "runs",
        "workspace": workspace,
    }
    template = "runs/run_list.html#run_table" if request.htmx else "runs/run_list.html"
    return render(request, template, context)


@login_required
@require_GET
@vary_on_headers("HX-Request")
def review_inbox(request: HttpRequest) -> HttpResponse:
    """Every pending gate across the workspace's runs (the reviewer's inbox)."""
    workspace = current_workspace(request)
    runs = list(
        Run.objects.for_workspace(workspace)
        .filter(pending_gates__gt=0, status=RunStatus.RUNNING)
        .order_by("-started_at", "-pk")[:INBOX_LIMIT]
    )
    items = []
    for run in runs:
        for gate in run_state(run).pending_gates():
            items.append({"run": run, "gate": gate})
    return render(
        request,
        "runs/inbox.html#inbox_table" if request.htmx else "runs/inbox.html",
        {"items": items, "runs_count": len(runs), "limit": INBOX_LIMIT, "nav_active": "inbox"},
    )


@login_required
@require_POST
def switch_workspace_view(request: HttpRequest) -> HttpResponse:
    workspace = switch_workspace(request, request.POST.get("workspace", ""))
    messages.success(request, f"Switched to {workspace.name}.")
    return redirect("runs:list")


# --- run detail and fragments ----------------------------------------------------------------


@run_page
@require_GET
@vary_on_headers("HX-Request")
def run_detail(request: HttpRequest, access: RunAccess) -> HttpResponse:
    after, before = _timeline_window(request)
    ctx = run_detail_context(
        access.run,
        url_id=access.url_id,
        can_review=access.can_review,
        can_cancel=access.can_cancel,
        demo=access.demo,
        after=after,
        before=before,
        filters=TimelineFilters.from_query(request.GET),
    )
    return render(request, "runs/run_detail.html", ctx)


@run_page
@require_GET
@vary_on_headers("HX-Request")
def timeline(request: HttpRequest, access: RunAccess) -> HttpResponse:
    after, before = _timeline_window(request)
    limit = _int_param(request.GET, "limit", TIMELINE_PAGE, minimum=1) or TIMELINE_PAGE
    ctx = timeline_context(
        access.run,
        url_id=access.url_id,
        after=after,
        before=before,
        filters=TimelineFilters.from_query(request.GET),
        limit=limit,
    )
    if request.htmx:
        return render(request, "runs/run_detail.html#timeline_page", ctx)
    # Without htmx: the detail page at that window (keeps links working with JS off).
    query = request.GET.urlencode()
    return redirect(f"{ctx['detail_url']}?{query}#timeline")


@run_page
@require_GET
def graph(request: HttpRequest, access: RunAccess) -> HttpResponse:
    return render(
        request,
        "runs/run_detail.html#graph",
        graph_context(access.run, run_state(access.run), url_id=access.url_id),
    )


@run_page
@require_GET
def status_fragment(request: HttpRequest, access: RunAccess) -> HttpResponse:
    return render(
        request, "runs/run_detail.html#status_badge", status_context(access.run, url_id=access.url_id)
    )


@run_page
@require_GET
def gate_panel(request: HttpRequest, access: RunAccess) -> HttpResponse:
    ctx = gate_panel_context(
        access.run, run_state(access.run), url_id=access.url_id, can_review=access.can_review
    )
    return render(request, "runs/run_detail.html#gate_panel", ctx)


STATE_VIEW_DROP = ("format", "idempotencyDigests", "lastEventId", "lastEventAt", "warnings", "warningCount")


def state_view(state: RunState) -> dict[str, Any]:
    """The projection as a reader sees it: maps as objects, engine internals dropped."""
    raw = state.to_json()
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key in STATE_VIEW_DROP:
            continue
        if isinstance(value, list) and all(
            isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) for p in value
        ):
            value = {k: v for k, v in value}
            if key == "gateState":
                value = {k: {**v, "checkpoints": dict(v.get("checkpoints", []))} for k, v in value.items()}
            if key in ("openGates", "rejections"):
                value = {k: dict(v) for k, v in value.items()}
        out[key] = value
    return out


def event_state_context(run: Run, seq: int, *, url_id: str | None = None) -> dict[str, Any]:
    from runs.selectors import state_at

    if seq < 1 or seq > run.last_seq:
        raise Http404("no such event")
    event = Event.objects.filter(run=run, seq=seq).values("seq", "type", "ts", "actor", "body").first()
    if event is None:
        raise Http404("no such event")
    before = state_view(state_at(run, seq - 1))
    after = state_view(state_at(run, seq))
    changes = diff_values(before, after)
    keys = [k for k in changed_top_keys(changes) if k != "revision"]
    sides = [{"key": k, "before": before.get(k), "after": after.get(k)} for k in keys]
    url_id = url_id or run.run_id
    return {
        "run": run,
        "url_id": url_id,
        "seq": seq,
        "event": {**event, "data": loads(event["body"])},
        "changes": changes,
        "sides": sides,
        "after_state": after,
        "detail_url": reverse("runs:demo") if url_id == "demo" else reverse("runs:detail", args=[url_id]),
    }


@run_page
@require_GET
@vary_on_headers("HX-Request")
def event_state(request: HttpRequest, access: RunAccess, seq: int) -> HttpResponse:
    ctx = event_state_context(access.run, seq, url_id=access.url_id)
    if request.htmx:
        return render(request, "runs/event_state.html#state_diff", ctx)
    return render(request, "runs/event_state.html", {**ctx, "demo": access.demo, "nav_active": "runs"})


@run_page
@require_GET
def export_bundle(request: HttpRequest, access: RunAccess) -> HttpResponse:
    from runs.bundles import export_bundle_bytes

    data = export_bundle_bytes(access.run)
    response = HttpResponse(data, content_type="application/json")
    safe_name = "".join(c if c.isalnum() or c in "-_." else "_" for c in access.run.run_id)[:100]
    response["Content-Disposition"] = f'attachment; filename="{safe_name}.bundle.json"'
    return response


@run_write(Action.CANCEL_RUN)
def cancel_run(request: HttpRequest, run: Run) -> HttpResponse:
    reason = request.POST.get("reason", "").strip()[:500] or "cancelled from the run page"
    try:
        report = actions.do_cancel_tree(
            workspace=run.workspace, run_id=run.run_id, actor=actor_for(request), reason=reason
        )
    except actions.ActionError as exc:
        messages.error(request, f"Could not cancel: {exc}")
    else:
        if report.cancelled:
            messages.success(request, f"Cancelled {len(report.cancelled)} run(s).")
        for rid, why in report.skipped:
            messages.info(request, f"{rid}: {why}")
    return redirect("runs:detail", run.run_id)


# --- gates --------------------------------------------------------------------------------------


def _parse_json_field(text: str) -> tuple[Any, str]:
    try:
        return orjson.loads(text), ""
    except orjson.JSONDecodeError as exc:
        return None, f"Not valid JSON: {exc}"


@run_write(Action.RESOLVE_GATE)
def resolve_gate(request: HttpRequest, run: Run) -> HttpResponse:
    post = request.POST
    decision = post.get("decision", "")
    step_id = post.get("step_id", "")
    gate = post.get("gate", "")
    checkpoint = post.get("checkpoint") or None
    note = post.get("note", "").strip()[:4000] or None
    error = ""
    edit = None
    if decision not in ("approved", "rejected", "edited"):
        error = "Choose approve, reject or edit."
    elif decision == "edited" and post.get("edit_key"):
        data, error = _parse_json_field(post.get("edit_data", ""))
        if not error:
            state = run_state(run)
            current = state.artifacts.get(post["edit_key"])
            type_id = post.get("edit_type") or (current or {}).get("typeId") or "json"
            edit = cmd.WriteArtifact(
                key=post["edit_key"],
                type_id=type_id,
                data=data,
                idempotency_key=post.get("idempotency_key") or None,
                step_id=step_id or None,
            )
    if not error:
        try:
            actions.do_command(
                workspace=run.workspace,
                run_id=run.run_id,
                command=cmd.ResolveGate(
                    step_id=step_id, gate=gate, decision=decision, note=note, checkpoint=checkpoint, edit=edit
                ),
                actor=actor_for(request),
            )
        except actions.ActionError as exc:
            error = f"{exc.code}: {exc.message}"
    run.refresh_from_db()
    state = run_state(run)
    if request.htmx:
        ctx = gate_panel_context(run, state, can_review=True, error=error)
        ctx["oob_parts"] = True
        ctx.update({"layout": graph_context(run, state)["layout"]})
        return render(request, "runs/gate_response.html", ctx)
    if error:
        messages.error(request, error)
    else:
        messages.success(request, f"Gate {gate} on {step_id}: {decision}.")
    return redirect(reverse("runs:detail", args=[run.run_id]) + "#gates")


# --- artifacts ----------------------------------------------------------------------------------


def schema_errors(schema: dict | None, data: Any) -> list[dict[str, str]]:
    """All schema violations of ``data`` as {path, field, message}, in document order."""
    if not schema:
        return []
    validator = Draft202012Validator(schema)
    out = []
    for err in sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path]):
        parts = list(err.absolute_path)
        if err.validator == "required" and isinstance(err.instance, dict):
            # point at the missing property itself
            missing = [p for p in (schema_required_missing(err)) if p]
            parts = parts + missing[:1]
        out.append(
            {
                "path": "/" + "/".join(str(p) for p in parts),
                "field": str(parts[0]) if parts else "",
                "message": err.message,
            }
        )
        if len(out) >= 50:
            break
    return out


def schema_required_missing(err) -> list[str]:
    return [
        name
        for name in (err.validator_value or [])
        if isinstance(err.instance, dict) and name not in err.instance
    ]


SCALAR_TYPES = {"string", "number", "integer", "boolean"}


def simple_form_fields(schema: dict | None) -> list[dict[str, Any]] | None:
    """Fields for a form when the schema is an object of scalar properties; None otherwise."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return None
    props = schema.get("properties")
    if not isinstance(props, dict) or not props:
        return None
    fields = []
    required = set(schema.get("required") or [])
    for name, prop in props.items():
        if not isinstance(prop, dict):
            return None
        ptype = prop.get("type")
        if ptype not in SCALAR_TYPES:
            return None
        fields.append(
            {
                "name": name,
                "type": ptype,
                "required": name in required,
                "enum": prop.get("enum"),
                "title": prop.get("title"),
            }
        )
    return fields


def _coerce_form_value(ftype: str, raw: str) -> tuple[Any, str]:
    if ftype == "boolean":
        return raw in ("on", "true", "1"), ""
    if raw == "":
        return None, ""
    if ftype == "integer":
        try:
            return int(raw), ""
        except ValueError:
            return raw, "Enter a whole number."
    if ftype == "number":
        try:
            value = float(raw)
            return (
                int(value) if value.is_integer() and "." not in raw and "e" not in raw.lower() else value
            ), ""
        except ValueError:
            return raw, "Enter a number."
    return raw, ""


def artifact_versions_by_key(run: Run) -> dict[str, list[dict[str, Any]]]:
    rows = (
        ArtifactVersion.objects.filter(run=run)
        .order_by("key", "version")
        .values("key", "version", "type_id", "seq")
    )
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows[:ARTIFACT_ROWS_LIMIT]:
        out.setdefault(row["key"], []).append(row)
    return out


def artifact_context(
    access: RunAccess,
    key: str | None,
    *,
    text: str | None = None,
    errors: list[dict[str, str]] | None = None,
    form_values: dict[str, Any] | None = None,
    base_version: int | None = None,
    idempotency_key: str | None = None,
    mode: str = "patch",
) -> dict[str, Any]:
    run = access.run
    state = run_state(run)
    versions = artifact_versions_by_key(run)
    keys = list(state.artifacts) or list(versions)
    if key is None and keys:
        key = keys[0]
    latest = state.artifacts.get(key) if key else None
    schema = schema_registry().get(latest["typeId"]) if latest else None
    fields = simple_form_fields(schema)
    data = latest.get("data") if latest else None
    errors = errors or []
    field_errors: dict[str, list[str]] = {}
    for err in errors:
        field_errors.setdefault(err.get("field", ""), []).append(f"{err['path']}: {err['message']}")
    if fields:
        values = form_values if form_values is not None else (data if isinstance(data, dict) else {})
        for f in fields:
            f["value"] = values.get(f["name"]) if isinstance(values, dict) else None
            f["errors"] = field_errors.get(f["name"], [])
    return {
        "run": run,
        "url_id": access.url_id,
        "demo": access.demo,
        "can_edit": access.can_review and not run.is_finished,
        "keys": keys,
        "key": key,
        "latest": latest,
        "versions": versions.get(key, []) if key else [],
        "schema": schema,
        "fields": fields,
        "text": text if text is not None else orjson.dumps(data, option=orjson.OPT_INDENT_2).decode(),
        "errors": errors,
        "field_errors": field_errors,
        "other_errors": [
            e for e in errors if not fields or e.get("field", "") not in {f["name"] for f in fields}
        ],
        "base_version": base_version if base_version is not None else (latest["version"] if latest else 0),
        "idempotency_key": idempotency_key or f"web-{secrets.token_hex(12)}",
        "mode": mode,
        "nav_active": "runs",
        "detail_url": reverse("runs:demo") if access.demo else reverse("runs:detail", args=[run.run_id]),
    }


@run_page
def artifact_editor(request: HttpRequest, access: RunAccess) -> HttpResponse:
    if request.method == "POST":
        return _save_artifact(request, access)
    key = request.GET.get("key") or None
    return render(request, "runs/artifacts.html", artifact_context(access, key))


def _save_artifact(request: HttpRequest, access: RunAccess) -> HttpResponse:
    if access.demo or not request.user.is_authenticated:
        raise Http404("read-only")
    require_action(request, Action.EDIT_ARTIFACT)
    run = access.run
    post = request.POST
    key = post.get("key", "")
    ikey = post.get("idempotency_key", "")[:200] or f"web-{secrets.token_hex(12)}"
    mode = "write" if post.get("mode") == "write" else "patch"
    try:
        base_version = int(post.get("base_version", "0"))
    except ValueError:
        base_version = 0
    state = run_state(run)
    latest = state.artifacts.get(key)
    if latest is None:
        raise Http404("no such artifact")
    schema = schema_registry().get(latest["typeId"])
    fields = simple_form_fields(schema)
    errors: list[dict[str, str]] = []
    form_values: dict[str, Any] | None = None
    text = post.get("data", "")
    data: Any = None
    if fields and post.get("editor") == "form":
        base = dict(latest.get("data") or {}) if isinstance(latest.get("data"), dict) else {}
        form_values = {}
        for f in fields:
            value, problem = _coerce_form_value(f["type"], post.get(f"field_{f['name']}", ""))
            form_values[f["name"]] = value
            if problem:
                errors.append({"path": f"/{f['name']}", "field": f["name"], "message": problem})
            elif value is None and f["type"] != "boolean":
                base.pop(f["name"], None)
            else:
                base[f["name"]] = value
        data = base
        text = orjson.dumps(data, option=orjson.OPT_INDENT_2).decode()
    else:
        data, problem = _parse_json_field(text)
        if problem:
            errors.append({"path": "/", "field": "", "message": problem})
    if not errors:
        errors = schema_errors(schema, data)

    def rerender(status: int = 422) -> HttpResponse:
        ctx = artifact_context(
            access,
            key,
            text=text,
            errors=errors,
            form_values=form_values,
            base_version=base_version,
            idempotency_key=ikey,
            mode=mode,
        )
        return render(request, "runs/artifacts.html", ctx, status=status)

    if errors:
        return rerender()
    if ikey in state.idempotency:
        # A repeated submit of a form that was already saved: the same key answers the same version.
        done = state.idempotency[ikey]
        messages.success(request, f"Saved {done['artifactKey']} v{done['version']}.")
        return redirect(reverse("runs:artifacts", args=[run.run_id]) + f"?key={key}")
    if mode == "patch":
        base_row = ArtifactVersion.objects.filter(run=run, key=key, version=base_version).first()
        base_data = base_row.data.get("data") if base_row else None
        if base_row is None or base_data is None:
            mode = "write"
    try:
        if mode == "patch":
            patch = jsonpatch.make_patch(base_data, data).patch
            command: Any = cmd.PatchArtifact(
                key=key, from_version=base_version, patch=patch, idempotency_key=ikey
            )
        else:
            if base_version != latest["version"]:
                raise actions.ActionError(
                    "PATCH_FAILED",
                    f"artifact {key} is at version {latest['version']}; you edited version {base_version}",
                    "fromVersion",
                )
            command = cmd.WriteArtifact(key=key, type_id=latest["typeId"], data=data, idempotency_key=ikey)
        result = actions.do_command(
            workspace=run.workspace, run_id=run.run_id, command=command, actor=actor_for(request)
        )
    except actions.ActionError as exc:
        path = exc.path or ""
        field_name = path.split(".", 1)[1].split(".")[0].split("[")[0] if path.startswith("data.") else ""
        errors = [{"path": path or "/", "field": field_name, "message": f"{exc.code}: {exc.message}"}]
        return rerender(409 if exc.code in ("PATCH_FAILED", "IDEMPOTENCY_CONFLICT") else 422)
    version = result.state.artifacts.get(key, {}).get("version")
    messages.success(request, f"Saved {key} v{version}.")
    return redirect(reverse("runs:artifacts", args=[run.run_id]) + f"?key={key}")


@run_page
@require_GET
def artifact_diff(request: HttpRequest, access: RunAccess) -> HttpResponse:
    key = request.GET.get("key", "")
    a = _int_param(request.GET, "a", 1, minimum=1)
    b = _int_param(request.GET, "b", None, minimum=1)
    rows = {
        r.version: r
        for r in ArtifactVersion.objects.filter(run=access.run, key=key, version__in=[v for v in (a, b) if v])
    }
    if a not in rows or (b is not None and b not in rows):
        raise Http404("no such version")
    if b is None:
        b = a
    left, right = rows[a].data, rows[b].data
    changes = diff_values(left.get("data"), right.get("data"))
    ctx = artifact_context(access, key)
    ctx.update({"a": a, "b": b, "left": left, "right": right, "changes": changes})
    return render(request, "runs/artifact_diff.html", ctx)


# --- rules --------------------------------------------------------------------------------------


def _rule_order(rules: list[dict]) -> list[dict]:
    """Highest priority first (ties keep their stored order)."""
    return sorted(rules, key=lambda r: -r.get("priority", 0) if isinstance(r.get("priority"), int) else 0)


def rules_context(
    access: RunAccess, *, errors: dict[str, str] | None = None, texts: dict[str, str] | None = None
):
    state = run_state(access.run)
    rule_sets = []
    for rs in state.rule_sets.values():
        rules = []
        for rule in _rule_order(list(rs.get("rules", []))):
            token = f"{rs['id']}::{rule.get('id')}"
            rules.append(
                {
                    "rule": rule,
                    "token": token,
                    "text": (texts or {}).get(token)
                    or orjson.dumps(rule.get("payload"), option=orjson.OPT_INDENT_2).decode(),
                    "error": (errors or {}).get(token, ""),
                }
            )
        rule_sets.append(
            {"set": rs, "rules": rules, "schema_known": schema_registry().has(rs.get("ruleSchemaId", ""))}
        )
    return {
        "run": access.run,
        "url_id": access.url_id,
        "demo": access.demo,
        "can_edit": access.can_review and not access.run.is_finished,
        "rule_sets": rule_sets,
        "nav_active": "runs",
        "detail_url": reverse("runs:demo")
        if access.demo
        else reverse("runs:detail", args=[access.run.run_id]),
    }


@run_page
def rules(request: HttpRequest, access: RunAccess) -> HttpResponse:
    if request.method != "POST":
        return render(request, "runs/rules.html", rules_context(access))
    if access.demo or not request.user.is_authenticated:
        raise Http404("read-only")
    require_action(request, Action.EDIT_RULES)
    run = access.run
    post = request.POST
    rs_id, rule_id, op = post.get("rule_set", ""), post.get("rule", ""), post.get("op", "")
    state = run_state(run)
    current = state.rule_sets.get(rs_id)
    if current is None:
        raise Http404("no such rule set")
    new_set = {**current, "rules": [dict(r) for r in current.get("rules", [])]}
    ordered = _rule_order(new_set["rules"])
    target = next((r for r in new_set["rules"] if r.get("id") == rule_id), None)
    if target is None:
        raise Http404("no such rule")
    token = f"{rs_id}::{rule_id}"
    if op == "toggle":
        target["enabled"] = not target.get("enabled", False)
    elif op in ("up", "down"):
        idx = next(i for i, r in enumerate(ordered) if r.get("id") == rule_id)
        other_idx = idx - 1 if op == "up" else idx + 1
        if 0 <= other_idx < len(ordered):
            other = next(r for r in new_set["rules"] if r.get("id") == ordered[other_idx].get("id"))
            a, b = target.get("priority", 0), other.get("priority", 0)
            if a == b:
                a, b = (b + 1, b) if op == "up" else (b - 1, b)
                target["priority"], other["priority"] = a, b
            else:
                target["priority"], other["priority"] = b, a
    elif op == "edit":
        payload, problem = _parse_json_field(post.get("payload", ""))
        if not problem:
            schema_id = current.get("ruleSchemaId", "")
            errs = schema_errors(schema_registry().get(schema_id), payload)
            if errs:
                problem = "; ".join(f"{e['path']}: {e['message']}" for e in errs[:5])
        if problem:
            ctx = rules_context(access, errors={token: problem}, texts={token: post.get("payload", "")})
            return render(request, "runs/rules.html", ctx, status=422)
        target["payload"] = payload
        label = post.get("label")
        if label is not None and label.strip():
            target["label"] = label.strip()[:200]
    else:
        return HttpResponseBadRequest("unknown operation")
    try:
        actions.do_command(
            workspace=run.workspace,
            run_id=run.run_id,
            command=cmd.ChangeRuleSet(rule_set=new_set),
            actor=actor_for(request),
        )
    except actions.ActionError as exc:
        ctx = rules_context(access, errors={token: f"{exc.code}: {exc.message}"})
        return render(request, "runs/rules.html", ctx, status=422)
    messages.success(request, f"Rule set {rs_id} saved.")
    return redirect(reverse("runs:rules", args=[run.run_id]) + f"#rule-{rule_id}")


# --- telemetry ledger ----------------------------------------------------------------------------


LEDGER_ROLLUPS = [
    ("byProvider", "Provider"),
    ("byModel", "Model"),
    ("byProviderModel", "Provider / model"),
    ("byStep", "Step"),
    ("byUser", "User"),
    ("byTenant", "Tenant"),
    ("byPlan", "Plan"),
]


def _ledger_tables(ledger: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": name, "title": title, "rows": ledger.get(name, [])} for name, title in LEDGER_ROLLUPS]


def run_ledger_data(run: Run) -> tuple[dict[str, Any], dict[str, str]]:
    from runs.protocol.telemetry import LedgerAccumulator

    acc = LedgerAccumulator(keep_entries=False)
    doc = run.run_doc
    acc.add_run(doc)
    rows = Event.objects.filter(run=run, type="model_io").order_by("seq").values_list("body", flat=True)
    for body in rows.iterator(chunk_size=2000):
        acc.add_event(doc, loads(body))
    exact = {cur: format(v, "f") for cur, v in acc.exact_cost_by_currency().items()}
    return acc.result(strict=False), exact


def _step_chart(ledger: dict[str, Any]):
    rows = []
    for item in ledger.get("byStep", []):
        totals = item["totals"]
        costs = totals.get("costByCurrency") or {}
        currency = next(iter(costs), "")
        rows.append(
            {
                "label": item.get("label") or item.get("key"),
                "cost": float(costs.get(currency, 0) or 0),
                "currency": currency,
                "tokens": totals.get("totalTokens", 0) or 0,
            }
        )
    return bar_chart(rows)


@run_page
@require_GET
def run_ledger(request: HttpRequest, access: RunAccess) -> HttpResponse:
    ledger, exact = run_ledger_data(access.run)
    ctx = {
        "run": access.run,
        "url_id": access.url_id,
        "demo": access.demo,
        "ledger": ledger,
        "exact_costs": exact,
        "tables": _ledger_tables(ledger),
        "chart": _step_chart(ledger),
        "nav_active": "runs",
        "detail_url": reverse("runs:demo")
        if access.demo
        else reverse("runs:detail", args=[access.run.run_id]),
    }
    return render(request, "runs/run_ledger.html", ctx)


def _parse_day(text: str) -> date | None:
    try:
        return date.fromisoformat(text) if text else None
    except ValueError:
        return None


@login_required
@require_GET
def workspace_ledger(request: HttpRequest) -> HttpResponse:
    """Ledger over every run of the workspace started within a date range (default: last 30 days)."""
    from runs.protocol.telemetry import LedgerAccumulator

    workspace = current_workspace(request)
    today = timezone.now().date()
    start = _parse_day(request.GET.get("from", "")) or today - timedelta(days=30)
    end = _parse_day(request.GET.get("to", "")) or today
    if end < start:
        start, end = end, start
    tz = timezone.get_current_timezone()
    lo = datetime.combine(start, time.min, tzinfo=tz)
    hi = datetime.combine(end + timedelta(days=1), time.min, tzinfo=tz)
    runs = Run.objects.for_workspace(workspace).filter(started_at__gte=lo, started_at__lt=hi)
    docs = {rid: loads(doc) for rid, doc in runs.values_list("id", "doc")}
    acc = LedgerAccumulator(keep_entries=False)
    for doc in docs.values():
        acc.add_run(doc)
    events = (
        Event.objects.filter(run__in=runs.values("pk"), type="model_io")
        .order_by("run_id", "seq")
        .values_list("run_id", "body")
    )
    for run_id, body in events.iterator(chunk_size=2000):
        acc.add_event(docs[run_id], loads(body))
    ledger = acc.result(strict=False)
    ctx = {
        "ledger": ledger,
        "exact_costs": {cur: format(v, "f") for cur, v in acc.exact_cost_by_currency().items()},
        "tables": _ledger_tables(ledger),
        "chart": _step_chart(ledger),
        "start": start,
        "end": end,
        "run_count": len(docs),
        "nav_active": "ledger",
    }
    return render(request, "runs/ledger.html", ctx)


# --- import ---------------------------------------------------------------------------------------


def _import_dir() -> Path:
    path = Path(settings.VAR_DIR) / "imports"
    path.mkdir(parents=True, exist_ok=True)
    return path


IMPORT_SESSION_KEY = "workbench_imports"


def import_stages(result: Any) -> list[dict[str, str]]:
    """check_bundle's verdict as the stages it runs in order: JSON and version, schema, integrity, structure."""
    parse_codes = ("INVALID_JSON", "UNSUPPORTED_PROTOCOL_VERSION")
    stages = []
    parse_failed = result.integrity == "unchecked" and result.code in parse_codes
    stages.append({"name": "JSON and protocol version", "state": "failed" if parse_failed else "ok"})
    if parse_failed:
        schema = "skipped"
    elif result.integrity == "unchecked" and not result.ok:
        schema = "failed"
    else:
        schema = "ok"
    stages.append({"name": "Schema", "state": schema})
    integrity = {"valid": "ok", "mismatch": "failed", "missing": "failed"}.get(result.integrity, "skipped")
    stages.append(
        {"name": "Integrity (SHA-256 over canonical JSON)", "state": integrity, "detail": result.integrity}
    )
    structure = "skipped" if result.integrity != "valid" else ("ok" if result.ok else "failed")
    stages.append({"name": "Structure (steps, events, versions)", "state": structure})
    return stages


@login_required
def import_bundle(request: HttpRequest) -> HttpResponse:
    """Upload a bundle, see the verification (integrity, schema, structure), then confirm the import."""
    from runs.protocol.bundle import check_bundle

    workspace = current_workspace(request)
    ctx: dict[str, Any] = {
        "nav_active": "import",
        "can_import": may(request, Action.IMPORT_BUNDLE),
    }
    if request.method != "POST":
        return render(request, "runs/import.html", ctx)
    require_action(request, Action.IMPORT_BUNDLE)
    pending: dict[str, str] = request.session.get(IMPORT_SESSION_KEY, {})
    if request.POST.get("confirm"):
        token = request.POST.get("token", "")
        name = pending.get(token)
        if not name:
            messages.error(request, "That upload has expired; upload the bundle again.")
            return redirect("runs:import")
        path = _import_dir() / name
        try:
            data = path.read_bytes()
        except OSError:
            messages.error(request, "That upload has expired; upload the bundle again.")
            return redirect("runs:import")
        try:
            run = actions.do_import_bundle(
                workspace=workspace,
                data=data,
                actor=actor_for(request),
                as_new_id=bool(request.POST.get("as_new_id")),
            )
        except actions.ActionError as exc:
            ctx.update(
                {"import_error": f"{exc.code}: {exc.message}", "token": token, "check": check_bundle(data)}
            )
            return render(
                request, "runs/import.html", ctx, status=409 if exc.code == "RUN_ID_COLLISION" else 422
            )
        pending.pop(token, None)
        request.session[IMPORT_SESSION_KEY] = pending
        path.unlink(missing_ok=True)
        messages.success(request, f"Imported run {run.run_id}.")
        return redirect("runs:detail", run.run_id)
    upload = request.FILES.get("bundle")
    if upload is None:
        ctx["upload_error"] = "Choose a bundle file (.json) to upload."
        return render(request, "runs/import.html", ctx, status=422)
    data = upload.read()
    result = check_bundle(data)
    ctx["check"] = result
    ctx["stages"] = import_stages(result)
    ctx["filename"] = upload.name
    ctx["size"] = len(data)
    if result.ok:
        token = secrets.token_urlsafe(16)
        name = f"{token}.json"
        (_import_dir() / name).write_bytes(data)
        pending[token] = name
        request.session[IMPORT_SESSION_KEY] = dict(list(pending.items())[-5:])
        ctx["token"] = token
        bundle = result.bundle or {}
        run_doc = bundle.get("run") or {}
        ctx["summary"] = {
            "run_id": run_doc.get("id"),
            "workflow": run_doc.get("workflowId"),
            "status": run_doc.get("status"),
            "events": len(bundle.get("trace") or []),
            "artifacts": len(bundle.get("artifacts") or []),
            "rule_sets": len(bundle.get("ruleSets") or []),
            "exists": Run.objects.by_run_id(workspace, str(run_doc.get("id"))).exists(),
        }
    return render(request, "runs/import.html", ctx, status=200 if result.ok else 422)


# --- members (owners) ------------------------------------------------------------------------------


@login_required
def members(request: HttpRequest) -> HttpResponse:
    from runs.workspaces import add_member

    membership = require_action(request, Action.MANAGE_MEMBERS)
    workspace = membership.workspace
    if request.method == "POST":
        op = request.POST.get("op", "")
        username = request.POST.get("username", "").strip()
        role = request.POST.get("role", "")
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            messages.error(request, f"No user named {username!r}.")
        elif op == "remove":
            if user == request.user:
                messages.error(request, "You cannot remove yourself.")
            else:
                Membership.objects.filter(workspace=workspace, user=user).delete()
                messages.success(request, f"Removed {username}.")
        elif role in Role.values:
            if user == request.user and role != Role.OWNER:
                messages.error(request, "You cannot demote yourself.")
            else:
                add_member(workspace, user, role)
                messages.success(request, f"{username} is now {role}.")
        else:
            messages.error(request, "Choose a role.")
        return redirect("runs:members")
    rows = list(
        Membership.objects.filter(workspace=workspace).select_related("user").order_by("user__username")
    )
    return render(
        request,
        "runs/members.html",
        {"rows": rows, "roles": Role.choices, "workspace": workspace, "nav_active": "members"},
    )
