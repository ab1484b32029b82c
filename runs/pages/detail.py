"""The run page, its timeline and fragments, the per-event state diff, export and cancel."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from runs import actions
from runs.actions.permissions import Action
from runs.actions.signing import do_export_bundle
from runs.engine.state import RunState
from runs.ids import content_disposition
from runs.models import Run, RunStatus
from runs.pages.access import RunAccess, run_page, run_write
from runs.pages.params import int_param
from runs.presenters.timeline import changed_top_keys, diff_values
from runs.protocol.redaction import POLICIES as REDACTION_POLICIES
from runs.selectors.annotations import run_page_preview
from runs.selectors.runs import (
    TIMELINE_PAGE,
    TimelineFilters,
    event_at,
    run_state,
    state_at,
)
from runs.selectors.signing import import_provenance
from runs.web.partials import (
    event_detail_context,
    gate_panel_context,
    graph_context,
    lineage_context,
    status_context,
    timeline_context,
    waterfall_context,
)
from runs.web.request import (
    HtmxHttpRequest,
    actor_for,
)
from runs.web.trace import level_context, list_context, span_detail_context, trace_context


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
    spans_after: int = 0,
    expanded: int | None = None,
    trace: dict[str, Any] | None = None,
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
        "annotations": run_page_preview(run, doc),
        "provenance": import_provenance(run),
    }
    ctx.update(lineage_context(run))
    ctx.update(graph_context(run, state, url_id=url_id))
    ctx.update(gate_panel_context(run, state, url_id=url_id, can_review=can_review))
    ctx.update(
        timeline_context(run, url_id=url_id, after=after, before=before, filters=filters, expanded=expanded)
    )
    # The trace view (span tree and detail pane); the older waterfall of 200-span windows on
    # ?view=waterfall (or a ?spans_after= link).
    trace = trace or {}
    if trace.get("waterfall") or spans_after:
        ctx["spans"] = waterfall_context(run, url_id=url_id, after=spans_after)
    else:
        ctx["trace"] = trace_context(
            run, url_id=url_id, span=trace.get("span"), view=trace.get("view", ""), q=trace.get("q", "")
        )
    return ctx


def trace_params(params: Any) -> dict[str, Any]:
    """The trace view's state in a run page URL: ?span=<seq> ?trace=failed ?trace_q= ?view=waterfall."""
    return {
        "span": int_param(params, "span", None, minimum=1),
        "view": "failed" if params.get("trace") == "failed" else "",
        "q": params.get("trace_q", "").strip()[:200],
        "waterfall": params.get("view") == "waterfall",
    }


def _has_window(request: HttpRequest) -> bool:
    return any(request.GET.get(k) for k in ("at", "after", "before"))


def _timeline_window(request: HttpRequest) -> tuple[int, int | None]:
    at = int_param(request.GET, "at", None, minimum=1)
    if at is not None:
        return max(0, at - 11), None
    return int_param(request.GET, "after", 0) or 0, int_param(request.GET, "before", None, minimum=1)


@run_page
@require_GET
@vary_on_headers("HX-Request")
def run_detail(request: HttpRequest, access: RunAccess) -> HttpResponse:
    after, before = _timeline_window(request)
    run = access.run
    if not _has_window(request) and run.status == RunStatus.RUNNING and run.last_seq > TIMELINE_PAGE:
        before = run.last_seq + 1  # a running run opens at its tail, where live rows arrive
    ctx = run_detail_context(
        access.run,
        url_id=access.url_id,
        can_review=access.can_review,
        can_cancel=access.can_cancel,
        demo=access.demo,
        after=after,
        before=before,
        filters=TimelineFilters.from_query(request.GET),
        spans_after=int_param(request.GET, "spans_after", 0) or 0,
        expanded=int_param(request.GET, "at", None, minimum=1),
        trace=trace_params(request.GET),
    )
    return render(request, "runs/run_detail.html", ctx)


@run_page
@require_GET
@vary_on_headers("HX-Request")
def timeline(request: HtmxHttpRequest, access: RunAccess) -> HttpResponse:
    after, before = _timeline_window(request)
    limit = int_param(request.GET, "limit", TIMELINE_PAGE, minimum=1) or TIMELINE_PAGE
    ctx = timeline_context(
        access.run,
        url_id=access.url_id,
        after=after,
        before=before,
        filters=TimelineFilters.from_query(request.GET),
        limit=limit,
        expanded=int_param(request.GET, "at", None, minimum=1),
    )
    if request.htmx:
        response = render(request, "runs/run_detail.html#timeline_page", ctx)
        # the view's state (filters, search, window, jump) in the address bar, as a run page URL
        query = request.GET.copy()
        query.pop("limit", None)
        response["HX-Push-Url"] = f"{ctx['detail_url']}?{query.urlencode()}#timeline"
        return response
    # Without htmx: the detail page at that window (keeps links working with JS off).
    return redirect(f"{ctx['detail_url']}?{request.GET.urlencode()}#timeline")


@run_page
@require_GET
@vary_on_headers("HX-Request")
def event_detail(request: HtmxHttpRequest, access: RunAccess, seq: int) -> HttpResponse:
    """An opened timeline row: the event's JSON, its state link and its actions (htmx); without
    htmx, the run page opened at that event."""
    if not request.htmx:
        return redirect(f"{_detail_url(access.url_id)}?at={seq}#seq-{seq}")
    upto = int_param(request.GET, "upto", None, minimum=1)
    ctx = event_detail_context(access.run, seq, url_id=access.url_id, upto=upto)
    if ctx is None:
        raise Http404("no such event")
    return render(request, "runs/run_detail.html#event_detail", ctx)


def _detail_url(url_id: str) -> str:
    return reverse("runs:demo") if url_id == "demo" else reverse("runs:detail", args=[url_id])


@run_page
@require_GET
@vary_on_headers("HX-Request")
def span_tree(request: HtmxHttpRequest, access: RunAccess) -> HttpResponse:
    """One page of the trace view's tree (htmx): the children of the span started at ``?span=``
    (the roots without it) from ``?after=``, or flat, the failed spans (``?view=failed``) or a
    text search (``?q=``). Without htmx, the run page with that view."""
    params = request.GET
    span = int_param(params, "span", None, minimum=1)
    after = int_param(params, "after", 0) or 0
    q = params.get("q", "").strip()[:200]
    view = "failed" if params.get("view") == "failed" else ""
    if not request.htmx:
        query = {"trace": view} if view else {"trace_q": q} if q else {"span": span} if span else {}
        return redirect(f"{_detail_url(access.url_id)}?{urlencode(query)}#trace")
    if q or view:
        ctx = list_context(access.run, url_id=access.url_id, view=view, q=q, after=after)
    else:
        depth = int_param(params, "depth", 1, minimum=1) or 1
        found = level_context(access.run, url_id=access.url_id, span=span, after=after, depth=min(depth, 200))
        if found is None:
            raise Http404("no such span")
        ctx = found
    return render(request, "runs/trace.html#nodes", ctx)


@run_page
@require_GET
@vary_on_headers("HX-Request")
def span_detail(request: HtmxHttpRequest, access: RunAccess, seq: int) -> HttpResponse:
    """The trace view's detail pane for the span started at ``seq`` (htmx); without htmx, the
    run page with that span selected."""
    if not request.htmx:
        return redirect(f"{_detail_url(access.url_id)}?span={seq}#trace")
    ctx = span_detail_context(access.run, seq, url_id=access.url_id)
    if ctx is None:
        raise Http404("no such span")
    return render(request, "runs/trace.html#detail", {"d": ctx})


@run_page
@require_GET
@vary_on_headers("HX-Request")
def spans(request: HtmxHttpRequest, access: RunAccess) -> HttpResponse:
    """One window of the span waterfall (htmx); without htmx, the run page at that window."""
    after = int_param(request.GET, "after", 0) or 0
    if not request.htmx:
        url = (
            reverse("runs:demo") if access.url_id == "demo" else reverse("runs:detail", args=[access.url_id])
        )
        return redirect(f"{url}?spans_after={after}#spans" if after else f"{url}#spans")
    ctx = waterfall_context(access.run, url_id=access.url_id, after=after)
    return render(request, "runs/run_detail.html#waterfall", {"spans": ctx})


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
    if seq < 1 or seq > run.last_seq:
        raise Http404("no such event")
    event = event_at(run, seq)
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
        "event": event,
        "changes": changes,
        "sides": sides,
        "after_state": after,
        "detail_url": reverse("runs:demo") if url_id == "demo" else reverse("runs:detail", args=[url_id]),
    }


@run_page
@require_GET
@vary_on_headers("HX-Request")
def event_state(request: HtmxHttpRequest, access: RunAccess, seq: int) -> HttpResponse:
    ctx = event_state_context(access.run, seq, url_id=access.url_id)
    if request.htmx:
        return render(request, "runs/event_state.html#state_diff", ctx)
    return render(request, "runs/event_state.html", {**ctx, "demo": access.demo, "nav_active": "runs"})


@run_page
@require_GET
def export_bundle(request: HttpRequest, access: RunAccess) -> HttpResponse:
    """The run's signed bundle; ``?redact=user|mask|drop`` its redacted user bundle (as the API's);
    ``?detached=1`` the signature alone (``<file>.dsse.json``)."""
    redact = request.GET.get("redact") or None
    if redact is not None and redact not in REDACTION_POLICIES:
        return HttpResponseBadRequest(
            f"INVALID_INPUT: unknown redaction policy; expected one of {', '.join(REDACTION_POLICIES)}",
            content_type="text/plain; charset=utf-8",
        )
    exported_by = actor_for(request) if request.user.is_authenticated else "anonymous:public-demo"
    export = do_export_bundle(access.run, exported_by=exported_by, redact=redact)
    suffix = f".{redact}" if redact else ""
    name = f"{access.run.run_id}{suffix}.bundle.json"
    if request.GET.get("detached") in ("1", "true"):
        response = HttpResponse(export.envelope_bytes, content_type="application/json")
        response["Content-Disposition"] = content_disposition(f"{name}.dsse.json")
        return response
    response = HttpResponse(export.data, content_type="application/json")
    response["Content-Disposition"] = content_disposition(name)
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
