"""Keyset pages of the REST lists, one way for every list: the page's rows come from a selector
that reads a keyset range (runs.selectors.keyset), the next page's URL is the ``Link`` header's
``rel="next"`` (this request's query with ``cursor=`` replaced by the opaque cursor of the last
row shown), and a cursor this API did not give answers 400 ``INVALID_INPUT`` with nothing read.
No list stops at a fixed count: a client follows ``next`` until there is none."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from ninja import Schema
from pydantic import Field

from runs.api.errors import ApiError
from runs.protocol.errors import ErrorCode
from runs.selectors.keyset import BadCursor, by_name, newest_first, oldest_first

MAX_PAGE = 500

NEXT_DOC = (
    'The next page, when there is one, is the `Link` header\'s `rel="next"` URL (this query with '
    "`cursor=` set to an opaque cursor); follow it until there is none. A cursor this list did not "
    "give answers 400 `INVALID_INPUT`."
)


def keyset[T](
    request: HttpRequest, response: HttpResponse, read: Callable[[], tuple[list[T], str]]
) -> list[T]:
    """The rows ``read()`` gives (a selector's ``(rows, next cursor)``), the ``Link`` to the next
    page set on ``response`` when there is one."""
    try:
        rows, next_cursor = read()
    except BadCursor:
        raise ApiError(ErrorCode.INVALID_INPUT, "cursor: not a cursor this list gave") from None
    if next_cursor:
        query = [(k, v) for k, v in request.GET.items() if k != "cursor"] + [("cursor", next_cursor)]
        response["Link"] = f'<{request.path}?{urlencode(query)}>; rel="next"'
    return rows


class PageQuery(Schema):
    """``?limit=&cursor=`` of a list (a list with filters subclasses it)."""

    limit: int = Field(default=100, description=f"How many rows a page holds (clamped to 1..{MAX_PAGE}).")
    cursor: str = Field(default="", description="The opaque cursor of the `Link` header's next page.")

    def size(self) -> int:
        return min(max(self.limit, 1), MAX_PAGE)


def newest(request: HttpRequest, response: HttpResponse, qs: QuerySet[Any], page: PageQuery) -> list[Any]:
    """A page of ``qs`` newest first by (created_at, pk), the next page linked."""
    return keyset(request, response, lambda: newest_first(qs, cursor=page.cursor, limit=page.size()))


def oldest(request: HttpRequest, response: HttpResponse, qs: QuerySet[Any], page: PageQuery) -> list[Any]:
    """A page of ``qs`` oldest first by (created_at, pk), the next page linked."""
    return keyset(request, response, lambda: oldest_first(qs, cursor=page.cursor, limit=page.size()))


def named(
    request: HttpRequest, response: HttpResponse, qs: QuerySet[Any], page: PageQuery, *, name: str = "name"
) -> list[Any]:
    """A page of ``qs`` in the order of its unique text ``name``, the next page linked."""
    return keyset(request, response, lambda: by_name(qs, name=name, cursor=page.cursor, limit=page.size()))
