"""The effective price table of a workspace: what prices every recorded model call.

One source for every place a call is recorded (OTLP ingest, the playground, the in-process SDK
sink, the host API) and for ``GET /api/prices``: the prices the workspace set for its own models,
else the genai-prices database (``runs.providers.pricing``), else the shipped catalogue.

The workspace's rows live in the playground's model catalogue, which sits above ``runs``: the
playground registers a reader here in its ``AppConfig.ready`` (the way ``runs.actions.notify``
gets its listeners), so ``runs`` never imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from runs.models import Workspace
from runs.providers.base import Usage
from runs.providers.pricing import (
    SOURCE_CATALOGUE,
    SOURCE_WORKSPACE,
    Price,
    PricedCall,
    PriceTable,
    genai_table_row,
    price_call,
    price_event,
)

# reader(workspace) -> (own rows, catalogue rows), each {(provider, model): Price}
TableReader = Callable[[Workspace], tuple[PriceTable, PriceTable]]
_readers: list[TableReader] = []


def register_price_reader(reader: TableReader) -> None:
    if reader not in _readers:
        _readers.append(reader)


@dataclass
class PriceBook:
    """A workspace's price rows, read once, for pricing many calls."""

    own: PriceTable = field(default_factory=dict)
    catalogue: PriceTable = field(default_factory=dict)

    def price(self, *, provider: str | None, model: str | None, usage: Usage, at: datetime | None = None):
        return price_call(
            provider=provider, model=model, usage=usage, table=self.own, fallback=self.catalogue, at=at
        )

    def price_event(self, event: dict, *, at: datetime | None = None) -> PricedCall | None:
        return price_event(event, self.own, self.catalogue, at=at)


def price_book(workspace: Workspace) -> PriceBook:
    book = PriceBook()
    for reader in _readers:
        own, catalogue = reader(workspace)
        book.own.update(own)
        book.catalogue.update(catalogue)
    return book


def _row_json(price: Price, source: str, provider: str | None) -> dict[str, Any]:
    row: dict[str, Any] = {"currency": price.currency, "source": source}
    if provider:
        row["provider"] = provider
    for name in ("input", "output", "cache_read", "cache_write", "cache_write_1h"):
        value = getattr(price, name)
        if value is not None:
            row[name] = str(value)
    return row


def effective_prices(
    workspace: Workspace, *, models: Sequence[tuple[str | None, str]] = ()
) -> dict[str, Any]:
    """``GET /api/prices``: ``{"prices": {model: row}, ...}`` with the workspace's rows (its own
    first, then genai-prices for the catalogue's models and any ``models`` asked for, then the
    catalogue's own prices); each row says its ``source``. Prices per million tokens, as text."""
    book = price_book(workspace)
    out: dict[str, dict[str, Any]] = {}
    for key, price in book.own.items():
        if isinstance(key, tuple):
            out.setdefault(key[1], _row_json(price, SOURCE_WORKSPACE, key[0]))
    wanted: list[tuple[str | None, str]] = [key for key in book.catalogue if isinstance(key, tuple)]
    wanted += models
    for provider, model in wanted:
        if model in out:
            continue
        row = genai_table_row(provider, model)
        if row is not None:
            out[model] = row
        elif provider is not None and (provider, model) in book.catalogue:
            out[model] = _row_json(book.catalogue[(provider, model)], SOURCE_CATALOGUE, provider)
    return {"prices": out, "unit": "per million tokens"}


def price_row(book: PriceBook, provider: str | None, model: str | None) -> dict[str, Any] | None:
    """One model's row as the host SDK's price tables hold it (decimal text per million tokens,
    with its ``source``): the workspace's own price, else genai-prices, else the catalogue."""
    if not model:
        return None
    own = _priced(book.own, provider, model)
    if own is not None:
        return _row_json(own, SOURCE_WORKSPACE, provider)
    row = genai_table_row(provider, model)
    if row is not None:
        return row
    listed = _priced(book.catalogue, provider, model)
    return _row_json(listed, SOURCE_CATALOGUE, provider) if listed is not None else None


def _priced(table: dict[tuple[str, str] | str, Price], provider: str | None, model: str) -> Price | None:
    """A table's price of ``model`` from ``provider``, else of the model by its name alone."""
    price = table.get((provider, model)) if provider else None
    return price if price is not None else table.get(model)
