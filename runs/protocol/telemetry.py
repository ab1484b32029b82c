"""Model telemetry ledger: the reference's ``summarizeModelTelemetry``, reproduced exactly.

The ledger folds ``model_io`` trace events (by default only ``direction == "response"``,
so a request/response pair is not counted twice) into totals and rollups by provider,
model, provider+model, step, and the run subject's user, tenant and plan.

Output shape (PROTOCOL.md, "Telemetry ledger")::

    {generatedAt, runIds, totals, entries, byProvider, byModel, byProviderModel,
     byStep, byUser, byTenant, byPlan}

Numbers follow the reference's JavaScript arithmetic so that the output equals the
reference's JSON for the same input:

* token counts and ``durationMs`` are added as JavaScript numbers (exact integers up to
  2**53, IEEE doubles beyond and for fractions);
* each cost addition is the JavaScript ``Number((total + amount).toFixed(12))``: the two
  doubles are added, the exact binary value of the sum is rounded to 12 decimals, halves
  away from zero, with exact ``Decimal`` arithmetic, and the result is read back as the
  nearest double. (Rounding the decimal texts instead would differ from the reference
  where a sum's double error reaches the 12th decimal, e.g. ``123456.789 + 0.1``.)
  Alongside, :class:`LedgerAccumulator` keeps the exact decimal sum of the amounts as
  written (:meth:`LedgerAccumulator.exact_cost_by_currency`) for callers that need it;
  the ledger remains an approximation for product decisions, not billing;
* integral results print as integers (``3``, not ``3.0``) below ``1e21``, like JavaScript;
* ``costByCurrency`` keys keep JavaScript object order: array-index-like keys ("0", "42")
  ascending first, then the others in first-seen order.

Rollups are sorted by key with :func:`runs.protocol.collation.collation_key` (ICU en-US,
as ``localeCompare`` in the reference).

For workspace-wide ledgers over many runs, feed a :class:`LedgerAccumulator` event by
event (``keep_entries=False`` skips the per-event entry list) and call ``result()``.
"""

from __future__ import annotations

import decimal
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any

from runs.protocol.collation import collation_key
from runs.protocol.errors import ErrorCode, ProtocolError
from runs.protocol.values import now_iso

DIRECTIONS = ("request", "response", "stream_chunk")
DEFAULT_DIRECTIONS: tuple[str, ...] = ("response",)

USAGE_FIELDS = ("inputTokens", "outputTokens", "totalTokens", "cachedInputTokens", "reasoningTokens")
SUBJECT_FIELDS = ("userId", "tenantId", "accountId", "planId")

_MAX_SAFE = 2**53
_TWELVE_PLACES = Decimal("1e-12")
# 1e21 needs 22 integer digits plus 12 decimals; anything larger is returned unrounded.
_COST_CONTEXT = decimal.Context(prec=64, rounding=decimal.ROUND_HALF_UP)
_JS_INDEX_LIMIT = 2**32 - 1

Number = int | float


# --- JavaScript number semantics ----------------------------------------------------


def js_round_cost(value: float) -> Number:
    """``Number(value.toFixed(12))``: the exact double rounded to 12 decimals, halves away from 0.

    ``round(value, 12)`` is correctly rounded from the exact binary value but breaks ties
    to even. A double is exactly halfway between two 12-decimal numbers only when it is an
    odd multiple of 2**-13 (its expansion then has 13 decimals, the last a 5): that case
    goes through ``Decimal`` with halves up; an even multiple already has <= 12 decimals.
    """
    if value != value or abs(value) >= 1e21:  # toFixed falls back to ToString: identity
        return value
    scaled = value * 8192.0
    if scaled.is_integer():
        if scaled % 2 == 0:
            return value
        return float(Decimal(value).quantize(_TWELVE_PLACES, context=_COST_CONTEXT))
    return round(value, 12)


def js_round_cost_exact(value: float) -> Number:
    """Reference implementation of :func:`js_round_cost` in plain ``Decimal`` arithmetic."""
    if value != value or abs(value) >= 1e21:
        return value
    return float(Decimal(value).quantize(_TWELVE_PLACES, context=_COST_CONTEXT))


def js_value(value: Number) -> Number:
    """The number as JavaScript would print it: integral doubles below 1e21 become ints."""
    if type(value) is float and value.is_integer() and abs(value) < 1e21:
        return int(value)
    return value


def _js_index_key(key: str) -> int | None:
    # ECMAScript orders "array index" keys (canonical integers 0 .. 2**32 - 2) first.
    if key.isdigit() and key.isascii() and (key == "0" or key[0] != "0"):
        number = int(key)
        if number < _JS_INDEX_LIMIT:
            return number
    return None


def js_object_order(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """Reorder a dict's keys the way a JavaScript object enumerates them."""
    indexed = [(n, k) for k in mapping if (n := _js_index_key(k)) is not None]
    if not indexed:
        return dict(mapping)
    out = {k: mapping[k] for _, k in sorted(indexed)}
    out.update((k, v) for k, v in mapping.items() if k not in out)
    return out


def normalize_currency(currency: str) -> str:
    """Currency codes are trimmed and upper-cased (``" usd "`` -> ``"USD"``)."""
    return _js_trim(currency).upper()


_JS_WHITESPACE = (
    "\t\n\x0b\x0c\r \xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008"
    "\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def _js_trim(text: str) -> str:
    return text.strip(_JS_WHITESPACE)


# --- totals -------------------------------------------------------------------------


def js_add(a: Number, b: Number) -> Number:
    """``a + b`` as JavaScript computes it.

    Python's addition is identical except that an int sum beyond 2**53 must become the
    double JavaScript would hold.
    """
    total = a + b
    if type(total) is int and (total > _MAX_SAFE or total < -_MAX_SAFE):
        return float(a) + float(b)
    return total


# What one ledger entry adds to a bucket: (tokens or None, durationMs or None, currency or
# None, amount), tokens = (input, output, total, cached, reasoning). Computed once per entry.
Delta = tuple[tuple[Number, Number, Number, Number, Number] | None, Number | None, str | None, Number]


# What a rollup row holds: summed tokens (input, output, total, cached, reasoning), the exact
# sum of the durations, the currency (None: no cost) and the exact sum of the amounts.
Sums = tuple[tuple[int, int, int, int, int], Decimal, str | None, Decimal]


def entry_delta(entry: Mapping[str, Any]) -> Delta:
    usage = entry.get("usage")
    tokens = None
    if usage is not None:
        tokens = (
            usage.get("inputTokens") or 0,
            usage.get("outputTokens") or 0,
            derived_total_tokens(usage),
            usage.get("cachedInputTokens") or 0,
            usage.get("reasoningTokens") or 0,
        )
    cost = entry.get("cost")
    if cost is None:
        return tokens, entry.get("durationMs"), None, 0
    return tokens, entry.get("durationMs"), cost["currency"], cost["amount"]


class Totals:
    """Mutable running totals of one rollup bucket (or of the whole ledger)."""

    __slots__ = (
        "event_count",
        "input_tokens",
        "output_tokens",
        "total_tokens",
        "cached_input_tokens",
        "reasoning_tokens",
        "duration_ms",
        "cost",
    )

    def __init__(self) -> None:
        self.event_count = 0
        self.input_tokens: Number = 0
        self.output_tokens: Number = 0
        self.total_tokens: Number = 0
        self.cached_input_tokens: Number = 0
        self.reasoning_tokens: Number = 0
        self.duration_ms: Number = 0
        self.cost: dict[str, Number] = {}

    def add_entry(self, entry: Mapping[str, Any]) -> None:
        """Add one ledger entry (its usage, duration and normalized cost)."""
        self.add(entry_delta(entry))

    def add(self, delta: Delta) -> None:
        tokens, duration, currency, amount = delta
        self.event_count += 1
        if tokens is not None:
            i, o, t, c, r = tokens
            ni = self.input_tokens + i
            no = self.output_tokens + o
            nt = self.total_tokens + t
            nc = self.cached_input_tokens + c
            nr = self.reasoning_tokens + r
            if ni > _MAX_SAFE or no > _MAX_SAFE or nt > _MAX_SAFE or nc > _MAX_SAFE or nr > _MAX_SAFE:
                # Rare: beyond 2**53 JavaScript holds doubles.
                ni = js_add(self.input_tokens, i)
                no = js_add(self.output_tokens, o)
                nt = js_add(self.total_tokens, t)
                nc = js_add(self.cached_input_tokens, c)
                nr = js_add(self.reasoning_tokens, r)
            self.input_tokens = ni
            self.output_tokens = no
            self.total_tokens = nt
            self.cached_input_tokens = nc
            self.reasoning_tokens = nr
        if duration is not None:
            self.duration_ms = js_add(self.duration_ms, duration)
        if currency is not None:
            self.cost[currency] = js_round_cost(float(self.cost.get(currency, 0)) + float(amount))

    def add_sum(self, count: int, delta: Delta) -> None:
        """Add ``count`` entries summed elsewhere (a rollup row): ``delta`` holds their sums."""
        self.add(delta)
        self.event_count += count - 1

    def merge(self, other: Totals) -> None:
        """Add another bucket's totals (cost totals are added once per currency, then rounded)."""
        self.event_count += other.event_count
        self.input_tokens = js_add(self.input_tokens, other.input_tokens)
        self.output_tokens = js_add(self.output_tokens, other.output_tokens)
        self.total_tokens = js_add(self.total_tokens, other.total_tokens)
        self.cached_input_tokens = js_add(self.cached_input_tokens, other.cached_input_tokens)
        self.reasoning_tokens = js_add(self.reasoning_tokens, other.reasoning_tokens)
        self.duration_ms = js_add(self.duration_ms, other.duration_ms)
        for currency, amount in other.cost.items():
            self.cost[currency] = js_round_cost(float(self.cost.get(currency, 0)) + float(amount))

    def as_dict(self) -> dict[str, Any]:
        return {
            "eventCount": self.event_count,
            "inputTokens": js_value(self.input_tokens),
            "outputTokens": js_value(self.output_tokens),
            "totalTokens": js_value(self.total_tokens),
            "cachedInputTokens": js_value(self.cached_input_tokens),
            "reasoningTokens": js_value(self.reasoning_tokens),
            "durationMs": js_value(self.duration_ms),
            "costByCurrency": {k: js_value(v) for k, v in js_object_order(self.cost).items()},
        }


_ZERO = Decimal(0)


def _decimal_text(amount: Number) -> Decimal:
    # The amount as written in JSON (shortest round-trip text of the double).
    return Decimal(repr(amount)) if type(amount) is float else Decimal(amount)


def exact_amount(amount: Number) -> Decimal:
    """A cost amount (or duration) as written in JSON, as an exact decimal."""
    return _decimal_text(amount)


def derived_total_tokens(usage: Mapping[str, Any]) -> Number:
    """The event's own ``totalTokens`` if present, else ``inputTokens + outputTokens``."""
    total: Number | None = usage.get("totalTokens")
    if total is not None:
        return total
    return js_add(usage.get("inputTokens") or 0, usage.get("outputTokens") or 0)


# --- entries ------------------------------------------------------------------------


def ledger_entry(run: Mapping[str, Any], event: Mapping[str, Any]) -> dict[str, Any]:
    """The ledger entry for one ``model_io`` event of ``run`` (fields in the reference's order)."""
    entry: dict[str, Any] = {
        "eventId": event["id"],
        "runId": event["runId"],
        "ts": event["ts"],
    }
    for field in ("stepId", "correlationId"):
        if event.get(field) is not None:
            entry[field] = event[field]
    entry["direction"] = event["direction"]
    for field in ("provider", "model"):
        if event.get(field) is not None:
            entry[field] = event[field]
    subject = run.get("subject")
    if subject is not None:
        entry["subject"] = {k: subject[k] for k in SUBJECT_FIELDS if subject.get(k) is not None}
    # JavaScript has one number type: 1000.0 and 1e3 in a bundle are the integer 1000 there.
    usage = event.get("usage")
    if usage is not None:
        entry["usage"] = {k: js_value(usage[k]) for k in USAGE_FIELDS if usage.get(k) is not None}
    cost = event.get("cost")
    if cost is not None:
        entry["cost"] = {"amount": js_value(cost["amount"]), "currency": normalize_currency(cost["currency"])}
    if event.get("durationMs") is not None:
        entry["durationMs"] = js_value(event["durationMs"])
    return entry


class LedgerRefused(ProtocolError):
    """The reference would throw instead of returning this ledger (its output schema refuses it)."""


_TOKEN_TOTALS = (
    "eventCount",
    "inputTokens",
    "outputTokens",
    "totalTokens",
    "cachedInputTokens",
    "reasoningTokens",
)


def _check_totals(totals: Mapping[str, Any], where: str) -> None:
    for name in _TOKEN_TOTALS:
        value = totals[name]
        if type(value) is not int or value > _MAX_SAFE - 1:
            raise LedgerRefused(
                ErrorCode.INVALID_INPUT,
                f"{name} sums to {value!r}, beyond JavaScript's safe integers (2**53 - 1): "
                "the reference refuses such a ledger, and so do we",
                f"{where}.{name}",
            )


def _rollup_keys(entry: Mapping[str, Any]) -> Iterable[tuple[str, str, str]]:
    """(rollup name, bucket key, bucket label) for every rollup the entry falls into."""
    provider = entry.get("provider")
    model = entry.get("model")
    if provider:
        yield "byProvider", f"provider:{provider}", provider
    if model:
        yield "byModel", f"model:{model}", model
    if provider or model:
        p = provider or "unknown"
        m = model or "unknown"
        yield "byProviderModel", f"provider:{p}|model:{m}", f"{p} / {m}"
    step = entry.get("stepId")
    if step:
        yield "byStep", f"step:{step}", step
    subject = entry.get("subject") or {}
    for rollup, field in (("byUser", "userId"), ("byTenant", "tenantId"), ("byPlan", "planId")):
        value = subject.get(field)
        if value:
            yield rollup, f"{field}:{value}", value


PRICING_KEY = "workbench.pricing"  # runs.providers.pricing.PRICING_KEY (protocol imports no provider)
_PRICING_LABELS = {
    "workspace": "Workspace prices",
    "genai-prices": "genai-prices",
    "catalogue": "Shipped catalogue",
}
_PRICING_ORDER = ("workspace", "genai-prices", "catalogue", "recorded", "unpriced")


def pricing_source(event: Mapping[str, Any]) -> tuple[str, str]:
    """(key, label) of who priced a ``model_io`` response: the source its
    ``payload["workbench.pricing"]`` names (with the genai-prices version), ``recorded`` for a
    cost the caller sent without saying how, ``unpriced`` for no cost."""
    payload = event.get("payload")
    note = payload.get(PRICING_KEY) if isinstance(payload, Mapping) else None
    source = note.get("source") if isinstance(note, Mapping) else None
    if event.get("cost") is None:
        return "unpriced", "Not priced"
    if not isinstance(source, str) or not source:
        return "recorded", "Cost recorded by the caller"
    label = _PRICING_LABELS.get(source, source)
    version = note.get("version") if isinstance(note, Mapping) else None
    if source == "genai-prices" and isinstance(version, str) and version:
        return f"{source}@{version}", f"{label} {version}"
    return source, label


PROMPT_KEY = "workbench.prompt"  # in a model_io payload: the fetched prompt the call used


def prompt_label(event: Mapping[str, Any]) -> str:
    """``name@N`` of the prompt version a ``model_io`` response was made with (its
    ``payload["workbench.prompt"]``: a str ``name`` and an int ``version``); "" otherwise."""
    payload = event.get("payload")
    ref = payload.get(PROMPT_KEY) if isinstance(payload, Mapping) else None
    if not isinstance(ref, Mapping):
        return ""
    name, version = ref.get("name"), ref.get("version")
    if not isinstance(name, str) or type(version) is not int:
        return ""
    return f"{name}@{version}"


def _pricing_rank(key: str) -> tuple[int, str]:
    source = key.partition("@")[0]
    return (_PRICING_ORDER.index(source) if source in _PRICING_ORDER else 2, key)


def _prompt_rank(key: str) -> tuple[str, int]:
    """Prompt versions by name, then version number (``p@10`` after ``p@9``)."""
    name, _, number = key.rpartition("@")
    return (name, int(number))


ROLLUPS = ("byProvider", "byModel", "byProviderModel", "byStep", "byUser", "byTenant", "byPlan")


# --- accumulator --------------------------------------------------------------------


class LedgerAccumulator:
    """Incremental ledger: add runs and their events one at a time, then ``result()``.

    Adding events one by one gives exactly :func:`summarize_model_telemetry`'s output for
    the same runs and events in the same order. ``keep_entries=False`` keeps only the
    totals and rollups (``entries`` is then ``[]``), for workspace-wide ledgers.
    """

    def __init__(
        self,
        *,
        directions: Iterable[str] = DEFAULT_DIRECTIONS,
        keep_entries: bool = True,
        breakdowns: bool = False,
    ) -> None:
        chosen = tuple(directions)
        unknown = [d for d in chosen if d not in DIRECTIONS]
        if unknown:
            raise ProtocolError(
                ErrorCode.INVALID_INPUT,
                f"unknown model_io direction(s) {unknown}; expected some of {list(DIRECTIONS)}",
                "directions",
            )
        self.directions = frozenset(chosen)
        self.keep_entries = keep_entries
        self.run_ids: dict[str, None] = {}
        self.totals = Totals()
        self.exact_cost: dict[str, Decimal] = {}
        self.entries: list[dict[str, Any]] = []
        self.rollups: dict[str, dict[str, tuple[str, Totals]]] = {name: {} for name in ROLLUPS}
        self.refusal: LedgerRefused | None = None
        # Not in the reference's output (pages only): totals per UTC day of the events' ts.
        self.breakdowns = breakdowns
        self.by_day: dict[str, Totals] = {}
        # ... and per price source (payload["workbench.pricing"]: who priced each response).
        self.by_pricing: dict[str, tuple[str, Totals]] = {}
        # ... and per prompt version ("name@N", only the responses made with a fetched prompt).
        self.by_prompt: dict[str, Totals] = {}

    def add_run(self, run: Mapping[str, Any]) -> None:
        """Register a run (its id appears in ``runIds`` even when it has no counted event)."""
        self.run_ids.setdefault(run["id"], None)

    def add_event(self, run: Mapping[str, Any], event: Mapping[str, Any]) -> bool:
        """Count one trace event of ``run``; returns whether it entered the ledger."""
        self.run_ids.setdefault(run["id"], None)
        if event.get("type") != "model_io" or event.get("direction") not in self.directions:
            return False
        entry = ledger_entry(run, event)
        self.add_entry(entry)
        if self.breakdowns:
            key, label = pricing_source(event)
            bucket = self.by_pricing.get(key)
            if bucket is None:
                bucket = self.by_pricing[key] = (label, Totals())
            bucket[1].add(entry_delta(entry))
            prompt = prompt_label(event)
            if prompt:
                self.by_prompt.setdefault(prompt, Totals()).add(entry_delta(entry))
        return True

    def add_events(self, run: Mapping[str, Any], events: Iterable[Mapping[str, Any]]) -> None:
        self.add_run(run)
        for event in events:
            self.add_event(run, event)

    def add_entry(self, entry: dict[str, Any]) -> None:
        """Count a ready-made ledger entry (as produced by :func:`ledger_entry`)."""
        self.run_ids.setdefault(entry["runId"], None)
        if self.refusal is None:
            for field in ("stepId", "correlationId"):
                if entry.get(field) == "":
                    self.refusal = LedgerRefused(
                        ErrorCode.INVALID_INPUT,
                        f"model_io event {entry['eventId']!r} has an empty {field}; the reference's "
                        "ledger schema requires a non-empty one and refuses the ledger",
                        f"entries[{entry['eventId']}].{field}",
                    )
        if self.keep_entries:
            self.entries.append(entry)
        delta = entry_delta(entry)
        self.totals.add(delta)
        currency = delta[2]
        if currency is not None:
            self.exact_cost[currency] = self.exact_cost.get(currency, _ZERO) + _decimal_text(delta[3])
        rollups = self.rollups
        for rollup, key, label in _rollup_keys(entry):
            buckets = rollups[rollup]
            bucket = buckets.get(key)
            if bucket is None:
                bucket = buckets[key] = (label, Totals())
            bucket[1].add(delta)
        if self.breakdowns:
            day = str(entry.get("ts") or "")[:10] or "unknown"
            totals = self.by_day.get(day)
            if totals is None:
                totals = self.by_day[day] = Totals()
            totals.add(delta)

    def add_aggregate(
        self,
        labels: Mapping[str, Any],
        *,
        day: str,
        count: int,
        sums: Sums,
        pricing: tuple[str, str] | None = None,
        prompt: str = "",
    ) -> None:
        """Count ``count`` responses summed elsewhere (a rollup row): ``labels`` hold what an entry
        would (``provider``, ``model``, ``stepId``, ``subject``), ``day`` their UTC day. Tokens and
        durations add as they would one by one; each currency's cost is added (and rounded to 12
        decimals) once for the whole sum, its exact decimal sum kept beside it."""
        if count <= 0:
            return
        tokens, duration, currency, cost = sums
        delta: Delta = (tokens, js_value(float(duration)), currency, js_value(float(cost)))
        self.totals.add_sum(count, delta)
        if currency is not None:
            self.exact_cost[currency] = self.exact_cost.get(currency, _ZERO) + cost
        for rollup, key, label in _rollup_keys(labels):
            buckets = self.rollups[rollup]
            bucket = buckets.get(key)
            if bucket is None:
                bucket = buckets[key] = (label, Totals())
            bucket[1].add_sum(count, delta)
        if self.breakdowns:
            totals = self.by_day.get(day)
            if totals is None:
                totals = self.by_day[day] = Totals()
            totals.add_sum(count, delta)
            if pricing is not None:  # who priced them (``pricing_source``: key, label)
                bucket = self.by_pricing.get(pricing[0])
                if bucket is None:
                    bucket = self.by_pricing[pricing[0]] = (pricing[1], Totals())
                bucket[1].add_sum(count, delta)
            if prompt:  # the prompt version they were made with (``prompt_label``)
                self.by_prompt.setdefault(prompt, Totals()).add_sum(count, delta)

    def merge(self, other: LedgerAccumulator) -> None:
        """Fold another accumulator into this one (e.g. per-run ledgers cached separately).

        Totals equal adding the other's events here, except that each currency's cost is
        rounded once for the other's whole subtotal rather than per event: the results
        can differ from the one-pass ledger in the last digits of non-terminating sums.
        """
        for run_id in other.run_ids:
            self.run_ids.setdefault(run_id, None)
        if self.keep_entries:
            self.entries.extend(other.entries)
        self.totals.merge(other.totals)
        for currency, exact in other.exact_cost.items():
            self.exact_cost[currency] = self.exact_cost.get(currency, _ZERO) + exact
        for rollup, buckets in other.rollups.items():
            mine = self.rollups[rollup]
            for key, (label, totals) in buckets.items():
                bucket = mine.get(key)
                if bucket is None:
                    bucket = mine[key] = (label, Totals())
                bucket[1].merge(totals)
        for day, totals in other.by_day.items():
            self.by_day.setdefault(day, Totals()).merge(totals)
        for key, (label, totals) in other.by_pricing.items():
            self.by_pricing.setdefault(key, (label, Totals()))[1].merge(totals)
        for key, totals in other.by_prompt.items():
            self.by_prompt.setdefault(key, Totals()).merge(totals)

    def unattributed(self, rollup: str) -> Totals | None:
        """What no bucket of ``rollup`` counts (entries without its key): the totals minus the
        buckets, costs rounded to 12 decimals like every ledger addition. None when nothing is left.
        ``"byPrompt"`` is the responses made without a fetched prompt."""
        if rollup == "byPrompt":
            buckets = list(self.by_prompt.values())
        else:
            buckets = [totals for _, totals in self.rollups[rollup].values()]
        rest = Totals()
        rest.event_count = self.totals.event_count - sum(b.event_count for b in buckets)
        if rest.event_count <= 0:
            return None
        for name in (
            "input_tokens",
            "output_tokens",
            "total_tokens",
            "cached_input_tokens",
            "reasoning_tokens",
        ):
            setattr(rest, name, getattr(self.totals, name) - sum(getattr(b, name) for b in buckets))
        rest.duration_ms = round(self.totals.duration_ms - sum(b.duration_ms for b in buckets), 6)
        for currency, amount in self.totals.cost.items():
            left = js_round_cost(float(amount) - sum(float(b.cost.get(currency, 0)) for b in buckets))
            if left:
                rest.cost[currency] = left
        return rest

    def breakdown_result(self) -> dict[str, Any]:
        """``{"unattributed": {rollup: totals}, "byDay": [{"day", "totals"}], "byPricing": [...],
        "byPrompt": [{"key", "label", "totals"}]}``: the rollups with unattributed entries (any
        accumulator; ``byPrompt`` once some response has a prompt) and, with ``breakdowns=True``,
        days ascending, price sources and prompt versions (``name@N``, by name then number)."""
        rest = {name: self.unattributed(name) for name in ROLLUPS}
        if self.by_prompt:
            rest["byPrompt"] = self.unattributed("byPrompt")
        return {
            "unattributed": {name: t.as_dict() for name, t in rest.items() if t is not None},
            "byDay": [{"day": d, "totals": self.by_day[d].as_dict()} for d in sorted(self.by_day)],
            "byPricing": [
                {"key": key, "label": label, "totals": totals.as_dict()}
                for key, (label, totals) in sorted(
                    self.by_pricing.items(), key=lambda item: _pricing_rank(item[0])
                )
            ],
            "byPrompt": [
                {"key": key, "label": key, "totals": self.by_prompt[key].as_dict()}
                for key in sorted(self.by_prompt, key=_prompt_rank)
            ],
        }

    def exact_cost_by_currency(self) -> dict[str, Decimal]:
        """Unrounded decimal sum of the cost amounts as written, per normalized currency."""
        return dict(self.exact_cost)

    def result(self, *, now: str | None = None, strict: bool = True) -> dict[str, Any]:
        """The ledger, shaped exactly like the reference's ``summarizeModelTelemetry`` output.

        ``strict``: where the reference throws (token sums beyond 2**53 - 1, an entry with an
        empty ``stepId``/``correlationId``), raise :class:`LedgerRefused` (``INVALID_INPUT``)
        instead of returning a ledger; pages pass ``False`` and show what adds up.
        """
        if strict and self.refusal is not None:
            raise self.refusal
        out: dict[str, Any] = {
            "generatedAt": now if now is not None else now_iso(),
            "runIds": list(self.run_ids),
            "totals": self.totals.as_dict(),
            "entries": list(self.entries),
        }
        for rollup in ROLLUPS:
            buckets = sorted(self.rollups[rollup].items(), key=lambda item: collation_key(item[0]))
            out[rollup] = [
                {"key": key, "label": label, "totals": totals.as_dict()} for key, (label, totals) in buckets
            ]
        if strict:
            _check_totals(out["totals"], "totals")
            for rollup in ROLLUPS:
                for i, bucket in enumerate(out[rollup]):
                    _check_totals(bucket["totals"], f"{rollup}[{i}].totals")
        return out


def summarize_model_telemetry(
    runs: Iterable[tuple[Mapping[str, Any], Iterable[Mapping[str, Any]]]],
    *,
    now: str | None = None,
    directions: Iterable[str] = DEFAULT_DIRECTIONS,
) -> dict[str, Any]:
    """Ledger over ``(run, trace events)`` pairs, equal to the reference's output.

    ``now`` is the ``generatedAt`` timestamp (default: the current time in JavaScript's
    ISO format); ``directions`` selects the ``model_io`` directions counted.
    """
    accumulator = LedgerAccumulator(directions=directions)
    for run, events in runs:
        accumulator.add_events(run, events)
    return accumulator.result(now=now)


def summarize_bundle(bundle: Mapping[str, Any], **options: Any) -> dict[str, Any]:
    """Ledger of one run bundle (or RunStoreState): ``summarize_model_telemetry`` of its run and trace."""
    return summarize_model_telemetry([(bundle["run"], bundle["trace"])], **options)
