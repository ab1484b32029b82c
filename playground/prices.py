"""The workspace's price rows for runs.selectors.prices (registered in PlaygroundConfig.ready).

A model entry of the workspace's own catalogue with a price is the workspace's price for that
model (it overrides genai-prices); the shipped global catalogue's prices are kept as the last
resort for models genai-prices does not know.
"""

from __future__ import annotations

from playground.models import ModelEntry
from runs.models import Workspace
from runs.providers.pricing import PriceTable


def price_rows(workspace: Workspace) -> tuple[PriceTable, PriceTable]:
    own: PriceTable = {}
    catalogue: PriceTable = {}
    entries = (
        ModelEntry.objects.visible_to(workspace)
        .filter(is_active=True)
        .select_related("provider")
        .order_by("position", "pk")
    )
    for entry in entries:
        price = entry.price()
        if price.input is None and price.output is None:
            continue  # no price set: genai-prices answers for it
        target = own if entry.workspace_id is not None else catalogue
        target.setdefault((entry.provider.kind, entry.model_id), price)
        target.setdefault(entry.model_id, price)  # a call whose provider is named otherwise
    return own, catalogue
