"""Reads of runs: a run by id, its events, its state at any seq, its timeline pages, gate history,
forks and span waterfall. Every selector takes the workspace (or a run already fetched through it)
first. The runs list, its search and the inbox are in runs.selectors.run_list."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
from django.conf import settings
from django.db.models import Count, Q, QuerySet

from runs.engine.fold import apply_event, fold, reviewer_note
from runs.engine.state import RunState, initial_run_doc
from runs.fields import json_text_needle
from runs.models import (
    ArtifactVersion,
    Event,
    Run,
    RunFork,
    RunParent,
    RunSnapshot,
    Workspace,
)
from runs.presenters.timeline import EventRecord, build_rows
from runs.protocol.values import loads
from runs.selectors.keyset import BadCursor as BadCursor  # the pages catch it from here


class RunNotFound(Exception):
    code = "UNKNOWN_RUN"


# A gate judge's own model call (judges.calls) is a run tagged so. Its answer is the judge's
# proposal for a gate people may still be deciding, so only those who may manage judges (owners,
# ``manage`` tokens) read such runs; everyone else finds them missing (docs/users/judges.md).
JUDGE_CALL_TAG = "gate-judge"


def is_judge_call(run: Run) -> bool:
    return JUDGE_CALL_TAG in (run.tags or [])


def get_run(workspace: Workspace, run_id: str) -> Run:
    """A run of this workspace; another workspace's run is exactly as missing as a missing one."""
    try:
        return Run.objects.by_run_id(workspace, run_id).get()
    except Run.DoesNotExist:
        raise RunNotFound(run_id) from None


def find_run(workspace: Workspace, run_id: str) -> Run | None:
    """The run of this workspace with that id, or None (the same for another workspace's run)."""
    return Run.objects.by_run_id(workspace, run_id).first()


def runs_of(workspace: Workspace) -> QuerySet[Run]:
    """The workspace's runs (a queryset to narrow further)."""
    return Run.objects.for_workspace(workspace)


def iter_event_bodies(
    run: Run, *, after_seq: int = 0, upto_seq: int | None = None, chunk: int = 2000
) -> Iterator[dict]:
    """Protocol events in seq order, read in keyset-paginated chunks (bounded memory)."""
    last = after_seq
    while True:
        qs = Event.objects.filter(run=run, seq__gt=last)
        if upto_seq is not None:
            qs = qs.filter(seq__lte=upto_seq)
        rows = list(qs.order_by("seq").values_list("seq", "body")[:chunk])
        if not rows:
            return
        for _seq, body in rows:
            yield loads(body)
        last = rows[-1][0]
        if len(rows) < chunk:
            return


def start_doc(run: Run) -> dict:
    """The run as it was when it started (an imported run: its bundle's document)."""
    return initial_run_doc(loads(run.import_doc) if run.import_doc else run.run_doc)


def fold_run(run: Run) -> RunState:
    """The projection recomputed from the stored events (what the run row must always equal)."""
    return state_at(run, run.last_seq, use_snapshots=False)


def state_at(run: Run, seq: int, *, use_snapshots: bool = True) -> RunState:
    """The projection as it was right after event `seq` (0 = before any event).

    Starts from the nearest stored snapshot at or below `seq`, so the work is bounded by the
    snapshot interval rather than by the length of the run.
    """
    seq = max(0, min(seq, run.last_seq))
    snapshot = None
    if use_snapshots:
        snapshot = RunSnapshot.objects.filter(run=run, seq__lte=seq).order_by("-seq").first()
    if snapshot is not None:
        state = RunState.from_json(loads(snapshot.state))
        current = snapshot.seq
    else:
        state = fold(start_doc(run), [])
        current = 0
    _adopt_import_doc(run, state, current)
    for event in iter_event_bodies(run, after_seq=current, upto_seq=seq):
        apply_event(state, event)
        current += 1
        _adopt_import_doc(run, state, current)
    return state


def _adopt_import_doc(run: Run, state: RunState, seq: int) -> None:
    """Once all of a bundle's events are folded, its run document (what its hash covered) is the truth."""
    if run.import_seq is not None and seq == run.import_seq and run.import_doc:
        state.run = loads(run.import_doc)


def children(workspace: Workspace, run_id: str) -> list[Run]:
    child_pks = RunParent.objects.filter(parent_run_id=run_id, child__workspace=workspace).values("child_id")
    return list(Run.objects.for_workspace(workspace).filter(pk__in=child_pks).order_by("started_at"))


def parents(workspace: Workspace, run: Run) -> list[tuple[str, Run | None]]:
    ids = list(run.parent_links.values_list("parent_run_id", flat=True))
    found = {r.run_id: r for r in Run.objects.for_workspace(workspace).filter(run_id__in=ids)}
    return [(pid, found.get(pid)) for pid in ids]


def descendants(workspace: Workspace, run_id: str) -> list[Run]:
    """Every run below `run_id` in the lineage graph, breadth first, each once."""
    seen: set[str] = {run_id}
    frontier = [run_id]
    out: list[Run] = []
    while frontier:
        batch = [
            run
            for run in Run.objects.for_workspace(workspace)
            .filter(parent_links__parent_run_id__in=frontier)
            .distinct()
            .order_by("started_at")
            if run.run_id not in seen
        ]
        seen |= {run.run_id for run in batch}
        out.extend(batch)
        frontier = [r.run_id for r in batch]
    return out


class AmbiguousRunId(Exception):
    """Several workspaces hold a run with this id (operator tools must name the workspace)."""

    code = "INVALID_INPUT"


def dangerously_find_run_any_workspace(run_id: str, workspace_slug: str | None = None) -> Run:
    """Operator tools (manage.py) only: a run by id across workspaces, or in the named one.

    Run ids are unique per workspace only; when several workspaces hold the id, the caller must
    name the workspace (AmbiguousRunId lists the candidates). Never use this behind a request.
    """
    qs = Run.objects.select_related("workspace").filter(run_id=run_id)
    if workspace_slug:
        qs = qs.filter(workspace__slug=workspace_slug)
    found = list(qs[:10])
    if not found:
        raise RunNotFound(run_id)
    if len(found) > 1:
        slugs = ", ".join(sorted(run.workspace.slug for run in found))
        raise AmbiguousRunId(f"run id {run_id!r} exists in several workspaces ({slugs}): pass --workspace")
    return found[0]


# --- page reads -------------------------------------------------------------------------------

TIMELINE_PAGE = 100


TIMELINE_MAX_PAGE = 500


SEARCH_WINDOW = 20_000  # events scanned per text-search request (keeps a search of a huge run bounded)


ARTIFACT_ROWS_LIMIT = 2000


def run_state(run: Run) -> RunState:
    return RunState.from_json(loads(run.state))


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
    qs = _filtered_events(run, filters)
    searched_to = searched_from = None
    if before is not None:
        raw, next_after, prev_before, searched_from = _page_before(qs, run, before, filters, limit)
    else:
        raw, next_after, prev_before, searched_to = _page_after(qs, run, after, filters, limit)
    records = [
        EventRecord(seq, t, ts, step, corr, actor, loads(body)) for seq, t, ts, step, corr, actor, body in raw
    ]
    rows = build_rows(records)
    _label_attempts(run, rows)
    return TimelinePage(
        rows=rows,
        first_seq=records[0].seq if records else None,
        last_seq=records[-1].seq if records else None,
        next_after=next_after,
        prev_before=prev_before,
        searched_to=searched_to if searched_to and not (len(raw) >= limit) else None,
        searched_from=searched_from,
    )


def _label_attempts(run: Run, rows: list) -> None:
    """``· attempt n`` on the step rows of steps that ran more than once (attempt n of a step is
    its n-th ``step_started``). On the partial index of step starts, and bounded by the snapshot
    interval rather than by the run's length. A run no longer than one interval: one grouped count
    of its starts (in all, and before the page). A longer one: the starts before the page come from
    the last snapshot before it (`_starts_before`), and a step seen once so far asks whether it
    starts again after the page (one probe). Either way the starts inside the page's seq range are
    read."""
    page = [r for r in rows if r.type in ("step_started", "step_completed") and r.step_id]
    if not page:
        return
    steps = {r.step_id for r in page}
    lo, hi = min(r.seq for r in page), max(r.seq for r in page)
    starts = Event.objects.filter(run=run, type="step_started", step_id__in=steps)
    totals: dict[str, int] | None = None
    if run.last_seq <= settings.WORKBENCH_SNAPSHOT_INTERVAL:
        totals, before = {}, {}
        for step, total, earlier in (
            starts.values("step_id")
            .annotate(total=Count("seq"), before=Count("seq", filter=Q(seq__lt=lo)))
            .values_list("step_id", "total", "before")
        ):
            totals[step], before[step] = total, earlier
    else:
        before = _starts_before(run, starts, steps, lo)
    inside: dict[str, list[int]] = {}
    for step, seq in starts.filter(seq__gte=lo, seq__lte=hi).order_by("seq").values_list("step_id", "seq"):
        inside.setdefault(step, []).append(seq)
    if totals is None:
        totals = {step: before.get(step, 0) + len(inside.get(step, [])) for step in steps}
        for step in [s for s, n in totals.items() if n <= 1]:
            totals[step] += starts.filter(step_id=step, seq__gt=hi).exists()
    for row in page:
        if totals.get(row.step_id, 0) > 1:
            attempt = before.get(row.step_id, 0) + bisect_right(inside.get(row.step_id, []), row.seq)
            row.summary += f" · attempt {max(attempt, 1)}"


def _starts_before(run: Run, starts: QuerySet, steps: set[str], lo: int) -> dict[str, int]:
    """Per step, its ``step_started`` rows before seq ``lo``. The engine counts a step's starts
    (``stepAttempts``), so the last snapshot before ``lo`` has them up to its seq, and only the
    starts after it are counted here; but the engine skips a start of a step it does not know (an
    ``UNKNOWN_STEP`` warning), so a snapshot whose fold met one, or that dropped warnings it could
    not keep, is not used and the starts are counted from the run's beginning."""
    after = 0
    counts: dict[str, int] = {}
    snapshot = (
        RunSnapshot.objects.filter(run=run, seq__lt=lo).order_by("-seq").values_list("seq", "state").first()
    )
    if snapshot is not None:
        state = loads(snapshot[1])
        warnings = state.get("warnings") or []
        if (
            "stepAttempts" in state  # a snapshot from before the engine counted attempts has none
            and state.get("warningCount", 0) == len(warnings)
            and all(w.get("code") != "UNKNOWN_STEP" for w in warnings)
        ):
            after = snapshot[0]
            counts = {step: n for step, n in state.get("stepAttempts") or [] if step in steps}
    since = (
        starts.filter(seq__gt=after, seq__lt=lo)
        .values("step_id")
        .annotate(n=Count("seq"))
        .values_list("step_id", "n")
    )
    for step, n in since:
        counts[step] = counts.get(step, 0) + n
    return counts


_TIMELINE_COLS = ("seq", "type", "ts", "step_id", "correlation_id", "actor", "body")


def _filtered_events(run: Run, filters: TimelineFilters):
    """The run's events narrowed by the filters (an indexed column each; the text search last)."""
    qs = Event.objects.filter(run=run)
    if filters.type:
        qs = qs.filter(type=filters.type)
    if filters.step:
        qs = qs.filter(step_id=filters.step)
    if filters.corr:
        qs = qs.filter(correlation_id=filters.corr)
    if filters.q:
        qs = qs.filter(body__icontains=json_text_needle(filters.q))
    return qs


def _page_before(qs, run: Run, before: int, filters: TimelineFilters, limit: int):
    """The page of events older than ``before``: (rows, next_after, prev_before, searched_from)."""
    searched_from = None
    if filters.q:
        low = max(0, before - SEARCH_WINDOW)
        qs = qs.filter(seq__gte=low)
        searched_from = low if low > 1 else None
    raw = list(qs.filter(seq__lt=before).order_by("-seq").values_list(*_TIMELINE_COLS)[: limit + 1])
    older = len(raw) > limit
    raw = list(reversed(raw[:limit]))
    next_after = raw[-1][0] if raw and raw[-1][0] < run.last_seq else None
    prev_before = raw[0][0] if raw and (older or searched_from) else None
    return raw, next_after, prev_before, searched_from


def _page_after(qs, run: Run, after: int, filters: TimelineFilters, limit: int):
    """The page of events newer than ``after``: (rows, next_after, prev_before, searched_to)."""
    searched_to = None
    if filters.q:
        high = after + SEARCH_WINDOW
        qs = qs.filter(seq__lte=high)
        searched_to = high if high < run.last_seq else None
    raw = list(qs.filter(seq__gt=after).order_by("seq").values_list(*_TIMELINE_COLS)[: limit + 1])
    newer = len(raw) > limit
    raw = raw[:limit]
    if newer:
        next_after = raw[-1][0]
    elif searched_to is not None:
        next_after = searched_to
    else:
        next_after = None
    prev_before = raw[0][0] if raw and raw[0][0] > 1 else (after + 1 if after > 0 else None)
    if prev_before is not None and (filters.type or filters.step or filters.corr) and not filters.q:
        # filtered: offer "Earlier" only when an earlier match exists (one indexed probe)
        if not qs.filter(seq__lt=prev_before).exists():
            prev_before = None
    return raw, next_after, prev_before, searched_to


def event_row(run: Run, seq: int, *, upto: int | None = None):
    """The timeline row of event ``seq`` as its page shows it (a stream: with its chunks of the same
    correlation id up to ``upto``, at most TIMELINE_MAX_PAGE of them), or None. Index probes only."""
    first = Event.objects.filter(run=run, seq=seq).values_list(*_TIMELINE_COLS).first()
    if first is None:
        return None
    raw = [first]
    corr = first[4]
    if upto is not None and upto > seq and corr:
        raw += list(
            Event.objects.filter(
                run=run, correlation_id=corr, seq__gt=seq, seq__lte=min(upto, seq + SEARCH_WINDOW)
            )
            .order_by("seq")
            .values_list(*_TIMELINE_COLS)[:TIMELINE_MAX_PAGE]
        )
    rows = build_rows([EventRecord(s, t, ts, st, c, a, loads(b)) for s, t, ts, st, c, a, b in raw])
    row = rows[0]
    _label_attempts(run, [row])
    return row


def artifact_versions_by_key(run: Run) -> dict[str, list[dict[str, Any]]]:
    rows = (
        ArtifactVersion.objects.filter(run=run)
        .order_by("key", "version")
        .values("key", "version", "type_id", "seq")
    )
    out: dict[str, list[dict[str, Any]]] = {}
    for row in rows[:ARTIFACT_ROWS_LIMIT]:
        out.setdefault(row["key"], []).append(dict(row))
    return out


# --- run panels -----------------------------------------------------------------------------------


def gate_history(run: Run, *, limit: int) -> list[dict[str, Any]]:
    """The latest gate requests and resolutions of a run, newest first, bodies parsed as ``data``."""
    # One query per type so each is a backwards range scan of the (run, type, seq) index; an IN over
    # both types makes SQLite walk the whole trace by (run, seq) instead.
    rows = sorted(
        (
            row
            for etype in ("human_gate_requested", "human_gate_resolved")
            for row in Event.objects.filter(run=run, type=etype)
            .order_by("-seq")
            .values("seq", "type", "ts", "step_id", "correlation_id", "actor", "body")[:limit]
        ),
        key=lambda row: -row["seq"],
    )[:limit]
    history: list[dict[str, Any]] = [dict(row) for row in rows]
    for item in history:
        item["data"] = loads(item.pop("body"))
        # the named checkpoint an event of this engine is about (it sets correlationId for them);
        # ``note``: the reviewer's words (a resolution's note that only repeats the name is not)
        corr = item.get("correlation_id") or ""
        item["checkpoint"] = corr[len("checkpoint:") :] if corr.startswith("checkpoint:") else ""
        item["note"] = reviewer_note(item["data"]) if item["type"] == "human_gate_resolved" else None
    return history


def event_at(run: Run, seq: int) -> dict[str, Any] | None:
    """One stored event (columns and parsed body as ``data``), or None."""
    event = Event.objects.filter(run=run, seq=seq).values("seq", "type", "ts", "actor", "body").first()
    if event is None:
        return None
    return {**event, "data": loads(event["body"])}


def artifact_versions(run: Run, key: str, versions: list[int]) -> dict[int, ArtifactVersion]:
    return {r.version: r for r in ArtifactVersion.objects.filter(run=run, key=key, version__in=versions)}


def get_fork(workspace: Workspace, run_id: str) -> RunFork:
    """The fork record of a run of this workspace (RunNotFound when the run is missing or no fork)."""
    run = get_run(workspace, run_id)
    fork = RunFork.objects.select_related("run", "source").filter(run=run).first()
    if fork is None:
        raise RunNotFound(run_id)
    return fork


# --- span waterfall -----------------------------------------------------------------------------

SPAN_PAGE = 200  # spans per window of the waterfall
SPAN_END_SCAN = 4 * SPAN_PAGE  # span_ended rows read after the window's first start
SPAN_END_LOOKUP = 100  # spans still open after that scan whose end is looked up by id
SPAN_END_WINDOW = 20_000  # seqs past the scan in which those ends are looked for


@dataclass
class SpanWindow:
    started: list[tuple[int, dict[str, Any]]]
    ended: list[tuple[int, dict[str, Any]]]
    next_after: int | None  # more spans start after this seq
    after: int
    ends_to: int | None = None  # ends were looked for up to this seq only (the run goes on beyond)


def has_spans(run: Run) -> bool:
    """One probe of the (run, type, seq) index."""
    return Event.objects.filter(run=run, type="span_started").exists()


def span_window(run: Run, *, after: int = 0, limit: int | None = None) -> SpanWindow:
    """Up to `limit` spans starting after seq `after`, with the span_ended events that close them.

    Bounded by the window, not by the trace: range scans of the (run, type, seq) index read at
    most `limit` + 1 starts and SPAN_END_SCAN ends; ends further away are looked up by span id
    (at most SPAN_END_LOOKUP of them, over the span_ended rows of the next SPAN_END_WINDOW seqs;
    `ends_to` says where that stopped when the run goes on beyond)."""
    limit = max(1, min(limit or SPAN_PAGE, TIMELINE_MAX_PAGE))
    end_scan = SPAN_END_SCAN
    raw = list(
        Event.objects.filter(run=run, type="span_started", seq__gt=after)
        .order_by("seq")
        .values_list("seq", "body")[: limit + 1]
    )
    more = len(raw) > limit
    started = [(seq, loads(body)) for seq, body in raw[:limit]]
    if not started:
        return SpanWindow([], [], None, after)
    first = started[0][0]
    ends_qs = Event.objects.filter(run=run, type="span_ended", seq__gt=first).order_by("seq")
    ended_raw = list(ends_qs.values_list("seq", "body")[:end_scan])
    ended = [(seq, loads(body)) for seq, body in ended_raw]
    ends_to = None
    if len(ended_raw) == end_scan:
        # spans of the window that no scanned end closes: find their ends by id
        open_ids: dict[str, int] = {}
        for seq, kind, body in sorted(
            [(s, 0, b) for s, b in started] + [(s, 1, b) for s, b in ended], key=lambda x: x[0]
        ):
            sid = body.get("spanId")
            if not isinstance(sid, str):
                continue
            if kind == 0:
                open_ids[sid] = seq
            else:
                open_ids.pop(sid, None)
        needles = [orjson.dumps({"spanId": sid}).decode()[1:-1] for sid in list(open_ids)[:SPAN_END_LOOKUP]]
        if needles:
            match = Q()
            for needle in needles:
                match |= Q(body__contains=needle)
            last_scanned = ended_raw[-1][0]
            horizon = last_scanned + SPAN_END_WINDOW
            extra = ends_qs.filter(seq__gt=last_scanned, seq__lte=horizon).filter(match)
            ended.extend(
                (seq, loads(body)) for seq, body in extra.values_list("seq", "body")[: len(needles) * 4]
            )
            ends_to = horizon if horizon < run.last_seq else None
    return SpanWindow(started, ended, started[-1][0] if more else None, after, ends_to)


SHORT_RUN_ID = re.compile(r"[A-Za-z0-9][\w.-]{3,63}")


def find_by_short_id(workspace: Workspace, short: str) -> str | None:
    """The full id of the one run of this workspace whose id the short form ``short`` stands for
    (the list's ``3f2a9c1e`` for ``run_3f2a9c1e-...``: the id's part after its first ``_``
    starts with it); None when no run or several do."""
    if not SHORT_RUN_ID.fullmatch(short):
        return None
    found = list(
        runs_of(workspace)
        .filter(run_id__regex=rf"^[^_]*_{re.escape(short)}")
        .values_list("run_id", flat=True)[:2]
    )
    return found[0] if len(found) == 1 else None
