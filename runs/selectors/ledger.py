"""The workspace ledger, read from the rollups the write path keeps (runs.actions.rollups): the
rows of the chosen days, never the ``model_io`` bodies of the period."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import Sum

from runs.fields import from_column
from runs.models import CostRollup, Event, Run, RunCostRollup, RunRollup, Workspace
from runs.protocol.telemetry import PRICING_KEY, LedgerAccumulator, pricing_source
from runs.protocol.values import loads

_LABELS = (
    "call_day",
    "provider",
    "model",
    "step_id",
    "subject_user",
    "subject_tenant",
    "subject_plan",
    "currency",
    "pricing",
    "pricing_label",
    "prompt",
)
# a run's own rollup rows (RunCostRollup): the labels that vary within one run
_RUN_LABELS = ("call_day", "provider", "model", "step_id", "currency", "pricing", "pricing_label", "prompt")
_INTS = ("calls", "input_tokens", "output_tokens", "total_tokens", "cached_input_tokens", "reasoning_tokens")


def _label(text: str) -> str:
    return from_column(text) if connection.vendor == "postgresql" else text


def _summed_rows(workspace: Workspace, first: date, last: date) -> list[tuple]:
    """The rollup rows of the days, summed over shards, run days and workflows: (labels..., ints...,
    duration, cost). On PostgreSQL the database adds them (exact ``numeric``); elsewhere Python."""
    rows = CostRollup.objects.filter(workspace=workspace, run_day__gte=first, run_day__lte=last)
    if connection.vendor == "postgresql":
        sql, params = rows.values("pk").query.sql_with_params()
        table = CostRollup._meta.db_table
        select = ", ".join(
            [
                *_LABELS,
                *(f"SUM({c})" for c in _INTS),
                "SUM(duration_ms::numeric)::text",
                "SUM(cost::numeric)::text",
            ]
        )
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT {select} FROM {table} WHERE id IN ({sql}) GROUP BY {', '.join(_LABELS)}", params
            )
            return cursor.fetchall()
    merged: dict[tuple, list] = {}
    for row in rows.values_list(*_LABELS, *_INTS, "duration_ms", "cost"):
        labels, sums = row[: len(_LABELS)], row[len(_LABELS) :]
        held = merged.get(labels)
        values = [int(v) for v in sums[: len(_INTS)]] + [Decimal(v) for v in sums[len(_INTS) :]]
        if held is None:
            merged[labels] = values
        else:
            for i, value in enumerate(values):
                held[i] += value
    return [(*labels, *sums) for labels, sums in merged.items()]


# {provider/model bucket key (the ledger's byProviderModel key): {price source key: [label, calls]}}
PricedBy = dict[str, dict[str, list]]


def provider_model_key(provider: str | None, model: str | None) -> str | None:
    """The ledger's ``byProviderModel`` bucket key of a call (None when it names neither)."""
    if not provider and not model:
        return None
    return f"provider:{provider or 'unknown'}|model:{model or 'unknown'}"


def _count_source(priced_by: PricedBy, key: str | None, source: tuple[str, str], calls: int) -> None:
    if key is None or calls <= 0:
        return
    held = priced_by.setdefault(key, {}).setdefault(source[0], [source[1], 0])
    held[1] += calls


def priced_by_notes(priced_by: PricedBy) -> dict[str, list[dict[str, Any]]]:
    """Per provider / model bucket key, its price sources, most calls first: [{"label", "calls"}]."""
    return {
        key: [
            {"label": label, "calls": calls}
            for label, calls in sorted(sources.values(), key=lambda held: (-held[1], held[0]))
        ]
        for key, sources in priced_by.items()
    }


def ledger_from_rollups(workspace: Workspace, *, first: date, last: date) -> LedgerAccumulator:
    """The ledger of the runs started on the UTC days ``first`` .. ``last``: totals, rollups by
    provider, model, step, user, tenant and plan, and the breakdowns per day, price source and
    prompt version, from the rollups."""
    return ledger_and_sources_from_rollups(workspace, first=first, last=last)[0]


def ledger_and_sources_from_rollups(
    workspace: Workspace, *, first: date, last: date
) -> tuple[LedgerAccumulator, PricedBy]:
    """:func:`ledger_from_rollups` and, from the same rollup rows, the calls of each provider /
    model per price source (which source priced them: the rollups key every row by it)."""
    acc = LedgerAccumulator(keep_entries=False, breakdowns=True)
    priced_by: PricedBy = {}
    n = len(_LABELS)
    for row in _summed_rows(workspace, first, last):
        day, provider, model, step, user, tenant, plan, currency, pricing, pricing_label, prompt = (
            _label(t) for t in row[:n]
        )
        calls, i, o, t, c, r = (int(v) for v in row[n : n + 6])
        duration, cost = Decimal(row[n + 6]), Decimal(row[n + 7])
        subject = {k: v for k, v in (("userId", user), ("tenantId", tenant), ("planId", plan)) if v}
        labels = {"provider": provider, "model": model, "stepId": step, "subject": subject}
        acc.add_aggregate(
            labels,
            day=day,
            pricing=(pricing, pricing_label),
            prompt=prompt,
            count=calls,
            sums=((i, o, t, c, r), duration, currency or None, cost),
        )
        _count_source(priced_by, provider_model_key(provider, model), (pricing, pricing_label), calls)
    return acc, priced_by


def workspace_ledger_data(workspace: Workspace, *, first: date, last: date):
    """Ledger over the workspace's runs started on the UTC days ``first`` .. ``last``:
    (accumulator, number of runs, the distinct workflow snapshots of those runs, for the step order,
    the calls of each provider / model per price source).
    Reads the rollups: bounded by the days and the distinct labels, not by the runs or their calls."""
    acc, priced_by = ledger_and_sources_from_rollups(workspace, first=first, last=last)
    counters = RunRollup.objects.filter(workspace=workspace, run_day__gte=first, run_day__lte=last)
    run_count = int(counters.aggregate(n=Sum("runs"))["n"] or 0)
    workflows: list[Any] = []
    pairs = counters.filter(runs__gt=0).values_list("workflow_id", "workflow_version").distinct()
    for workflow_id, version in sorted(set(pairs)):
        # the newest run of that version, in the order of run_ws_workflow_started: without an order
        # the planner reads runs_run sequentially for "any row" when one workflow is most of a
        # workspace (a full scan when that workspace's rows sit at the end of the table)
        doc = (
            Run.objects.for_workspace(workspace)
            .filter(workflow_id=_label(workflow_id), workflow_version=version)
            .order_by("-started_at", "-id")
            .values_list("doc", flat=True)[:1]
        )
        if doc:
            workflows.append(loads(doc[0]).get("workflowSnapshot"))
    return acc, run_count, workflows, priced_by


CALLS_SHOWN = 500  # the ledger API lists this many model responses one by one (all are counted)
CALLS_PAGE = 100  # the run ledger page lists its responses in pages of this many (keyset by seq)


def run_ledger_view(run: Run, *, calls_shown: int = CALLS_SHOWN) -> tuple[LedgerAccumulator, list, PricedBy]:
    """The run's ledger read from its own rollup rows (RunCostRollup, kept on the write path: one
    row per call day x provider x model x step x currency x price source x prompt, not one per
    call), its first ``calls_shown`` responses one by one, each with the source that priced it
    (``pricing_source``: the workspace's prices, genai-prices and its version, a cost the caller
    sent, none), and the calls of each provider / model per price source. Bounded by the run's
    distinct labels and ``calls_shown``, not by its length."""
    acc = LedgerAccumulator(keep_entries=False, breakdowns=True)
    acc.add_run(run.run_doc)
    priced_by: PricedBy = {}
    subject = run.subject if isinstance(run.subject, dict) else {}
    subject = {k: v for k in ("userId", "tenantId", "planId") if isinstance(v := subject.get(k), str) and v}
    rows = RunCostRollup.objects.filter(run_id=run.pk, calls__gt=0).order_by("key_hash")
    for row in rows.values_list(*_RUN_LABELS, *_INTS, "duration_ms", "cost"):
        day, provider, model, step, currency, pricing, pricing_label, prompt = (
            _label(t) for t in row[: len(_RUN_LABELS)]
        )
        calls, i, o, t, c, r = (int(v) for v in row[len(_RUN_LABELS) : len(_RUN_LABELS) + 6])
        duration, cost = Decimal(row[-2]), Decimal(row[-1])
        acc.add_aggregate(
            {"provider": provider, "model": model, "stepId": step, "subject": subject},
            day=day,
            pricing=(pricing, pricing_label),
            prompt=prompt,
            count=calls,
            sums=((i, o, t, c, r), duration, currency or None, cost),
        )
        _count_source(priced_by, provider_model_key(provider, model), (pricing, pricing_label), calls)
    return acc, first_calls(run, calls_shown), priced_by


def first_calls(run: Run, limit: int) -> list[dict[str, Any]]:
    """The run's first ``limit`` model responses as the run ledger lists them."""
    return calls_after(run, after=0, limit=limit)[0]


def calls_after(run: Run, *, after: int, limit: int) -> tuple[list[dict[str, Any]], int]:
    """One keyset page of the run's model responses: up to ``limit`` after event ``after`` (a seq),
    and the next page's cursor (the last seq listed; 0 on the last page). Read as ranges of the
    (run, type, seq) index from ``after`` on: page 100 costs what page 1 does."""
    calls: list[dict[str, Any]] = []
    last = max(after, 0)
    more = False
    if limit <= 0:
        return calls, 0
    while len(calls) <= limit:
        rows = list(
            Event.objects.filter(run=run, type="model_io", seq__gt=last)
            .order_by("seq")
            .values_list("seq", "body")[: 2 * (limit - len(calls)) + 10]
        )
        for seq, body in rows:
            event = loads(body)
            if event.get("direction") != "response":
                continue
            if len(calls) == limit:
                more = True
                break
            calls.append(call_row(seq, event, pricing_source(event)))
        if more or not rows:
            break
        last = rows[-1][0]
    return calls, (calls[-1]["seq"] if more and calls else 0)


def call_row(seq: int, event: dict[str, Any], source: tuple[str, str]) -> dict[str, Any]:
    """One model response as the run ledger lists it (and ``GET /api/runs/{id}/ledger`` returns it)."""
    payload = event.get("payload")
    note = payload.get(PRICING_KEY) if isinstance(payload, dict) else None
    return {
        "seq": seq,
        "ts": event.get("ts"),
        "stepId": event.get("stepId"),
        "provider": event.get("provider"),
        "model": event.get("model"),
        "usage": event.get("usage") or {},
        "cost": event.get("cost"),
        "pricing": {
            "source": source[0].partition("@")[0],
            "label": source[1],
            **({"note": note} if isinstance(note, dict) else {}),
        },
    }
