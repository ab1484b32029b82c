"""Cost of a call from its usage and a price table row. A missing price means unknown, never 0."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from runs.providers.base import Usage

MILLION = Decimal(1_000_000)


@dataclass(frozen=True)
class Price:
    """Prices per million tokens; None = not known."""

    input: Decimal | None = None
    output: Decimal | None = None
    cache_read: Decimal | None = None
    cache_write: Decimal | None = None
    currency: str = "USD"


def cost(usage: Usage, price: Price) -> Decimal | None:
    """The cost of ``usage``, or None when a price it needs is missing."""
    parts: list[tuple[int, Decimal | None]] = [
        (usage.uncached_input_tokens, price.input),
        (usage.output_tokens, price.output),
        (usage.cache_read_tokens, price.cache_read),
        (usage.cache_write_tokens, price.cache_write),
    ]
    total = Decimal(0)
    for tokens, per_million in parts:
        if tokens == 0:
            continue
        if per_million is None:
            return None
        total += Decimal(tokens) * per_million / MILLION
    return total


def protocol_cost(amount: Decimal | None, currency: str) -> dict | None:
    """``model_io.cost`` ({amount, currency}) or None when unknown."""
    if amount is None:
        return None
    return {"amount": float(amount), "currency": currency.strip().upper() or "USD"}
