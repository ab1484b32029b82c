"""The workspace's price rows for runs.selectors.prices (registered in PlaygroundConfig.ready).

A model entry of the workspace's own catalogue with a price is the workspace's price for that
model (it overrides genai-prices); the shipped global catalogue's prices are kept as the last
resort for models genai-prices does not know.
"""

from __future__ import annotations

from playground.models import ModelEntry
from runs.models import Workspace
from runs.providers.pricing import Price, PriceTable


def price_rows(workspace: Workspace) -> tuple[PriceTable, PriceTable]:
    own: PriceTable = {}
    catalogue: PriceTable = {}
    rows = (
        ModelEntry.objects.visible_to(workspace)
        .filter(is_active=True)
        .exclude(input_price=None, output_price=None)  # no price set: genai-prices answers for it
        .order_by("position", "pk")
        .values_list(
            "workspace_id",
            "provider__kind",
            "model_id",
            "input_price",
            "output_price",
            "cache_read_price",
            "cache_write_price",
            "cache_write_1h_price",
            "currency",
        )
    )  # plain rows: OTLP ingest asks for them on every request that carries a model call
    for workspace_id, kind, model_id, input_price, output_price, read, write, write_1h, currency in rows:
        price = Price(
            input_price,
            output_price,
            cache_read=read,
            cache_write=write,
            currency=currency,
            cache_write_1h=write_1h,
        )
        target = own if workspace_id is not None else catalogue
        target.setdefault((kind, model_id), price)
        target.setdefault(model_id, price)  # a call whose provider is named otherwise
    return own, catalogue
