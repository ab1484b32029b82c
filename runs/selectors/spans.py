"""Reads of the trace view: one level of a run's span tree at a time, a span, the failed spans.

Every read is a range scan of the (run, type, span_ref, seq) index (``Event.span_ref``, see
``runs.models.span_ref_of``) or a probe of the primary key, bounded by a page size: a run of
100,000 spans opens as fast as one of 100. Nothing here counts or loads the whole trace:
``failed_count`` reads the failed spans' index entries, at most FAILED_COUNT_CAP + 1 of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from django.db import connection

from runs.fields import column_value, json_text_needle
from runs.models import SPAN_END, SPAN_FAILED, SPAN_PARENT, Event, Run
from runs.presenters.span_tree import Axis, Level, SpanNode, build_level, close, first_end_after, node_of
from runs.presenters.waterfall import parse_ts
from runs.protocol.values import loads

LEVEL_PAGE = 100  # children of one span per page
FAILED_PAGE = 50
SEARCH_WINDOW = 20_000  # span_started events scanned per text search
START_LOOKBACK = 20_000  # seqs before its end in which a failed span's start is looked for


@dataclass
class SpanLevel:
    level: Level
    parent: str
    lo: int  # children started after this seq...
    hi: int | None  # ...and up to this one (the parent's end), None: open-ended
    next_after: int | None  # another page starts after this seq


def _refs(
    run: Run, etype: str, refs: list[str], cols: tuple[str, ...], *, after: int
) -> list[tuple[Any, ...]]:
    """Rows of ``etype`` after seq ``after`` whose span_ref is one of ``refs``: a multi-probe of the
    (run, type, span_ref, seq) index, at most a page's worth per ref."""
    if not refs:
        return []
    limit = len(refs) * 4
    if connection.vendor == "postgresql":
        # One probe per ref (LATERAL; OFFSET 0 keeps each a probe): given ``span_ref IN (...)`` and
        # ``ORDER BY seq LIMIT``, a planner without statistics of the run's rows (a run just imported)
        # walked all its rows of the type by event_run_type and filtered the refs (394 ms on a
        # 1M-event run, seconds at 10M). The first ``limit`` rows by seq of all refs are among the
        # first ``limit`` of each: the same rows.
        table = connection.ops.quote_name(Event._meta.db_table)
        quoted = [connection.ops.quote_name(column) for column in cols]
        columns = ", ".join(quoted)
        sql = (
            f"SELECT {', '.join('e.' + column for column in quoted)}"
            f" FROM unnest(%s::text[]) AS c(ref) CROSS JOIN LATERAL (SELECT {columns} FROM {table}"
            " WHERE run_id = %s AND type = %s AND span_ref = c.ref AND seq > %s"
            " ORDER BY seq LIMIT %s OFFSET 0) AS e ORDER BY e.seq LIMIT %s"
        )
        spelt = [column_value(ref, connection, 220) for ref in dict.fromkeys(refs)]  # as stored
        with connection.cursor() as cursor:
            cursor.execute(sql, [spelt, run.pk, etype, after, limit, limit])
            return [tuple(row) for row in cursor.fetchall()]
    qs = Event.objects.filter(run=run, type=etype, span_ref__in=refs, seq__gt=after)
    return list(qs.order_by("seq").values_list(*cols)[:limit])


def ends_of(run: Run, span_ids: list[str], *, after: int = 0) -> dict[str, list[tuple[int, dict[str, Any]]]]:
    """The ``span_ended`` events of these span ids after seq ``after``, by id, in seq order."""
    ids = list(dict.fromkeys(span_ids))
    refs = [p + sid for sid in ids for p in (SPAN_END, SPAN_FAILED)]
    rows = sorted(_refs(run, "span_ended", refs, ("seq", "body"), after=after))
    out: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for seq, body in rows:
        data = loads(body)
        out.setdefault(str(data.get("spanId")), []).append((seq, data))
    return out


def _with_children(run: Run, nodes_ids: list[str], lo: int) -> set[str]:
    """Which of these spans have child spans started after seq ``lo``: one statement, one index
    probe per span (EXISTS stops at the first child, however many there are)."""
    refs = [column_value(SPAN_PARENT + sid, connection, 220) for sid in dict.fromkeys(nodes_ids)]
    if not refs:
        return set()
    table = connection.ops.quote_name(Event._meta.db_table)
    if connection.vendor == "postgresql":
        # OFFSET 0: the EXISTS stays a probe per ref. Pulled up into a semi-join, a planner without
        # statistics of the run's rows (a run just imported) read all its span starts (458 ms on a
        # 1M-event run) and matched them against the refs.
        sql = (
            f"SELECT c.ref FROM unnest(%s::text[]) AS c(ref) WHERE EXISTS (SELECT 1 FROM {table} e"
            " WHERE e.run_id = %s AND e.type = 'span_started' AND e.span_ref = c.ref AND e.seq > %s OFFSET 0)"
        )
        params: list[Any] = [refs, run.pk, lo]
    else:
        candidates = " UNION ALL ".join(["SELECT CAST(%s AS varchar(220)) AS ref"] * len(refs))
        sql = (
            f"SELECT c.ref FROM ({candidates}) c WHERE EXISTS (SELECT 1 FROM {table} e"
            " WHERE e.run_id = %s AND e.type = 'span_started' AND e.span_ref = c.ref AND e.seq > %s)"
        )
        params = [*refs, run.pk, lo]
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        found = [row[0] for row in cursor.fetchall()]
    return {ref[len(SPAN_PARENT) :] for ref in found if isinstance(ref, str)}


def span_level(
    run: Run,
    *,
    parent: str = "",
    lo: int = 0,
    hi: int | None = None,
    after: int = 0,
    axis: Axis | None = None,
    limit: int = LEVEL_PAGE,
) -> SpanLevel:
    """One page of the children of the span ``parent`` that started after seq ``lo`` (and up to
    ``hi``, the parent's end: a reused span id names another instance outside it), or of the
    roots (``parent=""``), from seq ``after``. Bars on ``axis`` (the parent; the run for roots)."""
    limit = max(1, min(limit, LEVEL_PAGE))
    qs = Event.objects.filter(
        run=run, type="span_started", span_ref=SPAN_PARENT + parent, seq__gt=max(lo, after)
    )
    if hi is not None:
        qs = qs.filter(seq__lt=hi)
    raw = list(qs.order_by("seq").values_list("seq", "body")[: limit + 1])
    more = len(raw) > limit
    starts = [(seq, loads(body)) for seq, body in raw[:limit]]
    ids = [str(body.get("spanId") or "") for _seq, body in starts]
    first = starts[0][0] if starts else lo
    ends = ends_of(run, ids, after=first)
    level = build_level(
        starts,
        ends,
        axis=axis or Axis(None, 0.0),
        parents_with_children=_with_children(run, ids, first),
    )
    return SpanLevel(level, parent, lo, hi, starts[-1][0] if more and starts else None)


def span_at(run: Run, seq: int) -> SpanNode | None:
    """The span started by event ``seq``, closed by its end when there is one."""
    row = Event.objects.filter(run=run, seq=seq, type="span_started").values_list("body", flat=True).first()
    if row is None:
        return None
    node = node_of(seq, loads(row))
    end = first_end_after(seq, ends_of(run, [node.span_id], after=seq).get(node.span_id, []))
    if end is not None:
        close(node, *end)
    return node


# the failed spans counted one by one; past it the page says "10,000+" (a run of ten million events
# with 100,000 failed spans read 100,000 index entries, and as many heap pages before a VACUUM,
# for every open of its page: 0.4-7 s)
FAILED_COUNT_CAP = 10_000


def failed_count(run: Run, *, cap: int = FAILED_COUNT_CAP) -> int:
    """How many spans failed, up to ``cap + 1`` (``cap + 1`` = more than ``cap``): the ``error:``
    range of the index, no event body read."""
    failed = Event.objects.filter(
        run=run, type="span_ended", span_ref__gte=SPAN_FAILED, span_ref__lt=SPAN_FAILED[:-1] + ";"
    )
    return failed.order_by().values("seq")[: cap + 1].count()  # index order: stops after cap + 1


def failed_spans(run: Run, *, after: int = 0, limit: int = FAILED_PAGE) -> tuple[list[SpanNode], int | None]:
    """The failed spans ending after seq ``after``, in seq order (a page), each with its start
    (looked for among the START_LOOKBACK seqs before its end), and the seq after which more end."""
    raw = list(
        Event.objects.filter(
            run=run,
            type="span_ended",
            span_ref__gte=SPAN_FAILED,
            span_ref__lt=SPAN_FAILED[:-1] + ";",
            seq__gt=after,
        )
        .order_by("seq")
        .values_list("seq", "body")[: limit + 1]
    )
    more = len(raw) > limit
    nodes: list[SpanNode] = []
    for seq, body in raw[:limit]:
        end = loads(body)
        sid = str(end.get("spanId") or "")
        needle = orjson.dumps({"spanId": sid}).decode()[1:-1]
        start = (
            Event.objects.filter(
                run=run,
                type="span_started",
                seq__lt=seq,
                seq__gte=seq - START_LOOKBACK,
                body__contains=needle,
            )
            .order_by("-seq")
            .values_list("seq", "body")
            .first()
        )
        node = node_of(start[0], loads(start[1])) if start else node_of(0, {"spanId": sid, "name": sid})
        close(node, seq, end)
        nodes.append(node)
    return nodes, raw[limit - 1][0] if more else None


def search_spans(
    run: Run, q: str, *, after: int = 0, limit: int = FAILED_PAGE
) -> tuple[list[SpanNode], int | None]:
    """Spans whose start event mentions ``q`` (name, kind, step, attributes), starting after seq
    ``after``, at most SEARCH_WINDOW seqs scanned; and where to continue (None: done)."""
    high = after + SEARCH_WINDOW
    needle = json_text_needle(q)
    raw = list(
        Event.objects.filter(
            run=run, type="span_started", seq__gt=after, seq__lte=high, body__icontains=needle
        )
        .order_by("seq")
        .values_list("seq", "body")[: limit + 1]
    )
    starts = [(seq, loads(body)) for seq, body in raw[:limit]]
    ends = ends_of(run, [str(b.get("spanId") or "") for _s, b in starts], after=starts[0][0] if starts else 0)
    nodes = []
    for seq, body in starts:
        node = node_of(seq, body)
        end = first_end_after(seq, ends.get(node.span_id, []))
        if end is not None:
            close(node, *end)
        nodes.append(node)
    if len(raw) > limit:
        return nodes, raw[limit - 1][0]
    return nodes, (high if high < run.last_seq else None)


def spans_between(
    run: Run, after: int, upto: int, *, limit: int = 2000
) -> tuple[list[tuple[int, dict[str, Any]]], list[tuple[int, dict[str, Any]]]]:
    """The ``span_started`` and ``span_ended`` events of seqs ``after``+1..``upto`` (a live update's
    range), at most ``limit`` of each, in seq order: (starts, ends)."""
    rows = (
        Event.objects.filter(run=run, type__in=("span_started", "span_ended"), seq__gt=after, seq__lte=upto)
        .order_by("seq")
        .values_list("seq", "type", "body")
    )
    starts: list[tuple[int, dict[str, Any]]] = []
    ends: list[tuple[int, dict[str, Any]]] = []
    for seq, etype, body in rows[: 2 * limit]:
        (starts if etype == "span_started" else ends).append((seq, loads(body)))
    return starts[:limit], ends[:limit]


def had_spans_by(run: Run, seq: int) -> bool:
    """Whether a span started at or before ``seq`` (one probe of the (run, type, seq) index)."""
    return Event.objects.filter(run=run, type="span_started", seq__lte=seq).exists()


SPAN_EVENTS_PAGE = 300  # events read inside one span for its detail pane


def span_events(
    run: Run, node: SpanNode, *, limit: int = SPAN_EVENTS_PAGE
) -> tuple[list[tuple[int, dict[str, Any]]], bool]:
    """The events inside a span, for its detail pane: those after its start and before its end
    (open: after its start) that carry the start's correlation id when it has one (a span ingested
    from OTLP: its events interleave with other spans'; the (run, correlation_id, seq) index),
    else all of that seq range (the primary key's range). At most ``limit``, in seq order, and
    whether more were left. A child span's events are in the range too: the presenter
    (runs.presenters.span_detail) leaves them to the child."""
    rows = Event.objects.filter(run=run, seq__gt=node.start_seq)
    if node.end_seq is not None:
        rows = rows.filter(seq__lt=node.end_seq)
    correlation = (
        Event.objects.filter(run=run, seq=node.start_seq).values_list("correlation_id", flat=True).first()
        or ""
    )
    if correlation:
        rows = rows.filter(correlation_id=correlation)
    raw = list(rows.order_by("seq").values_list("seq", "body")[: limit + 1])
    return [(seq, loads(body)) for seq, body in raw[:limit]], len(raw) > limit


ANCESTORS_MAX = 64  # levels walked up from a selected span


def span_start(run: Run, span_id: str, *, before: int) -> SpanNode | None:
    """The span ``span_id`` started last before seq ``before`` (looked for among the
    START_LOOKBACK seqs before it, then from the run's start: the first such span), closed by its
    end; None when not found."""
    needle = orjson.dumps({"spanId": span_id}).decode()[1:-1]
    starts = Event.objects.filter(run=run, type="span_started", seq__lt=before, body__contains=needle)
    row = (
        starts.filter(seq__gte=before - START_LOOKBACK).order_by("-seq").values_list("seq", flat=True).first()
    )
    if row is None and before > START_LOOKBACK:
        # a parent far before (a root whose children run long): from the run's start, where
        # roots begin (the scan stops at the first match)
        row = starts.order_by("seq").values_list("seq", flat=True).first()
    return None if row is None else span_at(run, row)


def span_ancestors(run: Run, node: SpanNode) -> list[SpanNode]:
    """The spans above ``node``, the root first (as far as they are found)."""
    out: list[SpanNode] = []
    current = node
    while current.parent_id and len(out) < ANCESTORS_MAX:
        parent = span_start(run, current.parent_id, before=current.start_seq)
        if parent is None:
            break
        out.append(parent)
        current = parent
    return out[::-1]


def span_extent(run: Run, *, tail: int = 50) -> tuple[str, str] | None:
    """The run's spans' own time extent (start ts, end ts): the first span's start and the latest
    end among the last ``tail`` span ends and the last start (three bounded probes of the
    (run, type, seq) index). None: no span."""
    first = (
        Event.objects.filter(run=run, type="span_started")
        .order_by("seq")
        .values_list("ts", flat=True)
        .first()
    )
    if first is None:
        return None
    last_start = (
        Event.objects.filter(run=run, type="span_started").order_by("-seq").values_list("ts", flat=True)[0]
    )
    ends = (
        Event.objects.filter(run=run, type="span_ended")
        .order_by("-seq")
        .values_list("body", flat=True)[:tail]
    )
    best = parse_ts(last_start)
    for body in ends:
        data = loads(body)
        instant = parse_ts(data.get("ts"))
        if instant is not None and (best is None or instant > best):
            best = instant
    start = parse_ts(first)
    if start is None or best is None or best < start:
        return None
    return start.isoformat(), best.isoformat()
