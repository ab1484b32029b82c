"""Cost of a call from its usage and a price table row. A missing price means unknown, never 0."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from importlib.metadata import PackageNotFoundError, version
from typing import Any

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
    cache_write_1h: Decimal | None = None  # Anthropic's 1 h cache writes (the 5 min ones: cache_write)


def billed_parts(usage: Usage) -> list[tuple[int, str]]:
    """The token counts a call is billed for, each with the price it takes: the uncached input,
    the output (reasoning included: a part of it, never added on top), cache reads, 5 min and 1 h
    cache writes (cache reads and writes are parts of the input, never added on top)."""
    hour = min(usage.cache_write_1h_tokens, usage.cache_write_tokens)
    return [
        (usage.uncached_input_tokens, "input"),
        (usage.output_tokens, "output"),
        (usage.cache_read_tokens, "cache_read"),
        (usage.cache_write_tokens - hour, "cache_write"),
        (hour, "cache_write_1h"),
    ]


def cost(usage: Usage, price: Price) -> Decimal | None:
    """The cost of ``usage``, or None when a price it needs is missing."""
    parts: list[tuple[int, Decimal | None]] = [
        (tokens, getattr(price, name)) for tokens, name in billed_parts(usage)
    ]
    total = Decimal(0)
    for tokens, per_million in parts:
        if tokens == 0:
            continue
        if per_million is None:
            return None
        total += Decimal(tokens) * per_million / MILLION
    return total


def protocol_cost(amount: Decimal | None, currency: str) -> dict[str, Any] | None:
    """``model_io.cost`` ({amount, currency}) or None when unknown."""
    if amount is None:
        return None
    return {"amount": float(amount), "currency": currency.strip().upper() or "USD"}


# --------------------------------------------------------------------------------------------
# The one price source: the workspace's own prices, else the genai-prices database

PRICING_KEY = "workbench.pricing"  # where a model_io payload says which source priced the call
SOURCE_WORKSPACE = "workspace"
SOURCE_GENAI_PRICES = "genai-prices"
SOURCE_CATALOGUE = "catalogue"  # the playground's shipped defaults: below genai-prices

# OTel GenAI / OpenInference provider names -> genai-prices provider ids (others are passed on
# as they are; unknown ones let genai-prices find the provider from the model name).
_PROVIDER_IDS = {
    "azure.ai.openai": "azure",
    "azure.ai.inference": "azure",
    "azure": "azure",
    "aws.bedrock": "aws",
    "bedrock": "aws",
    "gcp.gemini": "google",
    "gcp.vertex_ai": "google",
    "gcp.gen_ai": "google",
    "gemini": "google",
    "vertexai": "google",
    "mistral_ai": "mistral",
    "mistralai": "mistral",
    "x_ai": "x-ai",
    "xai": "x-ai",
    "ibm.watsonx.ai": "ibm",
}

PriceTable = dict[tuple[str, str] | str, Price]  # {(provider, model) or model: Price}


@dataclass(frozen=True)
class PricedCall:
    """A call's cost and where its price came from."""

    amount: Decimal
    currency: str
    source: str  # SOURCE_WORKSPACE or SOURCE_GENAI_PRICES
    model: str  # the model id the price row is for
    provider: str | None = None

    def protocol_cost(self) -> dict[str, Any]:
        return {"amount": float(self.amount), "currency": self.currency}

    def note(self) -> dict[str, Any]:
        """What ``payload["workbench.pricing"]`` records (the cost object itself is strict)."""
        out = {"source": self.source, "model": self.model}
        if self.provider:
            out["provider"] = self.provider
        if self.source == SOURCE_GENAI_PRICES:
            out["version"] = genai_prices_version()
        return out


def table_row(table: PriceTable | None, provider: str | None, model: str | None) -> Price | None:
    """The workspace's row for a call: ``(provider, model)`` first, then ``model``."""
    if not table or not model:
        return None
    row = table.get((provider, model)) if provider else None
    return row if row is not None else table.get(model)


def usage_of(
    protocol_usage: dict[str, Any], cache_write_tokens: int = 0, cache_write_1h_tokens: int = 0
) -> Usage:
    """A protocol ``model_io.usage`` (``inputTokens`` is the whole prompt) as a :class:`Usage`."""
    return Usage(
        input_tokens=int(protocol_usage.get("inputTokens") or 0),
        output_tokens=int(protocol_usage.get("outputTokens") or 0),
        cache_read_tokens=int(protocol_usage.get("cachedInputTokens") or 0),
        cache_write_tokens=int(cache_write_tokens or 0),
        cache_write_1h_tokens=int(cache_write_1h_tokens or 0),
    )


def _count(value: Any) -> int:
    return value if type(value) is int and value >= 0 else 0


def cache_writes(payload: Any) -> tuple[int, int]:
    """(cache writes, of which 1 h) a ``model_io`` response's payload says: ``cacheCreationInputTokens``
    (OTLP ingest) or the Anthropic response's own ``usage`` (``cache_creation_input_tokens`` and
    ``cache_creation.ephemeral_1h_input_tokens``), as the SDK records it."""
    if not isinstance(payload, dict):
        return 0, 0
    if "cacheCreationInputTokens" in payload:
        return _count(payload.get("cacheCreationInputTokens")), _count(
            payload.get("cacheCreation1hInputTokens")
        )
    usage = payload.get("usage")
    if not isinstance(usage, dict):
        return 0, 0
    split = usage.get("cache_creation")
    hour = _count(split.get("ephemeral_1h_input_tokens")) if isinstance(split, dict) else 0
    return _count(usage.get("cache_creation_input_tokens")), hour


def price_call(
    *,
    provider: str | None,
    model: str | None,
    usage: Usage,
    table: PriceTable | None = None,
    fallback: PriceTable | None = None,
    at: datetime | None = None,
) -> PricedCall | None:
    """The cost of one call: the workspace's own price for the model when it has one (a row with
    a price the call needs missing makes the cost unknown, never 0), else genai-prices' price in
    force at ``at`` (tiers, cache reads and writes), else the shipped catalogue's ``fallback``
    row; None when nobody knows the model."""
    if not model:
        return None
    row = table_row(table, provider, model)
    if row is not None:
        return _from_row(row, usage, SOURCE_WORKSPACE, provider, model)
    priced = genai_price(provider, model, usage, at)
    if priced is not None:
        return priced
    row = table_row(fallback, provider, model)
    return _from_row(row, usage, SOURCE_CATALOGUE, provider, model) if row is not None else None


def _from_row(row: Price, usage: Usage, source: str, provider: str | None, model: str) -> PricedCall | None:
    amount = cost(usage, row)
    if amount is None:
        return None
    return PricedCall(amount, (row.currency or "USD").strip().upper() or "USD", source, model, provider)


def genai_price(
    provider: str | None, model: str, usage: Usage, at: datetime | None = None
) -> PricedCall | None:
    found = _genai_model(_PROVIDER_IDS.get(provider or "", provider) or None, model)
    if found is None:
        return None
    gp_provider, gp_model = found
    import genai_prices  # here: its price snapshot loads on first use, not at start-up

    hour = min(usage.cache_write_1h_tokens, usage.cache_write_tokens)
    gp_usage = genai_prices.Usage(
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        **({"cache_write_1h_tokens": hour} if hour else {}),
    )
    moment = at or datetime.now(tz=UTC)
    try:
        # the prices in force that hour (price history by date), looked up once per hour and model
        model_price = _model_price(provider, model, moment.replace(minute=0, second=0, microsecond=0))
        total = _flat_total(model_price, usage)
        if total is None:  # tiers or other units: genai-prices' own arithmetic
            total = model_price.calc_price(gp_usage)["total_price"]
    except (LookupError, ValueError, ArithmeticError, TypeError):
        return None
    return PricedCall(Decimal(total), "USD", SOURCE_GENAI_PRICES, gp_model.id, gp_provider.id)


def _flat_total(model_price: Any, usage: Usage) -> Decimal | None:
    """The cost at flat per-million rates (the common case, ~40x quicker than genai-prices'
    general calculation); None when a rate the call needs is tiered or missing."""
    total = Decimal(0)
    for tokens, name in billed_parts(usage):
        if not tokens:
            continue
        rate = getattr(model_price, f"{name}_mtok", None)
        if type(rate) is not Decimal:
            return None
        total += rate * tokens / MILLION
    return total


@functools.lru_cache(maxsize=1024)
def _model_price(provider: str | None, model: str, hour: datetime) -> Any:
    found = _genai_model(_PROVIDER_IDS.get(provider or "", provider) or None, model)
    if found is None:
        raise LookupError(model)
    return found[1].get_prices(hour)


@functools.lru_cache(maxsize=1024)
def _genai_model(provider_id: str | None, model: str) -> tuple[Any, Any] | None:
    from genai_prices import data_snapshot  # here: the snapshot loads on first use, not at start-up

    snapshot = data_snapshot.get_snapshot()
    for candidate in (provider_id, None) if provider_id else (None,):
        try:
            return snapshot.find_provider_model(model, None, candidate, None)
        except LookupError:
            continue
    return None


@functools.cache
def genai_prices_version() -> str:
    try:
        return version("genai-prices")
    except PackageNotFoundError:
        return "unknown"


def genai_table_row(provider: str | None, model: str, at: datetime | None = None) -> dict[str, Any] | None:
    """genai-prices' flat per-million prices for a model (what ``GET /api/prices`` lists; tiers
    collapse to their base rate there, while :func:`price_call` applies them)."""
    found = _genai_model(_PROVIDER_IDS.get(provider or "", provider) or None, model)
    if found is None:
        return None
    gp_provider, gp_model = found
    prices = gp_model.get_prices(at or datetime.now(tz=UTC))
    row: dict[str, Any] = {"currency": "USD", "source": SOURCE_GENAI_PRICES, "provider": gp_provider.id}
    for ours, theirs in (
        ("input", "input_mtok"),
        ("output", "output_mtok"),
        ("cache_read", "cache_read_mtok"),
        ("cache_write", "cache_write_mtok"),
        ("cache_write_1h", "cache_write_1h_mtok"),
    ):
        value = getattr(prices, theirs, None)
        base = getattr(value, "base", value)
        if base is not None:
            row[ours] = str(base)
    return row


def price_event(
    event: dict[str, Any],
    table: PriceTable | None = None,
    fallback: PriceTable | None = None,
    *,
    at: datetime | None = None,
) -> PricedCall | None:
    """Give a ``model_io`` response that has a usage and no cost its ``cost`` and say in
    ``payload["workbench.pricing"]`` which source priced it (in place). A call already priced by
    whoever recorded it is left as it is; an unknown model stays without cost."""
    if event.get("type") != "model_io" or event.get("direction") != "response" or "cost" in event:
        return None
    usage = event.get("usage")
    if not isinstance(usage, dict):
        return None
    payload = event.get("payload")
    priced = price_call(
        provider=event.get("provider"),
        model=event.get("model"),
        usage=usage_of(usage, *cache_writes(payload)),
        table=table,
        fallback=fallback,
        at=at,
    )
    if priced is None:
        # the cost stays unknown: say why ("no cache-read price for <model>"), never a bare unknown
        why = {PRICING_KEY: {"source": "unpriced", "why": unpriced_reason(event, table, fallback)}}
        if payload is None:
            event["payload"] = why
        elif isinstance(payload, dict):
            event["payload"] = {**payload, **why}
        return None
    event["cost"] = priced.protocol_cost()
    if payload is None:
        event["payload"] = {PRICING_KEY: priced.note()}
    elif isinstance(payload, dict):
        event["payload"] = {**payload, PRICING_KEY: priced.note()}
    return priced


RATE_WORDS = {
    "input": "input",
    "output": "output",
    "cache_read": "cache-read",
    "cache_write": "cache-write",
    "cache_write_1h": "1 h cache-write",
}


def unpriced_reason(event: dict[str, Any], table: PriceTable | None, fallback: PriceTable | None) -> str:
    """Why a ``model_io`` response got no cost, in words: "no cache-read price for claude-x" (a
    price row that lacks a rate the call needs), "no price for claude-x" (no source knows the
    model), "the call names no model"."""
    model = event.get("model")
    if not isinstance(model, str) or not model:
        return "the call names no model"
    found_usage, found_payload = event.get("usage"), event.get("payload")
    usage_doc: dict[str, Any] = found_usage if isinstance(found_usage, dict) else {}
    payload: dict[str, Any] = found_payload if isinstance(found_payload, dict) else {}
    usage = usage_of(usage_doc, *cache_writes(payload))
    provider = event.get("provider") if isinstance(event.get("provider"), str) else None
    row = table_row(table, provider, model) or table_row(fallback, provider, model)
    if row is None:
        return f"no price for {model} (neither the workspace's prices nor genai-prices know it)"
    needed = billed_parts(usage)
    missing = [RATE_WORDS[name] for tokens, name in needed if tokens and getattr(row, name) is None]
    if missing:
        return f"no {' or '.join(missing)} price for {model}"
    return f"no price for {model}"
