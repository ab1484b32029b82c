"""A ledger table in pages (issue 52): a workspace's "By user" or "By tenant" table can hold
thousands of rows; the page shows TABLE_ROWS of them at a time and one row that sums the rows on
the other pages, so every table still adds up to the totals."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

TABLE_ROWS = 25  # rows of one ledger table per page

_SUMS = ("eventCount", "inputTokens", "outputTokens", "totalTokens", "cachedInputTokens", "reasoningTokens")


def _exact(value: Any) -> Decimal:
    # amounts as written in JSON (the shortest text of a double), added exactly
    return Decimal(repr(value)) if isinstance(value, float) else Decimal(value or 0)


def _number(value: Decimal) -> int | Decimal:
    return int(value) if value == value.to_integral_value() else value


def sum_totals(totals: list[dict[str, Any]]) -> dict[str, Any]:
    """The ledger totals (``eventCount`` .. ``costByCurrency``) of several rows added up."""
    out: dict[str, Any] = {}
    for key in (*_SUMS, "durationMs"):
        out[key] = _number(sum((_exact(t.get(key, 0)) for t in totals), Decimal(0)))
    costs: dict[str, Decimal] = {}
    for t in totals:
        for currency, amount in (t.get("costByCurrency") or {}).items():
            costs[currency] = costs.get(currency, Decimal(0)) + _exact(amount)
    out["costByCurrency"] = {currency: _number(amount) for currency, amount in costs.items()}
    return out


def page_of(rows: list[dict[str, Any]], page: int, size: int = TABLE_ROWS) -> dict[str, Any]:
    """Page ``page`` (1-based, clamped) of ``rows``: its rows, the sum of the rows on the other pages
    (``others``, ``None`` when there are none), the row numbers shown and the neighbouring pages."""
    pages = max(1, -(-len(rows) // size))
    page = min(max(page, 1), pages)
    start = (page - 1) * size
    shown = rows[start : start + size]
    rest = rows[:start] + rows[start + size :]
    return {
        "rows": shown,
        "others": sum_totals([r["totals"] for r in rest]) if rest else None,
        "others_count": len(rest),
        "page": page,
        "pages": pages,
        "first_row": start + 1,
        "last_row": start + len(shown),
        "row_count": len(rows),
        "previous": page - 1 if page > 1 else None,
        "next": page + 1 if page < pages else None,
    }
