"""workbench_sdk.pricing: cost from a plain-dict price table."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from workbench_sdk.pricing import cost_amount, cost_of, price_for

USAGE = {"inputTokens": 1_000_000, "outputTokens": 200_000, "cachedInputTokens": 400_000}


def test_price_table_keys_and_rows():
    prices = {
        "claude-haiku-4-5": {"input": 1, "output": 5},
        ("anthropic", "claude-haiku-4-5"): {"input": "2", "output": 10},
    }
    assert price_for(prices, "anthropic", "claude-haiku-4-5") == prices[("anthropic", "claude-haiku-4-5")]
    assert price_for(prices, "bedrock", "claude-haiku-4-5") == prices["claude-haiku-4-5"]
    assert price_for(prices, "openai", "gpt") is None and price_for(None, "openai", "gpt") is None


def test_cost_of_uncached_output_and_cache_reads():
    price = {"input": 1, "output": "5", "cacheRead": 0.1, "currency": "eur"}
    # 600k uncached x 1 + 200k x 5 + 400k x 0.1, per million
    assert cost_amount(USAGE, price) == Decimal("1.64")
    assert cost_of(USAGE, price) == {"amount": 1.64, "currency": "EUR"}


def test_cache_writes_and_missing_prices_are_unknown_not_zero():
    price = {"input": 1, "output": 5, "cache_read": 0.1}
    assert cost_of(USAGE, price, cache_write_tokens=100_000) is None  # no cache_write price
    with_write = {**price, "cache_write": 1.25}
    assert cost_amount(USAGE, with_write, cache_write_tokens=100_000) == Decimal("1.665")
    assert cost_of({"inputTokens": 10, "outputTokens": 0}, {"output": 1}) is None
    assert cost_of(None, price) is None and cost_of(USAGE, None) is None


def test_price_objects_with_attributes():
    @dataclass
    class Price:
        input: Decimal | None = None
        output: Decimal | None = None
        cache_read: Decimal | None = None
        cache_write: Decimal | None = None
        currency: str = "USD"

    row = Price(input=Decimal(1), output=Decimal(5), cache_read=Decimal("0.1"))
    assert cost_of(USAGE, row) == {"amount": 1.64, "currency": "USD"}
