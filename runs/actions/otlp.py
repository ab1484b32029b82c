"""OTLP ingest, the write side: spans of any instrumentation appended to runs, runs created per
trace, content log records kept until their span arrives, and the quiet-period end of a run.

Routing (``runs.protocol.otlp_map.route_spans``): a span goes to the run it names (span
attribute ``workbench.run.id``, a span of its trace naming one, the resource attribute, the
``X-Workbench-Run`` header); otherwise its trace becomes its own run, created on first sight
(titled from the root span and ``service.name``, tagged ``service:<name>`` and
``session:<id>``, ``run.metadata.otel.traceId``) and found again by trace id
(:class:`runs.models.OtelTrace`) when later batches of the trace arrive.

Per request: the batch is mapped once, model calls are priced (``runs.selectors.prices``), the
runs the request creates are checked in memory and stored together (one transaction, one insert
of their rows, one of their trace rows, one of all their events, one notification:
``_create_runs``), and each run that existed gets ONE transaction (lock, skip what an exporter
sent again, check, bulk insert through the Appender, projection). A span that cannot be mapped,
names a run the workspace does not have, or that the engine refuses (a run already ended, say)
is refused on its own; the others land. Ingested model calls do not fill the response cache
(``Appender(fill_cache=False)``): an instrumentation's captured request is not one a replay sends.

Content log records (``POST /v1/logs``) come in their own requests. A record whose span has not
arrived yet is kept (:class:`runs.models.OtelPendingLog`) and joined onto the span when it
arrives (the contrib instrumentation emits its log events during the call, so with the SDK's
batch processors they reach us first); a record whose span was already ingested is refused
(a span's events are written once and never rewritten) and counted in the logs response's
``partial_success``, so the exporter's user sees it. Kept records older than
``WORKBENCH_OTLP_PENDING_LOG_SECONDS`` are dropped by the sweep.

A run created from OTLP ends when its root span has ended and no span of the trace arrived for
``WORKBENCH_OTLP_QUIET_SECONDS``: completed, or failed when the root span's status is error
(:func:`do_end_quiet_traces`, run by ``manage.py otlp_sweep`` and in the embedded profile by a
periodic check in the server process). Runs named by the application are never ended here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from runs.actions import budgets, rollups
from runs.actions.core import (
    ActionError,
    Appender,
    engine_context,
    insert_new_rows,
    load_state,
    lock_run,
    new_instance,
    new_run_row,
    save_new_run,
    save_new_runs,
    update_projection,
)
from runs.actions.notify import RunChange, notify_many_on_commit, notify_on_commit
from runs.actions.runs import do_commands, do_set_run_title
from runs.engine import commands as cmd
from runs.engine.check import append_in_place
from runs.engine.commands import Context
from runs.engine.errors import EngineError
from runs.engine.lifecycle import new_run, with_title
from runs.models import OtelPendingLog, OtelTrace, Run, Workspace, held_event_ids
from runs.protocol.errors import ProtocolError
from runs.protocol.otlp_map import (
    MappedBatch,
    Route,
    TraceInfo,
    content_log_name,
    group_mapped,
    inherited_runs,
    join_content_logs,
    map_spans,
    reroute_unknown,
    route_spans,
)
from runs.protocol.otlp_semconv_in import event_id, legacy_event_id
from runs.protocol.values import dumps, loads, new_id
from runs.selectors.prices import price_book

OTEL_WORKFLOW = {
    "id": "otel",
    "version": 1,
    "title": "OpenTelemetry trace",
    "steps": [{"id": "trace", "title": "Trace", "gatePolicy": "AUTO"}],
    "edges": [],
}
_EVENT_INDEX = re.compile(r"^events\[(\d+)\]")
_TITLE_MAX = 200


@dataclass
class IngestReport:
    accepted: int = 0
    rejected: int = 0
    message: str | None = None
    run_ids: list[str] = field(default_factory=list)  # the runs that got events
    created: list[str] = field(default_factory=list)  # the runs created for their trace

    def refuse(self, count: int, why: str) -> None:
        if count <= 0:
            return
        self.rejected += count
        self.accepted -= count
        note = f"{count} span(s): {why}"
        self.message = note if not self.message else f"{self.message}; {note}"


# --------------------------------------------------------------------------------------------
# Spans


def do_ingest_spans(
    *, workspace: Workspace, spans: Sequence[dict], header_run_id: str | None = None, actor: str = "otlp"
) -> IngestReport:
    """Route, map, price and append one OTLP request's spans (see the module's docstring)."""
    spans = _with_pending_logs(workspace, spans)
    routes, traces = route_spans(spans, header_run_id)
    known, to_create, run_ids = _resolve_runs(workspace, routes)
    batch = map_spans(spans, run_ids, validate=True, checked=True)  # route_spans checked each span
    return _store_batch(workspace, batch, traces, known, to_create, actor)


def do_ingest_mapped(
    *,
    workspace: Workspace,
    spans: Sequence[dict],
    mapped: Sequence[Sequence | None],
    header_run_id: str | None = None,
    actor: str = "otlp",
) -> IngestReport:
    """:func:`do_ingest_spans` for spans mapped before (the OTLP queue's receiver maps each body
    as it checks it): ``spans`` as :func:`runs.protocol.otlp_map.route_spans` reads them (see
    ``routing_facts``), ``mapped[i]`` span i's ``(time, event)`` pairs, validated when mapped
    (None: refused then). Routed together, so a trace's runs are found as for the spans
    themselves; each event gets its span's run id. Content logs waiting for these spans are not
    joined here: the caller checks :func:`pending_logs_for` first and maps the spans itself when
    some wait."""
    routes, traces = route_spans(spans, header_run_id)
    known, to_create, run_ids = _resolve_runs(workspace, routes)
    batch = group_mapped(mapped, run_ids)
    return _store_batch(workspace, batch, traces, known, to_create, actor)


def pending_logs_for(workspace: Workspace, trace_ids: set[str]) -> bool:
    """Whether content log records wait for a span of one of these traces."""
    return bool(trace_ids) and (
        OtelPendingLog.objects.filter(workspace=workspace).exists()
        and OtelPendingLog.objects.filter(workspace=workspace, trace_id__in=trace_ids).exists()
    )


def _resolve_runs(
    workspace: Workspace, routes: Sequence[Route | None]
) -> tuple[dict[str, OtelTrace], dict[str, str], list[str | None]]:
    """The traces that have their run, the runs to create (trace id -> new run id) and each
    span's run id."""
    inherited = inherited_runs(routes)
    if inherited:
        held = set(
            Run.objects.filter(workspace=workspace, run_id__in=inherited).values_list("run_id", flat=True)
        )
        routes = reroute_unknown(routes, held)
    new_traces = {r.trace_id for r in routes if r is not None and r.run_id is None}
    known = _known_traces(workspace, new_traces)
    to_create: dict[str, str] = {}  # trace id -> run id chosen for the new run
    run_ids: list[str | None] = []
    for route in routes:
        run_ids.append(_run_id_for(route, known, to_create))
    return known, to_create, run_ids


def _store_batch(
    workspace: Workspace,
    batch: MappedBatch,
    traces: dict[str, TraceInfo],
    known: dict[str, OtelTrace],
    to_create: dict[str, str],
    actor: str,
) -> IngestReport:
    """Price and store a mapped batch: the new runs in one transaction, then each existing run's
    events in its own, then the traces' rows."""
    report = IngestReport(accepted=batch.accepted_spans, rejected=batch.rejected_spans, message=batch.message)
    if not batch.events_by_run:
        return report
    responses = []  # the model calls to price (one pass over the events)
    for run_id, events in batch.events_by_run.items():
        events = batch.events_by_run[run_id] = _first_of_each(events)
        responses += [e for e in events if e["type"] == "model_io" and e.get("direction") == "response"]
    if responses:
        book = price_book(workspace)
        for event in responses:
            book.price_event(event)
    creating = {run_id: trace_id for trace_id, run_id in to_create.items()}
    now = timezone.now()
    new = [(run_id, events) for run_id, events in batch.events_by_run.items() if run_id in creating]
    if new:
        created = _create_runs(
            workspace,
            [(run_id, events, traces[creating[run_id]]) for run_id, events in new],
            actor,
            report,
            now,
        )
        report.run_ids += created
        report.created += created
    retitle = _titles_due(traces, known)
    retitled: set[str] = set()  # runs whose title their append's transaction set
    touch = _touches(traces, known, now)
    touched: set[str] = set()  # traces whose row their run's append transaction updated
    for run_id, events in batch.events_by_run.items():
        if run_id not in creating and _append(
            workspace,
            run_id,
            events,
            None,
            actor,
            report,
            now,
            title=retitle.get(run_id),
            retitled=retitled,
            touch=touch.get(run_id),
            touched=touched,
        ):
            report.run_ids.append(run_id)  # one transaction per existing run
    _touch_traces(workspace, traces, known, now, retitled, touched)
    # priced calls past the workspace's monthly cap: recorded as always, the month's alert raised
    budgets.alert_after_reported(workspace, responses, source="OTLP")
    return report


def _known_traces(workspace: Workspace, trace_ids: set[str]) -> dict[str, OtelTrace]:
    """The traces of ``trace_ids`` that already have their run."""
    if not trace_ids:
        return {}
    rows = (
        OtelTrace.objects.filter(workspace=workspace, trace_id__in=trace_ids)
        .select_related("run")
        .only("pk", "trace_id", "title", "run__run_id", "run__title")  # not the run's state
    )
    return {row.trace_id: row for row in rows}


def _create_runs(
    workspace: Workspace,
    new: list[tuple[str, list[dict], TraceInfo]],
    actor: str,
    report: IngestReport,
    now: datetime,
    *,
    again: bool = True,
) -> list[str]:
    """The runs this request creates, one per new trace, in ONE transaction: each run's spans are
    checked against its new state in memory (a span the engine refuses is dropped on its own),
    then the rows go in together (:func:`save_new_runs`, the trace rows, one notification).
    When another request created one of these traces' runs meanwhile (the trace row is unique),
    the batch rolls back and :func:`_after_conflict` stores it (``again``: it may create the
    others together once more)."""
    ctx = engine_context()
    prepared = []
    for run_id, events, info in new:
        appender = _prepare_new_run(workspace, run_id, events, info, actor, ctx, report)
        if appender is not None:
            prepared.append((appender, info))
    if not prepared:
        return []
    # in trace id order: two storers creating some of the same traces take their unique keys in one
    # order, so one waits for the other's commit (then _after_conflict) and none deadlocks
    prepared.sort(key=lambda pair: pair[1].trace_id)
    try:
        with rollups.deferred():  # the workspace's rollup rows written last, locked only till the commit
            save_new_runs([appender for appender, _ in prepared])
            # OtelTrace.objects.bulk_create without the ORM's insert compiler (core.insert_new_rows)
            insert_new_rows(OtelTrace, [_trace_row(workspace, a.run, info, now) for a, info in prepared])
            notify_many_on_commit(
                [
                    RunChange.of(a.run, a.first_seq, a.seq, events=a.events, actor=actor, with_row=True)
                    for a, _ in prepared
                ]
            )
    except IntegrityError:
        return _after_conflict(workspace, prepared, actor, report, now, again=again)
    return [appender.run.run_id for appender, _ in prepared]


def _after_conflict(
    workspace: Workspace,
    prepared: list[tuple[Appender, TraceInfo]],
    actor: str,
    report: IngestReport,
    now: datetime,
    *,
    again: bool,
) -> list[str]:
    """Another writer created some of these traces' runs meanwhile (two storers meet at the trace
    their batches share): the other runs are created together again, once (with the events
    already checked), and the taken traces go one at a time onto the runs that exist. Redoing
    the whole batch one run at a time cost the storer that met the conflict 2-2.5x its CPU per
    span (bench_otlp_streams). A second conflict, or nothing taken: every run one at a time."""
    traces = [info.trace_id for _, info in prepared]
    taken = set(
        OtelTrace.objects.filter(workspace=workspace, trace_id__in=traces).values_list("trace_id", flat=True)
    )
    created: list[str] = []
    alone = prepared
    if again and taken and len(taken) < len(prepared):
        rest = [(a.run.run_id, a.events, info) for a, info in prepared if info.trace_id not in taken]
        created = _create_runs(workspace, rest, actor, report, now, again=False)
        alone = [(a, info) for a, info in prepared if info.trace_id in taken]
    with rollups.deferred():  # one commit still: each run in its own savepoint, the rollups last
        for appender, info in alone:
            if _append(workspace, appender.run.run_id, appender.events, info, actor, report, now):
                created.append(appender.run.run_id)
    return created


def _prepare_new_run(
    workspace: Workspace,
    run_id: str,
    events: list[dict],
    info: TraceInfo,
    actor: str,
    ctx: Context,
    report: IngestReport,
) -> Appender | None:
    """A new run's row and state with ``events`` applied (nothing stored yet), or None when the
    engine refuses the run's spans as a whole. A refused span is dropped and the rest tried
    again from the start (the state is new: nothing to undo), at most three spans per run."""
    dropped: dict[str | None, str] = {}  # correlation id (None: the spans without one) -> why
    for _attempt in range(4):
        todo = [e for e in events if e.get("correlationId") not in dropped] if dropped else events
        try:
            state = new_run(
                ctx=ctx,
                workflow=OTEL_WORKFLOW,
                run_id=run_id,
                metadata=info.metadata,
                tags=info.tags,
                title=_title(info),
            )
            appender = Appender(
                new_run_row(workspace=workspace, state=state, actor=actor, projection=False),
                state,
                actor,
                fill_cache=False,
            )
            append_in_place(state, todo, ctx, on_applied=appender.record, shape_checked=True)
            break
        except (EngineError, ProtocolError) as exc:
            found = _EVENT_INDEX.match(getattr(exc, "path", "") or "")
            if found is None or len(dropped) >= 3:
                report.refuse(_span_count(todo), exc.message)
                return None
            dropped[todo[int(found.group(1))].get("correlationId")] = exc.message
    else:
        report.refuse(_span_count(todo), "refused by the run")
        return None
    for why in dict.fromkeys(dropped.values()):
        report.refuse(sum(1 for w in dropped.values() if w == why), why)
    return appender


def _trace_row(workspace: Workspace, run: Run, info: TraceInfo, now: datetime) -> OtelTrace:
    return new_instance(
        OtelTrace,
        workspace=workspace,
        trace_id=info.trace_id,
        run=run,
        session_id=(info.session_id or "")[:200],
        title=_title(info),
        root_status=info.root_status or "",
        root_ended=info.root_span_id is not None,
        last_span_at=now,
    )


def _run_id_for(route: Route | None, known: dict[str, OtelTrace], to_create: dict[str, str]) -> str | None:
    if route is None:
        return None
    if route.run_id is not None:
        return route.run_id
    row = known.get(route.trace_id)
    if row is not None:
        return row.run.run_id
    if route.trace_id not in to_create:
        to_create[route.trace_id] = new_id("run")
    return to_create[route.trace_id]


def _first_of_each(events: list[dict]) -> list[dict]:
    """The events without repeats of an event id (a span's event ids come from its trace and span
    ids): a span sent twice in one request is stored once, as when an exporter sends it again in
    a later request, and its first copy is not lost to the engine's refusal of the second."""
    ids = {e["id"] for e in events}
    if len(ids) == len(events):
        return events
    seen: set[str] = set()
    out = []
    for event in events:
        if event["id"] not in seen:
            seen.add(event["id"])
            out.append(event)
    return out


def _span_count(events: Sequence[dict]) -> int:
    return len({e.get("correlationId") for e in events})


def _append(
    workspace: Workspace,
    run_id: str,
    events: list[dict],
    create: TraceInfo | None,
    actor: str,
    report: IngestReport,
    now: datetime,
    *,
    title: str | None = None,
    retitled: set[str] | None = None,
    touch: list[tuple[OtelTrace, dict[str, Any]]] | None = None,
    touched: set[str] | None = None,
) -> bool:
    """One transaction for the run: create it (``create``) or lock it, skip events already held
    (an exporter's retry), check and append the rest. A span the engine refuses is dropped and
    the rest tried again (at most three times); a run that is missing refuses all its spans.
    ``title``: the run's new title (its root span arrived, :func:`_titles_due`), set in the same
    transaction (``retitled`` gets the run id when it was). ``touch``: the run's trace rows and
    their quiet-clock changes (:func:`_touches`), stored in the same transaction too (``touched``
    gets their trace ids once committed; :func:`_touch_traces` does the others)."""
    dropped: dict[str | None, str] = {}  # correlation id (None: the spans without one) -> why
    for _attempt in range(4):
        todo = [e for e in events if e.get("correlationId") not in dropped] if dropped else events
        titled: set[str] = set()
        try:
            with rollups.deferred():  # the workspace's rollup rows written last, as in _create_runs
                if create is not None:
                    landed = _create_and_append(workspace, run_id, todo, create, actor, now)
                else:
                    landed = _lock_and_append(workspace, run_id, todo, actor, title, titled, touch)
            if retitled is not None:
                retitled |= titled  # committed
            if touch and touched is not None and create is None:
                touched.update(row.trace_id for row, _ in touch)  # committed
            break
        except ActionError as exc:
            report.refuse(
                _span_count(todo),
                f"no run {run_id!r} in this workspace" if exc.code == "UNKNOWN_RUN" else exc.message,
            )
            return False
        except IntegrityError:
            # Another request created the run of this trace first: append to that one.
            row = (
                OtelTrace.objects.filter(workspace=workspace, trace_id=create.trace_id)
                .select_related("run")
                .first()
                if create
                else None
            )
            if row is None:
                report.refuse(_span_count(todo), "the trace's run could not be created")
                return False
            create, run_id = None, row.run.run_id
            events = [{**e, "runId": run_id} for e in events]
        except (EngineError, ProtocolError) as exc:
            found = _EVENT_INDEX.match(getattr(exc, "path", "") or "")
            if found is None or len(dropped) >= 3:
                report.refuse(_span_count(todo), exc.message)
                return False
            dropped[todo[int(found.group(1))].get("correlationId")] = exc.message
    else:
        report.refuse(_span_count(todo), "refused by the run")
        return False
    for why in dict.fromkeys(dropped.values()):
        report.refuse(sum(1 for w in dropped.values() if w == why), why)
    return landed


def _create_and_append(
    workspace: Workspace, run_id: str, events: list[dict], info: TraceInfo, actor: str, now: datetime
) -> bool:
    ctx = engine_context()
    title = _title(info)
    state = new_run(
        ctx=ctx, workflow=OTEL_WORKFLOW, run_id=run_id, metadata=info.metadata, tags=info.tags, title=title
    )
    run = new_run_row(workspace=workspace, state=state, actor=actor)
    save_new_run(run)
    OtelTrace.objects.create(
        workspace=workspace,
        trace_id=info.trace_id,
        run=run,
        session_id=(info.session_id or "")[:200],
        title=title,
        root_status=info.root_status or "",
        root_ended=info.root_span_id is not None,
        last_span_at=now,
    )
    appender = Appender(run, state, actor, fill_cache=False)
    append_in_place(state, events, ctx, on_applied=appender.record, shape_checked=True)
    first, last = appender.save(keep_rows=True)
    update_projection(run, state, event_rows=appender.event_rows)
    notify_on_commit(RunChange.of(run, first, last, events=appender.events, actor=actor, with_row=True))
    return True


def _lock_and_append(
    workspace: Workspace,
    run_id: str,
    events: list[dict],
    actor: str,
    title: str | None = None,
    retitled: set[str] | None = None,
    touch: list[tuple[OtelTrace, dict[str, Any]]] | None = None,
) -> bool:
    run = lock_run(workspace, run_id)
    for row, changes in touch or ():
        # the quiet clock of the run's trace, with its spans (the title below, when it changes)
        OtelTrace.objects.filter(pk=row.pk).update(**changes)
    ids = [e["id"] for e in events]
    legacy = _legacy_ids(ids)
    held = set(held_event_ids(run, ids + list(legacy), limit=len(ids) + len(legacy)))
    held |= {legacy[h] for h in held if h in legacy}
    fresh = [e for e in events if e["id"] not in held] if held else events
    if not fresh:
        return True  # an exporter's retry of spans already recorded: accepted, nothing new
    state = load_state(run)
    appender = Appender(run, state, actor, fill_cache=False)
    append_in_place(state, fresh, engine_context(), on_applied=appender.record, shape_checked=True)
    if title is not None and retitled is not None and not run.import_doc:
        # what do_set_run_title would store next, without a second lock, load and save of the run
        try:
            state.run = with_title(state.run, title)
            retitled.add(run_id)
            for row, _changes in touch or ():
                OtelTrace.objects.filter(pk=row.pk).update(title=title)
        except EngineError:
            pass  # left to _touch_traces (which refuses it the same way)
    first, last = appender.save(keep_rows=True)
    update_projection(run, state, event_rows=appender.event_rows)
    notify_on_commit(RunChange.of(run, first, last, events=appender.events, actor=actor, with_row=True))
    return True


def _titles_due(traces: dict[str, TraceInfo], known: dict[str, OtelTrace]) -> dict[str, str]:
    """Run id -> new title, for the runs named from a child span before their root arrived (in
    this request), whom nobody renamed since."""
    due = {}
    for trace_id, row in known.items():
        info = traces.get(trace_id)
        if info is not None and info.root_span_id is not None:
            title = _title(info)
            if row.run.title == row.title and title != row.title:
                due[row.run.run_id] = title
    return due


def _touches(
    traces: dict[str, TraceInfo], known: dict[str, OtelTrace], now: datetime
) -> dict[str, list[tuple[OtelTrace, dict[str, Any]]]]:
    """Run id -> its known traces' rows and their quiet-clock changes (a span arrived now; the
    root's end), for the run's append to store in its transaction (:func:`_lock_and_append`)."""
    out: dict[str, list[tuple[OtelTrace, dict[str, Any]]]] = {}
    for trace_id, row in known.items():
        out.setdefault(row.run.run_id, []).append((row, _clock_changes(traces.get(trace_id), now)))
    return out


def _clock_changes(info: TraceInfo | None, now: datetime) -> dict[str, Any]:
    changes: dict[str, Any] = {"last_span_at": now}
    if info is not None and info.root_span_id is not None:
        changes["root_ended"] = True
        changes["root_status"] = info.root_status or ""
    return changes


def _touch_traces(
    workspace: Workspace,
    traces: dict[str, TraceInfo],
    known: dict[str, OtelTrace],
    now: datetime,
    retitled: set[str] | None = None,
    touched: set[str] | None = None,
) -> None:
    """The quiet clock of the traces that already had a run: a span arrived now; the root's end.
    ``retitled``: runs whose new title their append already stored; ``touched``: traces whose
    clock their run's append already stored (only a title still due is left for those)."""
    for trace_id, row in known.items():
        info = traces.get(trace_id)
        done = touched is not None and trace_id in touched
        changes: dict[str, Any] = {} if done else _clock_changes(info, now)
        if info is not None and info.root_span_id is not None:
            title = _title(info)
            if retitled and row.run.run_id in retitled:
                if not done:
                    changes["title"] = title
            elif row.run.title == row.title and title != row.title:
                # named from a child span before the root arrived (and nobody renamed it since)
                try:
                    do_set_run_title(workspace=workspace, run_id=row.run.run_id, title=title)
                    changes["title"] = title
                except ActionError:
                    pass
        if changes:
            OtelTrace.objects.filter(pk=row.pk).update(**changes)


def _title(info: TraceInfo) -> str:
    title = info.title
    return title if len(title) <= _TITLE_MAX else title[: _TITLE_MAX - 1] + "…"


# --------------------------------------------------------------------------------------------
# Content log records


@dataclass
class LogReport:
    accepted: int = 0
    rejected: int = 0
    message: str | None = None
    kept: int = 0  # waiting for their span
    ignored: int = 0  # no GenAI content: not kept


def do_ingest_logs(*, workspace: Workspace, records: Sequence[dict]) -> LogReport:
    """Keep the GenAI content records of spans not ingested yet (joined when the span arrives);
    refuse those whose span was already ingested, and records that cannot be read."""
    report = LogReport()
    content: list[dict] = []
    problems: list[str] = []
    for record in records:
        if record.get("decodeProblem"):
            problems.append(str(record["decodeProblem"]))
            continue
        if content_log_name(record) is None:
            report.ignored += 1
            continue
        if not _hex_id(record.get("traceId"), 32) or not _hex_id(record.get("spanId"), 16):
            problems.append("a content log record needs its span's traceId and spanId")
            continue
        content.append(record)
    late = _already_ingested(workspace, content)
    rows = []
    for record in content:
        if (record["traceId"], record["spanId"]) in late:
            problems.append("its span was already ingested (send logs before or with their spans)")
            continue
        try:
            text = dumps(record)
        except (ProtocolError, TypeError, ValueError) as exc:
            problems.append(f"cannot store the record: {exc}")
            continue
        rows.append(
            OtelPendingLog(
                workspace=workspace, trace_id=record["traceId"], span_id=record["spanId"], record=text
            )
        )
    cap = settings.WORKBENCH_OTLP_PENDING_LOGS_MAX
    room = max(0, cap - OtelPendingLog.objects.filter(workspace=workspace).count()) if rows else 0
    if len(rows) > room:
        problems += ["too many log records wait for their spans"] * (len(rows) - room)
        rows = rows[:room]
    OtelPendingLog.objects.bulk_create(rows)
    report.kept = len(rows)
    report.rejected = len(problems)
    report.accepted = len(records) - report.rejected
    notes = [f"{problems.count(p)} record(s): {p}" for p in dict.fromkeys(problems)]
    if report.ignored:
        notes.append(f"{report.ignored} record(s) carried no GenAI content and were not kept")
    report.message = "; ".join(notes) or None
    return report


def _hex_id(value: Any, length: int) -> bool:
    return (
        type(value) is str
        and len(value) == length
        and not value.strip("0123456789abcdef")
        and bool(value.strip("0"))
    )


def _legacy_ids(ids: list[str]) -> dict[str, str]:
    """``{id before issue 53: id}`` of the OTLP ids among ``ids``: looked up with them, so that a
    span an older version stored (hex ids) and an exporter sends again after an upgrade is not
    stored twice. Equal ids, not a range of them: a range of text orders by the database's
    collation, which may skip punctuation."""
    out: dict[str, str] = {}
    for new in ids:
        old = legacy_event_id(new)
        if old is not None:
            out[old] = new
    return out


def _already_ingested(workspace: Workspace, records: list[dict]) -> set[tuple[str, str]]:
    """(trace, span) pairs of ``records`` whose span a trace run already holds."""
    by_trace: dict[str, set[str]] = {}
    for record in records:
        by_trace.setdefault(record["traceId"], set()).add(record["spanId"])
    if not by_trace:
        return set()
    out: set[tuple[str, str]] = set()
    for row in OtelTrace.objects.filter(workspace=workspace, trace_id__in=by_trace).select_related("run"):
        wanted = {}
        for span in by_trace[row.trace_id]:
            new = event_id({"traceId": row.trace_id, "spanId": span}, "start")
            wanted[new] = wanted[legacy_event_id(new) or new] = span  # or as stored before issue 53
        for held in held_event_ids(row.run, list(wanted), limit=len(wanted)):
            out.add((row.trace_id, wanted[held]))
    return out


def _with_pending_logs(workspace: Workspace, spans: Sequence[dict]) -> Sequence[dict]:
    """The spans with the content records kept for them joined on (and those records deleted)."""
    trace_ids = {s.get("traceId") for s in spans if isinstance(s, dict) and isinstance(s.get("traceId"), str)}
    if not trace_ids or not OtelPendingLog.objects.filter(workspace=workspace).exists():
        return spans
    pending = list(OtelPendingLog.objects.filter(workspace=workspace, trace_id__in=trace_ids))
    if not pending:
        return spans
    joined, unmatched = join_content_logs(spans, [loads(p.record) for p in pending])
    left = {(r["traceId"], r["spanId"]) for r in unmatched}
    used = [p.pk for p in pending if (p.trace_id, p.span_id) not in left]
    OtelPendingLog.objects.filter(pk__in=used).delete()
    return joined


# --------------------------------------------------------------------------------------------
# The quiet period


@dataclass
class SweepReport:
    completed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    dropped_logs: int = 0


def do_end_quiet_traces(*, quiet_seconds: float | None = None, now: datetime | None = None) -> SweepReport:
    """End the runs created from OTLP whose root span has ended and whose trace has been quiet
    for ``quiet_seconds`` (default ``WORKBENCH_OTLP_QUIET_SECONDS``): completed, or failed when
    the root span's status is error. Each run through ``do_commands`` (the one write path)."""
    quiet = settings.WORKBENCH_OTLP_QUIET_SECONDS if quiet_seconds is None else quiet_seconds
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=quiet)
    report = SweepReport()
    due = OtelTrace.objects.filter(ended=False, root_ended=True, last_span_at__lte=cutoff).select_related(
        "run", "workspace"
    )
    for row in due[:500]:
        if row.run.status != "running":
            OtelTrace.objects.filter(pk=row.pk).update(ended=True)
            continue
        failed = row.root_status == "error"
        command = (
            cmd.FailRun(reason="the trace's root span ended with an error", code="OTEL_SPAN_ERROR")
            if failed
            else cmd.CompleteRun(reason="the trace's root span ended and the trace went quiet")
        )
        with transaction.atomic():
            # A span that arrived since the query moved the clock: not quiet after all.
            fresh = OtelTrace.objects.select_for_update().filter(pk=row.pk, last_span_at__lte=cutoff).first()
            if fresh is None:
                continue
            try:
                do_commands(workspace=row.workspace, run_id=row.run.run_id, commands=[command], actor="otlp")
            except ActionError:
                pass  # ended meanwhile (cancelled by a person, say): nothing to do
            OtelTrace.objects.filter(pk=row.pk).update(ended=True)
        (report.failed if failed else report.completed).append(row.run.run_id)
    age = now - timedelta(seconds=settings.WORKBENCH_OTLP_PENDING_LOG_SECONDS)
    report.dropped_logs, _ = OtelPendingLog.objects.filter(received_at__lt=age).delete()
    return report
