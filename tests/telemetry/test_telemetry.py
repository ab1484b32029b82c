"""The telemetry ledger against the reference's outputs and its arithmetic rules."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest

from runs.protocol import collation
from runs.protocol.errors import ErrorCode, ProtocolError
from runs.protocol.telemetry import (
    LedgerAccumulator,
    js_object_order,
    js_round_cost,
    summarize_bundle,
    summarize_model_telemetry,
)
from tests.telemetry.corpus import bundle_names, load_bundle, load_expected, manifest, same_json

ALL_DIRECTIONS = ("request", "response", "stream_chunk")


@pytest.mark.parametrize("name", bundle_names("telemetry"))
def test_ledger_equals_reference(name):
    bundle = load_bundle(name)
    expected = load_expected(name, "telemetry")
    now = manifest()["generator"]["fixedTelemetryNow"]
    assert expected["now"] == now

    same_json(summarize_model_telemetry([(bundle["run"], bundle["trace"])], now=now), expected["result"])
    same_json(
        summarize_model_telemetry([(bundle["run"], bundle["trace"])], now=now, directions=ALL_DIRECTIONS),
        expected["allDirections"]["result"],
    )


@pytest.mark.parametrize("name", bundle_names("telemetry"))
def test_accumulator_without_entries_matches_rollups(name):
    bundle = load_bundle(name)
    full = summarize_bundle(bundle, now="t")
    accumulator = LedgerAccumulator(keep_entries=False)
    accumulator.add_run(bundle["run"])
    for event in bundle["trace"]:
        accumulator.add_event(bundle["run"], event)
    light = accumulator.result(now="t")
    assert light["entries"] == []
    assert {k: v for k, v in light.items() if k != "entries"} == {
        k: v for k, v in full.items() if k != "entries"
    }


# --- helpers to build small traces ---------------------------------------------------


def _run(run_id="run_1", subject=None):
    run = {"id": run_id, "workflowId": "wf", "status": "running"}
    if subject is not None:
        run["subject"] = subject
    return run


def _io(n, direction="response", run_id="run_1", **fields):
    return {"id": f"evt_{n}", "runId": run_id, "ts": f"2026-01-01T00:00:{n:02d}.000Z", "type": "model_io",
            "direction": direction, **fields}  # fmt: skip


def _ledger(events, run=None, **options):
    return summarize_model_telemetry([(run or _run(), events)], now="2026-01-01T00:00:00.000Z", **options)


# --- cost arithmetic -----------------------------------------------------------------


def test_cost_additions_round_to_twelve_decimals_like_javascript():
    ledger = _ledger(
        [_io(1, cost={"amount": 0.1, "currency": "USD"}), _io(2, cost={"amount": 0.2, "currency": "USD"})]
    )
    # 0.1 + 0.2 is 0.30000000000000004 in doubles; toFixed(12) gives 0.3.
    assert ledger["totals"]["costByCurrency"] == {"USD": 0.3}


def test_cost_rounding_uses_the_exact_double_not_its_decimal_text():
    # JavaScript: Number((123456.789 + 0.1).toFixed(12)) === 123456.88900000001
    assert js_round_cost(123456.789 + 0.1) == 123456.88900000001
    # toFixed rounds the exact binary value: 2.5e-12 is stored as 2.49999999999999984...e-12
    # and rounds down, 1.5e-12 as 1.50000000000000007...e-12 and rounds up.
    assert js_round_cost(2.5e-12) == 2e-12
    assert js_round_cost(1.5e-12) == 2e-12
    assert js_round_cost(0.5e-12) == 0
    assert js_round_cost(5e21) == 5e21


def test_multi_currency_totals_trim_and_upper_case_the_currency():
    events = [
        _io(1, cost={"amount": 0.0012, "currency": "USD"}),
        _io(2, cost={"amount": 0.0003, "currency": " usd "}),
        _io(3, cost={"amount": 3, "currency": "jpy"}),
        _io(4, cost={"amount": 0.1, "currency": "EUR"}),
        _io(5, cost={"amount": 0.1, "currency": "eur\t"}),
    ]
    ledger = _ledger(events)
    same_json(ledger["totals"]["costByCurrency"], {"USD": 0.0015, "JPY": 3, "EUR": 0.2})
    assert [e["cost"]["currency"] for e in ledger["entries"]] == ["USD", "USD", "JPY", "EUR", "EUR"]
    assert ledger["entries"][1]["cost"]["amount"] == 0.0003


def test_exact_decimal_totals_are_kept_beside_the_reference_numbers():
    accumulator = LedgerAccumulator()
    for n, amount in enumerate([0.1, 0.2, 123456.789]):
        accumulator.add_event(_run(), _io(n, cost={"amount": amount, "currency": "usd"}))
    assert accumulator.exact_cost_by_currency() == {"USD": Decimal("123457.089")}
    assert accumulator.result(now="t")["totals"]["costByCurrency"]["USD"] == 123457.089


def test_numeric_currency_keys_come_first_like_a_javascript_object():
    ledger = _ledger(
        [_io(1, cost={"amount": 1, "currency": "USD"}), _io(2, cost={"amount": 2, "currency": "840"})]
    )
    assert list(ledger["totals"]["costByCurrency"]) == ["840", "USD"]
    assert list(js_object_order({"b": 1, "10": 2, "2": 3, "01": 4})) == ["2", "10", "b", "01"]


# --- tokens, durations, entries -----------------------------------------------------------


def test_total_tokens_falls_back_to_input_plus_output():
    events = [
        _io(1, usage={"inputTokens": 3, "outputTokens": 4}),
        _io(2, usage={"inputTokens": 100, "totalTokens": 5}),
        _io(3, usage={"outputTokens": 2}),
        _io(4, usage={}),
    ]
    totals = _ledger(events)["totals"]
    assert (totals["inputTokens"], totals["outputTokens"], totals["totalTokens"]) == (103, 6, 14)
    assert totals["eventCount"] == 4


def test_integral_durations_print_as_integers_and_fractions_as_doubles():
    totals = _ledger([_io(1, durationMs=10), _io(2, durationMs=2.5), _io(3, durationMs=0.5)])["totals"]
    assert totals["durationMs"] == 13 and type(totals["durationMs"]) is int
    assert (
        _ledger([_io(1, durationMs=0.1), _io(2, durationMs=0.2)])["totals"]["durationMs"]
        == 0.30000000000000004
    )


def test_entries_carry_the_run_subject_and_only_present_fields():
    subject = {"userId": "u1", "tenantId": "t1", "planId": "p1"}
    ledger = _ledger([_io(1, provider="openai", stepId="s")], run=_run(subject=subject))
    assert ledger["entries"] == [
        {"eventId": "evt_1", "runId": "run_1", "ts": "2026-01-01T00:00:01.000Z", "stepId": "s",
         "direction": "response", "provider": "openai", "subject": subject}
    ]  # fmt: skip
    assert [b["key"] for b in ledger["byUser"]] == ["userId:u1"]
    assert [b["key"] for b in ledger["byTenant"]] == ["tenantId:t1"]
    assert [b["key"] for b in ledger["byPlan"]] == ["planId:p1"]


def test_missing_provider_or_model_is_unknown_and_both_missing_is_no_bucket():
    ledger = _ledger([_io(1, provider="_internal"), _io(2, model="local-llama"), _io(3)])
    assert [(b["key"], b["label"]) for b in ledger["byProviderModel"]] == [
        ("provider:_internal|model:unknown", "_internal / unknown"),
        ("provider:unknown|model:local-llama", "unknown / local-llama"),
    ]
    assert [b["key"] for b in ledger["byProvider"]] == ["provider:_internal"]
    assert [b["key"] for b in ledger["byModel"]] == ["model:local-llama"]
    assert ledger["totals"]["eventCount"] == 3


def test_requests_and_stream_chunks_are_excluded_by_default():
    events = [
        _io(1, direction="request", usage={"inputTokens": 10}),
        _io(2, direction="stream_chunk", usage={"outputTokens": 7}, cost={"amount": 1, "currency": "USD"}),
        _io(3, usage={"inputTokens": 10, "outputTokens": 7}),
        {"id": "evt_9", "runId": "run_1", "ts": "2026-01-01T00:00:09.000Z", "type": "tool_call", "name": "x"},
    ]
    default = _ledger(events)
    assert default["totals"]["eventCount"] == 1
    assert default["totals"]["costByCurrency"] == {}
    everything = _ledger(events, directions=ALL_DIRECTIONS)
    assert everything["totals"]["eventCount"] == 3
    assert everything["totals"]["inputTokens"] == 20
    assert [e["direction"] for e in everything["entries"]] == ["request", "stream_chunk", "response"]


def test_unknown_direction_is_rejected():
    with pytest.raises(ProtocolError) as caught:
        _ledger([], directions=("response", "reply"))
    assert caught.value.code == ErrorCode.INVALID_INPUT


def test_many_runs_share_one_ledger_and_list_each_run_once():
    a = _run("run_a", {"userId": "ann"})
    b = _run("run_b", {"userId": "bob"})
    ledger = summarize_model_telemetry(
        [
            (a, [_io(1, run_id="run_a", provider="p", usage={"inputTokens": 1})]),
            (b, []),
            (a, [_io(2, run_id="run_a", provider="p", usage={"inputTokens": 2})]),
            (b, [_io(3, run_id="run_b", provider="q")]),
        ],
        now="n",
    )
    assert ledger["runIds"] == ["run_a", "run_b"]
    assert [(x["key"], x["totals"]["inputTokens"]) for x in ledger["byUser"]] == [
        ("userId:ann", 3),
        ("userId:bob", 0),
    ]
    assert [x["key"] for x in ledger["byProvider"]] == ["provider:p", "provider:q"]


def test_merged_per_run_accumulators_equal_one_pass():
    runs = [(_run(f"run_{i}"), [_io(j, run_id=f"run_{i}", provider=f"p{j % 3}", model="m", durationMs=j,
                                     usage={"inputTokens": j}, cost={"amount": 0.25 * j, "currency": "usd"})
                                 for j in range(5)]) for i in range(3)]  # fmt: skip
    merged = LedgerAccumulator()
    for run, events in runs:
        part = LedgerAccumulator()
        part.add_events(run, events)
        merged.merge(part)
    assert merged.result(now="n") == summarize_model_telemetry(runs, now="n")


def test_generated_at_defaults_to_a_javascript_iso_timestamp():
    generated = summarize_model_telemetry([])["generatedAt"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", generated)


# --- rollup order --------------------------------------------------------------------

ICU_ORDER = [
    "provider:_internal",
    "provider:Anthropic",
    "provider:azure-openai",
    "provider:Bedrock",
    "provider:openai",
    "step:😀-step",
    "step:étape-1",
    "step:Étape-2",
    "step:zebra",
]


@pytest.mark.parametrize("key_function", ["icu", "approximation"])
def test_rollups_sort_like_locale_compare(key_function):
    if key_function == "icu":
        if not collation.ICU_AVAILABLE:
            pytest.skip("ICU (pyicu-wheels) is not installed")
        key = collation.collation_key
    else:
        key = collation.approximate_collation_key
    shuffled = ICU_ORDER[::-1][3:] + ICU_ORDER[::-1][:3]
    assert sorted(shuffled, key=key) == ICU_ORDER
    assert sorted(["a-b", "ab", "a b", "A", "a", "a_b", "b", "1", "$", "~"], key=key) == [
        "~", "$", "1", "a", "A", "a b", "a_b", "a-b", "ab", "b"
    ]  # fmt: skip


def test_fast_cost_rounding_equals_decimal_rounding():
    import random

    from runs.protocol.telemetry import js_round_cost_exact

    rng = random.Random(7)
    ties = [k * 2.0**-13 for k in range(1, 4000, 2)]  # 13 decimals ending in 5: halves
    samples = ties + [rng.random() * 10 ** rng.randint(-14, 22) for _ in range(20000)]
    samples += [a + b for a, b in zip(samples[::2], samples[1::2], strict=False)]
    for value in samples:
        assert js_round_cost(value) == js_round_cost_exact(value), value
    assert js_round_cost(0.0001220703125) == 0.000122070313  # the half goes up, not to even


def test_breakdowns_unattributed_and_per_day_add_up_to_the_totals():
    from runs.protocol.telemetry import ROLLUPS, LedgerAccumulator

    run_a = {"id": "r1", "subject": {"tenantId": "t1"}}
    run_b = {"id": "r2"}

    def response(n, ts, **extra):
        return {
            "id": f"e{n}",
            "runId": "r",
            "ts": ts,
            "type": "model_io",
            "direction": "response",
            "usage": {"inputTokens": 10 * n, "outputTokens": n},
            "cost": {"amount": 0.001 * n, "currency": "usd"},
            **extra,
        }

    acc = LedgerAccumulator(keep_entries=False, breakdowns=True)
    acc.add_event(run_a, response(1, "2026-01-01T00:00:00Z", provider="openai", stepId="s"))
    acc.add_event(run_b, response(2, "2026-01-02T00:00:00Z", model="m"))
    acc.add_event(run_b, response(3, "2026-01-02T10:00:00Z"))
    ledger, extra = acc.result(strict=False), acc.breakdown_result()
    total = ledger["totals"]["totalTokens"]
    for rollup in ROLLUPS:
        rows = sum(b["totals"]["totalTokens"] for b in ledger[rollup])
        rest = extra["unattributed"].get(rollup, {}).get("totalTokens", 0)
        assert rows + rest == total, rollup
    assert extra["unattributed"]["byTenant"]["eventCount"] == 2
    assert "byProviderModel" in extra["unattributed"]  # the third names neither provider nor model
    assert [(d["day"], d["totals"]["eventCount"]) for d in extra["byDay"]] == [
        ("2026-01-01", 1),
        ("2026-01-02", 2),
    ]
    # the reference's output is untouched by the breakdowns
    plain = LedgerAccumulator(keep_entries=False)
    plain.add_event(run_a, response(1, "2026-01-01T00:00:00Z", provider="openai", stepId="s"))
    assert "unattributed" not in plain.result(now="x") and plain.breakdown_result()["byDay"] == []
