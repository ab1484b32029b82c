"""``GET /api/prices``: the workspace's effective price table (what prices its model calls).

The workspace's own model prices, else genai-prices, else the shipped catalogue; each row names
its ``source``. Read scope. The host SDK reads it (``WorkbenchClient.prices()``) to price calls
the way the server does.
"""

from __future__ import annotations

from django.http import HttpRequest
from ninja import Query, Router

from runs.actions.permissions import Action
from runs.api.auth import principal
from runs.selectors.prices import effective_prices

router = Router(tags=["prices"])


@router.get(
    "",
    summary="The workspace's effective model prices (per million tokens)",
    description=(
        "`{prices: {model: {input, output, cache_read?, cache_write?, currency, source, provider?}}, unit}`: "
        "prices per million tokens as decimal text; `source` is `workspace` (set on the models page), "
        "`genai-prices` (the maintained database) or `catalogue` (shipped defaults). `model` query "
        "parameters (`provider:model` or `model`) add genai-prices' rows for models the workspace "
        "has not listed."
    ),
)
def prices(request: HttpRequest, model: list[str] = Query(None)):  # noqa: B008
    caller = principal(request)
    caller.require_action(Action.VIEW_RUN)
    wanted = []
    for item in (model or [])[:50]:
        provider, _, name = item.rpartition(":")
        wanted.append((provider or None, name))
    return effective_prices(caller.workspace, models=wanted)
