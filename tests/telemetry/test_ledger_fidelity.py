"""Where the reference's summarizeModelTelemetry throws, and how its numbers are spelt."""

from __future__ import annotations

import pytest

from runs.protocol.canonical import parse_json, wire_bytes
from runs.protocol.errors import ErrorCode
from runs.protocol.telemetry import LedgerAccumulator, LedgerRefused, summarize_model_telemetry

NOW = "2026-01-01T00:00:00.000Z"
RUN = {"id": "run_1", "workflowId": "wf", "status": "running", "subject": {"userId": "u"}}


def _io(n, **fields):
    return {"id": f"evt_{n}", "runId": "run_1", "ts": "2026-01-01T00:00:01.000Z", "type": "model_io",
            "direction": "response", "provider": "p", "model": "m", "stepId": "s", **fields}  # fmt: skip


def _ledger(events):
    return summarize_model_telemetry([(RUN, events)], now=NOW)


def test_numbers_written_as_floats_in_a_bundle_come_out_as_integers():
    text = (
        b'[{"id":"e","runId":"run_1","ts":"2026-01-01T00:00:01.000Z","type":"model_io","direction":"response",'
        b'"usage":{"inputTokens":1000.0,"outputTokens":1e3},"durationMs":1e3,"cost":{"amount":2.0,"currency":"usd"}}]'
    )
    ledger = _ledger(parse_json(text))
    out = wire_bytes(ledger)
    entry = ledger["entries"][0]
    assert entry["usage"] == {"inputTokens": 1000, "outputTokens": 1000}
    assert all(type(v) is int for v in entry["usage"].values())
    assert type(entry["durationMs"]) is int and type(entry["cost"]["amount"]) is int
    assert b"1000.0" not in out and b"2.0" not in out
    assert b'"totals":{"eventCount":1,"inputTokens":1000,"outputTokens":1000,"totalTokens":2000' in out


@pytest.mark.parametrize(
    "field", ["inputTokens", "outputTokens", "totalTokens", "cachedInputTokens", "reasoningTokens"]
)
def test_token_sums_beyond_safe_integers_are_refused(field):
    events = [_io(1, usage={field: 2**53 - 1}), _io(2, usage={field: 1})]
    with pytest.raises(LedgerRefused) as info:
        _ledger(events)
    assert info.value.code == ErrorCode.INVALID_INPUT
    assert "2**53 - 1" in info.value.message


def test_largest_safe_sum_is_a_ledger():
    ledger = _ledger([_io(1, usage={"inputTokens": 2**53 - 2}), _io(2, usage={"inputTokens": 1})])
    assert ledger["totals"]["inputTokens"] == 2**53 - 1


@pytest.mark.parametrize("field", ["stepId", "correlationId"])
def test_empty_step_or_correlation_id_is_refused_like_the_reference(field):
    with pytest.raises(LedgerRefused):
        _ledger([_io(1, **{field: ""})])


def test_pages_can_still_ask_for_the_ledger():
    acc = LedgerAccumulator(keep_entries=False)
    acc.add_events(RUN, [_io(1, usage={"inputTokens": 2**53}), _io(2, usage={"inputTokens": 2**53})])
    assert acc.result(now=NOW, strict=False)["totals"]["inputTokens"] == 2**54
