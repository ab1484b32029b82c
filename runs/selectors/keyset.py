"""Keyset pages for every list (runs, inbox, tokens, members, deliveries, notes): a page is the rows
after the previous page's last key, read as one range of an index in the list's order, so the
100,000th page costs what the first does (an OFFSET reads and drops every row before it).

A cursor is text the next page's link carries: ``<timestamp ISO>|<pk>`` for lists newest first
(``newest_first``), the last name for lists by a unique name (``by_name``). A cursor that does not
parse raises BadCursor (the pages answer 400, nothing else happens)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet

CURSOR_MAX = 300  # characters: a name cursor is a username (150) or shorter


class BadCursor(ValueError):
    code = "INVALID_INPUT"


def parse_time_cursor(cursor: str) -> tuple[datetime, int]:
    """``<ISO timestamp>|<pk>`` -> (timestamp, pk); BadCursor for anything else."""
    try:
        ts_text, pk_text = cursor.split("|", 1)
        ts = datetime.fromisoformat(ts_text)
        pk = int(pk_text)
        if not 0 < pk < 2**63:
            raise ValueError(pk_text)
    except ValueError:
        raise BadCursor(cursor) from None
    return ts, pk


def newest_first(
    qs: QuerySet[Any], *, cursor: str, limit: int, field: str = "created_at", fields: tuple[str, ...] = ()
) -> tuple[list[Any], str]:
    """One page of ``qs`` by (``field``, pk) descending after ``cursor``, and the next cursor ("").

    ``field <= ts`` bounds the index range; the tie-break on pk filters the few rows at ``ts``.
    The list's index must be (<its filter columns>, -field, -id)."""
    if cursor:
        ts, after_pk = parse_time_cursor(cursor)
        qs = qs.filter(**{f"{field}__lte": ts}).filter(Q(**{f"{field}__lt": ts}) | Q(pk__lt=after_pk))
    qs = qs.order_by(f"-{field}", "-pk")
    if fields:
        qs = qs.only(*fields)
    rows = list(qs[: limit + 1])
    if len(rows) <= limit:
        return rows, ""
    rows = rows[:limit]
    last = rows[-1]
    return rows, f"{getattr(last, field).isoformat()}|{last.pk}"


def oldest_first(
    qs: QuerySet[Any], *, cursor: str, limit: int, field: str = "created_at"
) -> tuple[list[Any], str]:
    """:func:`newest_first` the other way: (``field``, pk) ascending after ``cursor`` (lists kept in
    the order their rows were made: webhooks, monitors)."""
    if cursor:
        ts, after_pk = parse_time_cursor(cursor)
        qs = qs.filter(**{f"{field}__gte": ts}).filter(Q(**{f"{field}__gt": ts}) | Q(pk__gt=after_pk))
    rows = list(qs.order_by(field, "pk")[: limit + 1])
    if len(rows) <= limit:
        return rows, ""
    rows = rows[:limit]
    last = rows[-1]
    return rows, f"{getattr(last, field).isoformat()}|{last.pk}"


def by_name(qs: QuerySet[Any], *, name: str, cursor: str, limit: int) -> tuple[list[Any], str]:
    """One page of ``qs`` in the order of the unique text ``name`` (a path such as
    ``user__username``) after ``cursor`` (the previous page's last name), and the next cursor."""
    if len(cursor) > CURSOR_MAX or "\x00" in cursor:
        raise BadCursor(cursor[:40])
    if cursor:
        qs = qs.filter(**{f"{name}__gt": cursor})
    rows = list(qs.order_by(name)[: limit + 1])
    if len(rows) <= limit:
        return rows, ""
    rows = rows[:limit]
    value: Any = rows[-1]
    for part in name.split("__"):
        value = getattr(value, part)
    return rows, str(value)
