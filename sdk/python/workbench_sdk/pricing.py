"""Cost of a model call from its usage and a price table given as plain data.

A price table maps a model to its prices per million tokens::

    {"claude-haiku-4-5": {"input": 1, "output": 5, "cache_read": 0.1, "cache_write": 1.25},
     ("openai", "gpt-5-mini"): {"input": "0.25", "output": 2, "currency": "USD"}}

Keys are a model id or a ``(provider, model)`` pair (the pair wins when both match). A price
row is a dict (``input``, ``output``, ``cache_read``/``cacheRead``, ``cache_write``/
``cacheWrite``, ``currency``; numbers or decimal strings) or any object with those attributes
(the server's ``Price`` rows work as they are). A price that a call needs and the row lacks
makes the cost unknown (``None``), never 0. The arithmetic is the server's: uncached input,
output, cache reads and cache writes, each tokens x price / 1,000,000, in ``Decimal``.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

MILLION = Decimal(1_000_000)
_FIELDS = {
    "input": ("input",),
    "output": ("output",),
    "cache_read": ("cache_read", "cacheRead"),
    "cache_write": ("cache_write", "cacheWrite"),
    "cache_write_1h": ("cache_write_1h", "cacheWrite1h"),
}

PriceTable = Mapping[Any, Any]


def _decimal(value: Any) -> Decimal | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError("a price must be a number, not a bool")
    if isinstance(value, Decimal):
        return value
    return Decimal(str(value))


def _field(row: Any, name: str) -> Any:
    for key in _FIELDS.get(name, (name,)):
        value = row.get(key) if isinstance(row, Mapping) else getattr(row, key, None)
        if value is not None:
            return value
    return None


def price_for(prices: PriceTable | None, provider: str, model: str | None) -> Any:
    """The row of ``prices`` for this call: ``(provider, model)`` first, then ``model``; else None."""
    if not prices or not model:
        return None
    row = prices.get((provider, model))
    if row is None:
        row = prices.get(model)
    return row


def cost_amount(
    usage: Mapping[str, Any], price: Any, *, cache_write_tokens: int = 0, cache_write_1h_tokens: int = 0
) -> Decimal | None:
    """The cost of a protocol ``model_io.usage`` (``inputTokens`` is the whole prompt, cache
    reads ``cachedInputTokens`` and ``cache_write_tokens`` included; ``outputTokens`` includes the
    reasoning) or None when a price it needs is missing. ``cache_write_1h_tokens``: the part of the
    cache writes kept for an hour (Anthropic), at the row's ``cache_write_1h`` price."""
    input_tokens = int(usage.get("inputTokens") or 0)
    cache_read = int(usage.get("cachedInputTokens") or 0)
    hour = min(cache_write_1h_tokens, cache_write_tokens)
    parts = [
        (max(0, input_tokens - cache_read - cache_write_tokens), "input"),
        (int(usage.get("outputTokens") or 0), "output"),
        (cache_read, "cache_read"),
        (cache_write_tokens - hour, "cache_write"),
        (hour, "cache_write_1h"),
    ]
    total = Decimal(0)
    for tokens, name in parts:
        if tokens == 0:
            continue
        per_million = _decimal(_field(price, name))
        if per_million is None:
            return None
        total += Decimal(tokens) * per_million / MILLION
    return total


def protocol_cost(amount: Decimal | None, currency: str | None) -> dict[str, Any] | None:
    """``model_io.cost`` (``{amount, currency}``) or None when unknown."""
    if amount is None:
        return None
    return {"amount": float(amount), "currency": (currency or "").strip().upper() or "USD"}


def cost_of(
    usage: Mapping[str, Any] | None,
    price: Any,
    *,
    cache_write_tokens: int = 0,
    cache_write_1h_tokens: int = 0,
) -> dict[str, Any] | None:
    """``model_io.cost`` from a usage and a price row; None if either is unknown."""
    if usage is None or price is None:
        return None
    amount = cost_amount(
        usage, price, cache_write_tokens=cache_write_tokens, cache_write_1h_tokens=cache_write_1h_tokens
    )
    return protocol_cost(amount, _field(price, "currency"))
