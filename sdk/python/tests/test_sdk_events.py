"""workbench_sdk.events: protocol events and recorded answers."""

from __future__ import annotations

import re

from workbench_sdk.events import REPLAYED_SUMMARY, RecordedAnswer, make_event, now_iso, recorded_answer


def test_now_iso_is_the_protocol_form():
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", now_iso())


def test_make_event_fills_id_and_time_and_drops_none():
    event = make_event("run_1", "step_started", stepId="parse", note=None)
    assert event["runId"] == "run_1" and event["type"] == "step_started" and event["stepId"] == "parse"
    assert event["id"].startswith("evt_") and "note" not in event
    fixed = make_event("run_1", "annotation", ts="2025-01-01T00:00:00.000Z", event_id="evt_x", text="t")
    assert fixed == {
        "id": "evt_x",
        "runId": "run_1",
        "ts": "2025-01-01T00:00:00.000Z",
        "type": "annotation",
        "text": "t",
    }


def test_recorded_answer_keeps_chunk_payloads():
    answer = recorded_answer({"id": "m"}, [{"payload": {"type": "message_stop"}}, {"payload": "text"}, {}])
    assert isinstance(answer, RecordedAnswer)
    assert answer.body == {"id": "m"} and answer.chunks == [{"type": "message_stop"}]
    assert REPLAYED_SUMMARY == "replayed"
