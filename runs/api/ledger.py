"""The ledgers as JSON, saying which source priced each call.

``GET /api/runs/{id}/ledger``: the run's totals, its price sources, its provider / model rows with
the sources that priced them, and its model responses one by one (the first ``limit``) with theirs.
``GET /api/ledger?from=&to=``: the same sums over the workspace's runs started on those UTC days,
read from the cost rollups (no per-call list). Read scope.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from django.http import HttpRequest
from django.utils import timezone
from ninja import Query, Router, Schema
from pydantic import Field

from runs.actions.permissions import Action
from runs.api.responses import readable_run, require
from runs.api.schemas import ErrorOut
from runs.presenters.priced import priced_calls, unpriced_reasons
from runs.protocol.telemetry import LedgerAccumulator
from runs.selectors.ledger import PricedBy, priced_by_notes, run_ledger_view, workspace_ledger_data

runs_router = Router(tags=["ledger"])

ERRORS = {400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 429: ErrorOut}
router = Router(tags=["ledger"])

ERRORS = {400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 429: ErrorOut}

PRICING_DOC = (
    "Each price source row (`byPricing`) and each call's `pricing` says who priced the calls: "
    "`workspace` (the workspace's own prices), `genai-prices` (the maintained database; its label "
    "and `note.version` name the version), `catalogue` (shipped defaults), `recorded` (a cost the "
    "caller sent without saying how) or `unpriced` (no cost). `byProviderModel[].pricedBy` counts "
    "each provider / model's calls per source. `pricedCalls` says how many calls are priced "
    '("3 of 5 calls priced"): a cost total over some calls only is never given alone.'
)


class RunLedgerQuery(Schema):
    limit: int = Field(
        default=500, description="How many model responses to list (0..5000; all are counted)."
    )


class LedgerQuery(Schema):
    from_: str = Field(
        default="", alias="from", description="First UTC day (YYYY-MM-DD); 30 days ago by default."
    )
    to: str = Field(default="", description="Last UTC day (YYYY-MM-DD); today by default.")


def _sums(acc: LedgerAccumulator, priced_by: PricedBy) -> dict[str, Any]:
    ledger = acc.result(strict=False)
    notes = priced_by_notes(priced_by)
    by_pricing = acc.breakdown_result()["byPricing"]
    return {
        "totals": ledger["totals"],
        "pricedCalls": priced_calls(by_pricing, acc.totals.event_count),
        "byPricing": by_pricing,
        "byProviderModel": [
            {**row, "pricedBy": notes.get(row["key"], [])} for row in ledger["byProviderModel"]
        ],
    }


@runs_router.get(
    "/{runid:run_id}/ledger",
    response={200: dict[str, Any], **ERRORS},
    summary="A run's ledger, with the source that priced each call",
    description=PRICING_DOC,
)
def run_ledger(request: HttpRequest, run_id: str, query: Query[RunLedgerQuery]):
    caller = require(request, Action.VIEW_RUN)
    run = readable_run(caller, run_id)
    acc, calls, priced_by = run_ledger_view(run, calls_shown=min(max(query.limit, 0), 5000))
    return {
        "runId": run.run_id,
        **_sums(acc, priced_by),
        "calls": calls,
        "callsTotal": acc.totals.event_count,
        "unpricedReasons": unpriced_reasons(calls),
    }


def _day(text: str) -> date | None:
    try:
        day = date.fromisoformat(text) if text else None
    except ValueError:
        return None
    return None if day is not None and day >= date.max else day


@router.get(
    "",
    response={200: dict[str, Any], **ERRORS},
    summary="The workspace ledger over a range of days, with the sources that priced the calls",
    description=PRICING_DOC + " Runs started on the UTC days `from` .. `to`, from the cost rollups.",
)
def workspace_ledger(request: HttpRequest, query: Query[LedgerQuery]):
    caller = require(request, Action.VIEW_RUN)
    today = timezone.now().date()
    start = _day(query.from_) or today - timedelta(days=30)
    end = _day(query.to) or today
    if end < start:
        start, end = end, start
    acc, run_count, _, priced_by = workspace_ledger_data(caller.workspace, first=start, last=end)
    return {"from": start.isoformat(), "to": end.isoformat(), "runCount": run_count, **_sums(acc, priced_by)}
