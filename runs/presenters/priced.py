"""How many of a ledger's calls are priced, in words: "3 of 5 calls priced", never a partial sum
alone; the reasons the others are not ("no cache-read price for local-llm")."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

UNPRICED = "unpriced"


def priced_calls(by_pricing: Iterable[Mapping[str, Any]], calls: int) -> dict[str, Any]:
    """``{"calls", "priced", "unpriced", "complete", "text"}`` from a ledger's ``byPricing`` rows
    (every response falls in exactly one; ``unpriced`` is the row of the calls without a cost)."""
    unpriced = sum(int(row["totals"]["eventCount"]) for row in by_pricing if str(row.get("key")) == UNPRICED)
    priced = max(0, calls - unpriced)
    if calls == 0:
        text = "no model call"
    elif priced == calls:
        text = f"all {calls} calls priced" if calls > 1 else "the call is priced"
    elif priced == 0:
        text = (
            f"none of {calls} calls priced: the cost is unknown"
            if calls > 1
            else "the call is not priced: its cost is unknown"
        )
    else:
        text = f"{priced} of {calls} calls priced: the cost shown is for those {priced} only"
    return {
        "calls": calls,
        "priced": priced,
        "unpriced": calls - priced,
        "complete": priced == calls,
        "text": text,
    }


def unpriced_reasons(calls: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``[{"why", "calls"}]`` of the listed calls without a cost, most calls first: the reason each
    recorded ("no cache-read price for claude-x"), else that no source priced it."""
    counts: dict[str, int] = {}
    for call in calls:
        if call.get("cost") is not None:
            continue
        note = (call.get("pricing") or {}).get("note") or {}
        why = note.get("why") if isinstance(note, Mapping) else None
        if not isinstance(why, str) or not why:
            why = "no usage reported" if not call.get("usage") else "no price recorded for this call"
        counts[why] = counts.get(why, 0) + 1
    return [{"why": why, "calls": n} for why, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
