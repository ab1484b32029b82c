"""Replay comparison (pure): what counts as the same event in a replay."""

from __future__ import annotations

from runs.engine.divergence import REPLAYED_SUMMARY, same_event


def answer(**fields):
    event = {
        "id": "evt_1",
        "runId": "r1",
        "ts": "2026-01-01T00:00:00Z",
        "type": "model_io",
        "direction": "response",
        "correlationId": "c1",
        "durationMs": 812,
        "usage": {"inputTokens": 3, "outputTokens": 4, "totalTokens": 7, "cachedInputTokens": 0},
        "payload": {"content": [{"type": "text", "text": "Echo: hi"}]},
    }
    return {**event, **fields}


def test_a_replayed_answer_stands_for_the_original_summary():
    original = answer(summary="Echo: hi")
    replayed = answer(id="evt_2", runId="r2", correlationId="c2", durationMs=0, summary=REPLAYED_SUMMARY)
    assert same_event(original, replayed)
    assert same_event(answer(), replayed)  # the original had no summary at all


def test_a_replayed_answer_with_other_content_still_differs():
    changed = answer(summary=REPLAYED_SUMMARY, payload={"content": [{"type": "text", "text": "Echo: ho"}]})
    assert not same_event(answer(summary="Echo: hi"), changed)
    assert not same_event(
        answer(), answer(usage={**answer()["usage"], "outputTokens": 5}, summary=REPLAYED_SUMMARY)
    )


def test_other_summaries_and_events_are_compared_as_they_are():
    assert not same_event(answer(summary="Echo: hi"), answer(summary="Echo: ho"))
    note = {"type": "annotation", "text": "x", "summary": REPLAYED_SUMMARY}
    assert not same_event({"type": "annotation", "text": "x"}, note)
