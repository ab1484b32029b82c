"""The runs list and the inbox: filters, sorts, text search and keyset pages over a workspace's runs,
the runs waiting for review, the workflow menu and the pending gate count. Every selector takes the
workspace first."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import orjson
from django.db import connection
from django.db.models import Case, Exists, F, OuterRef, Q, QuerySet, Sum, TextField, Value, When
from django.db.models.functions import Cast, Concat, StrIndex, Upper
from django.db.models.lookups import GreaterThan, IContains, Lookup, Regex

from runs.engine.state import RunState
from runs.fields import SearchText, from_column, json_body_needle, json_text_needle
from runs.models import (
    Event,
    OtelTrace,
    Run,
    RunRollup,
    RunStatus,
    Workspace,
)
from runs.protocol.values import loads
from runs.selectors.keyset import BadCursor, newest_first
from runs.selectors.prompts import parse_prompt_filter, prompt_ref
from runs.selectors.runs import JUDGE_CALL_TAG, runs_of

RUN_LIST_FIELDS = (
    "id",
    "run_id",
    "workflow_id",
    "title",
    "status",
    "started_at",
    "ended_at",
    "tags",
    "subject",
    "pending_gates",
    "rejected_gates",
    "event_count",
    "model_calls",
    "total_tokens",
    "cost_totals",
    "duration_ms",
    "error_count",
)

# The runs list's sorts (``?sort=<key>``, newest / largest first; ``?sort=-<key>`` the other way):
# each a keyset page over its own (workspace, -column, -id) index.
RUN_SORTS = {
    "started": "started_at",
    "duration": "duration_ms",
    "cost": "cost_amount",
    "tokens": "total_tokens",
    "errors": "error_count",
}
DEFAULT_SORT = "started"


def sort_problem(text: str) -> str | None:
    """Why ``?sort=`` is not one the runs list offers (None: it is, or it is empty)."""
    if not text or text.removeprefix("-") in RUN_SORTS:
        return None
    return (
        f"INVALID_SORT: sort by one of {', '.join(RUN_SORTS)} (“-” first for ascending), not “{text[:40]}”."
    )


@dataclass
class RunListFilters:
    status: str = ""
    workflow: str = ""
    tag: str = ""
    q: str = ""
    prompt: str = ""  # name@version: runs with a model call made with that prompt version
    sort: str = DEFAULT_SORT  # a RUN_SORTS key, "-" first for the ascending order
    started_after: datetime | None = None  # runs started at or after this instant
    started_before: datetime | None = None  # runs started before this instant
    trace_id: str = ""  # the run an OTLP trace (32 hex digits) became
    hide_judge_calls: bool = False  # leave out gate judges' own calls (readers who may not manage judges)

    @classmethod
    def from_query(cls, params) -> RunListFilters:
        """The filters of a query string (a sort the list does not offer: the default one; the runs
        list refuses it first, see :func:`sort_problem`)."""
        sort = params.get("sort", "").strip()
        if not sort or sort_problem(sort):
            sort = DEFAULT_SORT
        return cls(
            status=params.get("status", "").strip(),
            workflow=params.get("workflow", "").strip(),
            tag=params.get("tag", "").strip(),
            q=params.get("q", "").strip()[:200],
            prompt=params.get("prompt", "").strip()[:220],
            sort=sort,
        )


REJECTED_FILTER = "rejected"  # runs with a rejected gate, whatever their protocol status


def _with_tag[QS: QuerySet[Run]](qs: QS, tag: str) -> QS:
    """Runs tagged ``tag``. PostgreSQL: jsonb containment (``tags @> '["tag"]'``), which the GIN
    index run_tags_gin (migration 0033) answers whatever the workspace's size: a LIKE on the text of
    the tags read every run's row when the tag is rare (2 s at 1,000,000 runs). SQLite: the JSON
    text holds the tag as a JSON string, in either spelling of its escapes."""
    if connection.vendor == "postgresql":
        return qs.filter(tags__contains=[tag])  # ProtocolJSONField spells NUL as stored
    needles = {orjson.dumps(tag).decode(), json.dumps(tag)}
    q = Q()
    for needle in needles:
        q |= Q(tags_text__contains=needle)
    return qs.annotate(tags_text=Cast("tags", TextField())).filter(q)


def _without_tag[QS: QuerySet[Run]](qs: QS, tag: str) -> QS:
    """Runs not tagged ``tag`` (the opposite of :func:`_with_tag`)."""
    if connection.vendor == "postgresql":
        return qs.exclude(tags__contains=[tag])
    needles = {orjson.dumps(tag).decode(), json.dumps(tag)}
    q = Q()
    for needle in needles:
        q |= Q(tags_text__contains=needle)
    return qs.annotate(tags_text=Cast("tags", TextField())).exclude(q)


def without_judge_calls[QS: QuerySet[Run]](qs: QS) -> QS:
    """``qs`` less the gate judges' own calls (runs.selectors.runs.JUDGE_CALL_TAG): what a reader
    who may not manage judges lists."""
    return _without_tag(qs, JUDGE_CALL_TAG)


def _text_match(workspace: Workspace, text: str) -> Q:
    """Runs whose id, title or workflow id holds ``text``, or whose model calls (what was asked and
    answered: the string values of their summary and payload, ``runs.fields.SearchText``) do, any
    case. Two sets of run ids, each found through an index (on PostgreSQL the trigram indexes of
    migrations 0013 and 0019), never a walk over every run's document: at a large workspace a rare
    word would otherwise read every run (the run document, with its subject and metadata, is no
    longer searched)."""
    named = (
        Run.objects.for_workspace(workspace)
        .filter(Q(run_id__icontains=text) | Q(title__icontains=text) | Q(workflow_id__icontains=text))
        .values("pk")
    )
    calls = Event.objects.filter(run__workspace=workspace, type="model_io")
    said: QuerySet[Event]
    if connection.vendor == "postgresql":  # the indexed expression, exactly
        said = calls.annotate(said=SearchText("body")).filter(said__icontains=json_text_needle(text))
    else:
        said = _saying(calls, text)
    # one IN over the union: the planner joins the (few) matching ids to the runs and sorts them,
    # instead of walking every run newest first to test each against two sets
    return Q(pk__in=named.union(said.values("run_id")))


def _saying(calls: QuerySet[Event], text: str) -> QuerySet[Event]:
    """The model calls among ``calls`` whose searchable text holds ``text`` (any case), each body
    tested cheaply first: one whose JSON text lacks the term's JSON spelling cannot hold it in a
    value, and only the others are parsed (``wb_search_text``). Nested CASEs, so every database
    tests in that order. PostgreSQL: a regular expression on the body (no index serves it, so the
    planner reads the calls it was given through the (run, type) index), which also refuses a
    spelling that is only a key's.
    SQLite: LIKE (what its UPPER and INSTR match, ASCII case folding, without UPPER's copy of every
    body)."""
    exact = json_text_needle(text)
    spelt = json_body_needle(text)
    said: Lookup
    cheap: Lookup | None
    if connection.vendor == "postgresql":
        said = GreaterThan(StrIndex(Upper(SearchText("body")), Upper(Value(exact))), 0)
        # The spelling anywhere but right before '":' (the end of a key: a body's JSON is compact,
        # and a quote inside a value is spelt \"): a term that is only a key name ("content",
        # "role") is refused here, not by parsing every call. Measured: 60,000 calls, 225 ms for
        # this test, 203 for STRPOS, 778 for the parse.
        cheap = (
            None
            if spelt is None
            else Regex(Upper("body"), Concat(Upper(Value(_regex_literal(spelt))), Value('(?!":)')))
        )
    else:
        said = IContains(SearchText("body"), exact)
        cheap = None if spelt is None else IContains(F("body"), spelt)
    test = Case(When(said, then=Value(1)), default=Value(0))
    if cheap is not None:
        test = Case(When(cheap, then=test), default=Value(0))
    return calls.annotate(at=test).filter(at__gt=0)


def _regex_literal(text: str) -> str:
    """``text`` as a PostgreSQL regular expression (ARE) that matches it literally."""
    return re.sub(r"([\\^$.|?*+()\[\]{}])", r"\\\1", text)


def runs_matching(workspace: Workspace, filters: RunListFilters) -> QuerySet[Run]:
    """Every run of the workspace the runs list's filters match, across all its pages (the list
    pages through this; "Add to dataset" of all matching runs evaluates this same query)."""
    qs = Run.objects.for_workspace(workspace)
    if filters.status == REJECTED_FILTER:
        qs = qs.filter(rejected_gates__gt=0)
    elif filters.status in RunStatus.values:
        qs = qs.filter(status=filters.status)
    if filters.workflow:
        qs = qs.filter(workflow_id=filters.workflow)
    if filters.started_after is not None:
        qs = qs.filter(started_at__gte=filters.started_after)
    if filters.started_before is not None:
        qs = qs.filter(started_at__lt=filters.started_before)
    if filters.trace_id:
        traces = OtelTrace.objects.filter(workspace=workspace, trace_id=filters.trace_id.lower())
        qs = qs.filter(pk__in=traces.values("run_id"))
    if filters.tag:
        qs = _with_tag(qs, filters.tag)
    if filters.hide_judge_calls:
        qs = without_judge_calls(qs)
    if filters.prompt:
        ref = parse_prompt_filter(filters.prompt)
        if ref is None:
            return qs.none()  # not name@version: no run used it
        needle = prompt_ref(*ref)
        used = Event.objects.filter(run__workspace=workspace, type="model_io", body__contains=needle)
        qs = qs.filter(pk__in=used.values("run_id"))
    if filters.q:
        qs = qs.filter(_text_match(workspace, filters.q))
    return qs


def capped_count(workspace: Workspace, filters: RunListFilters, cap: int) -> int | None:
    """How many runs the filters match, when at most ``cap`` and one index range answers it (an
    index-only scan on PostgreSQL, no run row read): the whole workspace, or one of status,
    workflow or rejected, with a start range or not. Otherwise None: a text search, a tag, a prompt,
    a trace id, judge calls left out, or a status with a workflow would read each matching run's row, up to cap + 1 of
    them (0.2-0.4 s at 1,000,000 runs, bench_scale), for a number the page can do without."""
    if (
        filters.q
        or filters.tag
        or filters.prompt
        or filters.trace_id
        or filters.hide_judge_calls
        or (filters.status and filters.workflow)
    ):
        return None
    # no ORDER BY: the count is of a set, and an ordered one could not be an index-only scan
    counted = runs_matching(workspace, filters).order_by().values("pk")[: cap + 1].count()
    return counted if counted <= cap else None


def runs_page(
    workspace: Workspace, filters: RunListFilters, *, cursor: str = "", limit: int = 50
) -> tuple[list[Run], str]:
    """One keyset page of the workspace's runs, newest first, and the cursor of the next page ("").

    A text search first walks the filtered runs newest first (SEARCH_PROBE_RUNS at most, in
    growing chunks) and tests each chunk's runs and their model calls through the (run, type, seq)
    index: a broad term fills the page after a few hundred runs, whatever the workspace's size.
    A term too rare to fill the page there is answered by the trigram indexes instead
    (``runs_matching``), whose cost grows with the matches, not the runs."""
    if filters.sort != DEFAULT_SORT:
        return sorted_page(runs_matching(workspace, filters), filters.sort, cursor=cursor, limit=limit)
    if filters.q:
        found = _probe_search(workspace, filters, cursor=cursor, limit=limit)
        if found is not None:
            return found
    return keyset_page(runs_matching(workspace, filters), cursor=cursor, limit=limit, fields=RUN_LIST_FIELDS)


def _cursor_value(column: str, text: str) -> Any:
    if column == "started_at":
        return datetime.fromisoformat(text)
    if column == "cost_amount":
        value = float(text)
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(text)
        return value
    return int(text)


def sorted_page(qs: QuerySet[Run], sort: str, *, cursor: str, limit: int) -> tuple[list[Run], str]:
    """One keyset page of runs by a RUN_SORTS column (largest first; ``-key`` smallest first),
    ties by pk, after ``cursor`` ("<value>|<pk>" of the previous page's last run)."""
    ascending = sort.startswith("-")
    column = RUN_SORTS[sort.removeprefix("-")]
    if cursor:
        try:
            value_text, pk_text = cursor.rsplit("|", 1)
            value, after_pk = _cursor_value(column, value_text), int(pk_text)
        except ValueError:
            raise BadCursor(cursor[:40]) from None
        if ascending:
            qs = qs.filter(**{f"{column}__gte": value}).filter(
                Q(**{f"{column}__gt": value}) | Q(pk__gt=after_pk)
            )
        else:
            qs = qs.filter(**{f"{column}__lte": value}).filter(
                Q(**{f"{column}__lt": value}) | Q(pk__lt=after_pk)
            )
    order = (column, "pk") if ascending else (f"-{column}", "-pk")
    rows = list(qs.order_by(*order).only(*RUN_LIST_FIELDS, column)[: limit + 1])
    if len(rows) <= limit:
        return rows, ""
    rows = rows[:limit]
    last = getattr(rows[-1], column)
    text = last.isoformat() if isinstance(last, datetime) else repr(last)
    return rows, f"{text}|{rows[-1].pk}"


SEARCH_PROBE_RUNS = 3000  # newest filtered runs a text search may test one by one
SEARCH_PROBE_FIRST_CHUNK = 200  # a term not in one of these is rare: the trigram path answers it


def _probe_search(
    workspace: Workspace, filters: RunListFilters, *, cursor: str, limit: int
) -> tuple[list[Run], str] | None:
    """The page of a text search found by a bounded keyset walk (see ``runs_page``), or None for a
    term too rare for it: none in the first SEARCH_PROBE_FIRST_CHUNK runs, or so few that filling
    the page would test more than SEARCH_PROBE_RUNS runs (the caller then uses the indexes)."""
    candidates = runs_matching(workspace, replace(filters, q=""))
    found: list[Run] = []
    tested, chunk = 0, SEARCH_PROBE_FIRST_CHUNK
    while True:
        page, cursor = keyset_page(candidates, cursor=cursor, limit=chunk, fields=("started_at",))
        tested += len(page)
        hits = _probe_hits([run.pk for run in page], filters.q)
        found.extend(run for run in page if run.pk in hits)
        if len(found) > limit or not cursor:
            break
        if not found:
            return None
        chunk = -(-(limit + 1 - len(found)) * tested * 5 // (len(found) * 4))  # the density seen, +25%
        if tested + chunk > SEARCH_PROBE_RUNS:
            return None
    shown = {run.pk for run in found[:limit]}
    rows = list(Run.objects.filter(pk__in=shown).order_by("-started_at", "-pk").only(*RUN_LIST_FIELDS))
    if len(found) <= limit:
        return rows, ""
    last = found[limit - 1]
    return rows, f"{last.started_at.isoformat()}|{last.pk}"


def _probe_hits(pks: list[int], text: str) -> set[int]:
    """Which of these runs hold ``text`` (any case) in their id, title, workflow id or model calls.
    A run's model calls are tested only until one holds it (EXISTS), not all of them: a run of a
    million events that says the term in most calls costs a probe or two, not a million."""
    said = _saying(Event.objects.filter(run_id=OuterRef("pk"), type="model_io"), text)
    hits = Run.objects.filter(pk__in=pks).filter(
        Q(run_id__icontains=text) | Q(title__icontains=text) | Q(workflow_id__icontains=text) | Exists(said)
    )
    return set(hits.values_list("pk", flat=True))


def runs_to_go_to(
    workspace: Workspace, text: str, *, limit: int, hide_judge_calls: bool = False
) -> list[Run]:
    """The go-to dialog's runs (Ctrl-K): the newest whose id or title holds ``text`` (any case; on
    PostgreSQL through the trigram indexes of run id and title), or the newest runs when ``text``
    is empty. Only this workspace's runs (less the gate judges' calls with ``hide_judge_calls``)."""
    qs = runs_of(workspace).only("run_id", "title", "workflow_id", "status", "started_at")
    if hide_judge_calls:
        qs = without_judge_calls(qs)
    text = text.strip()
    if text:
        qs = qs.filter(Q(run_id__icontains=text) | Q(title__icontains=text))
    return list(qs.order_by("-started_at", "-id")[:limit])


def keyset_page(qs: QuerySet[Run], *, cursor: str, limit: int, fields=()) -> tuple[list[Run], str]:
    """One page of runs newest first ((started_at, pk) descending, the order of the run indexes)
    after ``cursor`` ("<started_at ISO>|<pk>" of the previous page's last run), and the next cursor."""
    return newest_first(qs, cursor=cursor, limit=limit, field="started_at", fields=tuple(fields))


def waiting_steps(runs: list[Run]) -> dict[int, list[str]]:
    """For the runs of a page that wait for a review: the steps whose gates are pending (one query,
    reading the projection of those runs only)."""
    pks = [run.pk for run in runs if run.pending_gates and run.status == RunStatus.RUNNING]
    if not pks:
        return {}
    out: dict[int, list[str]] = {}
    for pk, state in Run.objects.filter(pk__in=pks).values_list("pk", "state"):
        steps = [gate["stepId"] for gate in RunState.from_json(loads(state)).pending_gates()]
        out[pk] = list(dict.fromkeys(steps))
    return out


def workflow_ids(workspace: Workspace, *, limit: int = 200) -> list[str]:
    """The workflows the workspace has runs of, read from the run counters the write path keeps
    (bounded by days x workflows, not by the runs)."""
    ids = (
        RunRollup.objects.filter(workspace=workspace, runs__gt=0)
        .order_by("workflow_id")
        .values_list("workflow_id", flat=True)
        .distinct()[:limit]
    )
    return [from_column(i) if connection.vendor == "postgresql" else i for i in ids]


def _waiting(workspace: Workspace) -> QuerySet[Run]:
    """Running runs with a pending gate (the partial index run_ws_waiting holds exactly these)."""
    return Run.objects.for_workspace(workspace).filter(pending_gates__gt=0, status=RunStatus.RUNNING)


def runs_waiting_for_review(workspace: Workspace, *, limit: int, cursor: str = "") -> list[Run]:
    """Running runs with at least one pending gate, newest first."""
    return inbox_page(workspace, limit=limit, cursor=cursor)[0]


def inbox_page(workspace: Workspace, *, limit: int, cursor: str = "") -> tuple[list[Run], str]:
    """One keyset page of the runs waiting for review, newest first, and the next page's cursor."""
    return keyset_page(_waiting(workspace), cursor=cursor, limit=limit)


def pending_gate_count(workspace: Workspace) -> int:
    """Pending gates over the workspace's running runs: the run counters' sum (kept on the write
    path by runs.actions.rollups; bounded by days x workflows, not by the waiting runs)."""
    total = RunRollup.objects.filter(workspace=workspace).aggregate(n=Sum("waiting_gates"))["n"]
    return int(total or 0)
