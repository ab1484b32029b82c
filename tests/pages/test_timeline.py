"""runs.presenters.timeline: row summaries, stream collapsing, state diffs (pure)."""

from runs.presenters.timeline import EventRecord, build_rows, changed_top_keys, diff_values, summarize


def rec(seq, body, corr=""):
    return EventRecord(
        seq, body["type"], "2026-01-01T00:00:00Z", body.get("stepId", ""), corr, "user:a", body
    )


def chunk(seq, corr, text):
    return rec(
        seq,
        {"type": "model_io", "direction": "stream_chunk", "payload": {"delta": text}, "provider": "p"},
        corr,
    )


def test_stream_chunks_of_one_correlation_collapse_into_one_row_at_the_first_chunk():
    records = [
        rec(1, {"type": "step_started", "stepId": "s"}),
        chunk(2, "a", "Hel"),
        chunk(3, "b", "Other"),
        chunk(4, "a", "lo"),
        rec(5, {"type": "model_io", "direction": "response", "provider": "p"}, "a"),
    ]
    rows = build_rows(records)
    assert [r.seq for r in rows] == [1, 2, 3, 5]
    stream = rows[1]
    assert stream.is_stream and stream.chunk_count == 2 and stream.last_seq == 4
    assert stream.stream_text == "Hello"
    assert "2 chunks" in stream.summary and "#2–#4" in stream.summary
    assert rows[2].chunk_count == 1 and rows[2].stream_text == "Other"


def test_no_collapse_without_correlation_id_or_when_disabled():
    records = [chunk(1, "", "x"), chunk(2, "", "y")]
    assert len(build_rows(records)) == 2
    assert len(build_rows([chunk(1, "a", "x"), chunk(2, "a", "y")], collapse_streams=False)) == 2


def test_summaries_say_what_happened():
    assert summarize(
        {
            "type": "human_gate_resolved",
            "stepId": "r",
            "gate": "PAUSE_BEFORE",
            "decision": "approved",
            "note": "ok",
        }
    ) == ("PAUSE_BEFORE gate on r approved: ok")
    assert "v1 → v2 (1 op)" in summarize(
        {"type": "artifact_patch", "artifactKey": "k", "fromVersion": 1, "toVersion": 2, "patch": [{}]}
    )
    text = summarize(
        {
            "type": "model_io",
            "direction": "response",
            "provider": "openai",
            "model": "m",
            "usage": {"inputTokens": 3, "outputTokens": 4},
            "cost": {"amount": 0.5, "currency": " usd"},
        }
    )
    assert "openai/m" in text and "in 3 / out 4 tok" in text and "0.50 USD" in text
    assert len(summarize({"type": "annotation", "text": "x" * 10_000})) <= 240


def test_diff_values_reports_paths_of_added_removed_changed():
    before = {"a": 1, "b": {"c": [1, 2]}, "gone": True, "a/b": 0}
    after = {"a": 2, "b": {"c": [1, 3, 4]}, "new": None, "a/b": 1}
    changes = {(c.path, c.kind) for c in diff_values(before, after)}
    assert changes == {
        ("/a", "changed"),
        ("/b/c/1", "changed"),
        ("/b/c/2", "added"),
        ("/gone", "removed"),
        ("/new", "added"),
        ("/a~1b", "changed"),
    }
    assert diff_values({"x": 1}, {"x": 1}) == []
    assert [c.kind for c in diff_values(1, 1.5)] == ["changed"]
    assert changed_top_keys(diff_values(before, after)) == ["a", "b", "gone", "a/b", "new"]


def test_diff_is_capped():
    assert len(diff_values({str(i): i for i in range(2000)}, {}, limit=10)) == 10
