"""runs.presenters.compare (pure): alignment by step then position, windows cut at synchronised points, row
kinds, word/line text diffs, signed deltas with percentages, folding of identical stretches."""

from __future__ import annotations

from decimal import Decimal

from runs.presenters.compare import (
    CHANGED,
    MARKER,
    ONLY_A,
    ONLY_B,
    SAME,
    align,
    compare_row,
    delta,
    fold_same,
    text_diff,
)
from runs.presenters.timeline import EventRecord


def ev(seq: int, etype: str, step: str = "", run: str = "A", **fields) -> EventRecord:
    body = {"id": f"e{run}{seq}", "runId": run, "ts": f"2026-01-01T00:00:{seq:02d}Z", "type": etype, **fields}
    if step:
        body["stepId"] = step
    return EventRecord(seq, etype, body["ts"], step, "", "", body)


def trace(spec: str, run: str) -> list[EventRecord]:
    """``"p:s p:m p:c"``: step p started, a model response in p, p completed (letters: see KINDS)."""
    kinds = {"s": "step_started", "c": "step_completed", "m": "model_io", "t": "tool_call", "a": "annotation"}
    out = []
    for i, token in enumerate(spec.split(), start=1):
        step, kind = token.split(":")
        extra = {"direction": "response"} if kind == "m" else {"name": "x"} if kind == "t" else {}
        out.append(ev(i, kinds[kind], step, run, **extra))
    return out


def shape(pairs) -> list[tuple[int | None, int | None]]:
    return [(a.seq if a else None, b.seq if b else None) for a, b in pairs]


def test_identical_traces_pair_one_to_one():
    a, b = trace("p:s p:m p:c q:s q:c", "A"), trace("p:s p:m p:c q:s q:c", "B")
    pairs, used_a, used_b = align(a, b, limit=100, end_a=True, end_b=True)
    assert shape(pairs) == [(i, i) for i in range(1, 6)] and used_a == used_b == 5
    assert {compare_row(x, y).kind for x, y in pairs} == {SAME}  # ids, run ids and times aside


def test_an_extra_event_shows_on_one_side_and_the_rest_stays_aligned():
    a = trace("p:s p:m p:c q:s q:c", "A")
    b = trace("p:s p:m p:t p:c q:s q:c", "B")  # B made a tool call A did not
    pairs, _, _ = align(a, b, limit=100, end_a=True, end_b=True)
    assert shape(pairs) == [(1, 1), (2, 2), (None, 3), (3, 4), (4, 5), (5, 6)]
    assert compare_row(None, b[2]).kind == ONLY_B and compare_row(a[0], None).kind == ONLY_A


def test_steps_align_by_step_id_before_position():
    a = trace("p:s p:c q:s q:m q:c", "A")
    b = trace("p:s p:c r:s r:c q:s q:m q:c", "B")  # B ran step r first
    pairs, _, _ = align(a, b, limit=100, end_a=True, end_b=True)
    assert shape(pairs) == [(1, 1), (2, 2), (None, 3), (None, 4), (3, 5), (4, 6), (5, 7)]


def test_events_of_different_steps_never_share_a_row():
    a, b = trace("p:s p:t", "A"), trace("p:s q:t", "B")
    pairs, _, _ = align(a, b, limit=100, end_a=True, end_b=True)
    assert shape(pairs) == [(1, 1), (2, None), (None, 2)]


def test_windows_stop_at_a_synchronised_point():
    a, b = trace("p:s " + "p:m " * 8, "A"), trace("p:s " + "p:m " * 8, "B")
    pairs, used_a, used_b = align(a, b, limit=3, end_a=False, end_b=False)
    assert shape(pairs) == [(1, 1), (2, 2), (3, 3)] and (used_a, used_b) == (3, 3)
    # B's window ends before the match of A's next event can be seen: no guess at "only in A"
    a2, b2 = trace("p:s p:t p:t", "A"), trace("p:s", "B")
    pairs, used_a, used_b = align(a2, b2, limit=10, end_a=True, end_b=False)
    assert shape(pairs) == [(1, 1)] and (used_a, used_b) == (1, 1)
    pairs, _, _ = align(a2, b2, limit=10, end_a=True, end_b=True)  # B really ends there
    assert shape(pairs) == [(1, 1), (2, None), (3, None)]
    # a one-sided event before a later match is certain: it is shown
    pairs, _, _ = align(trace("p:s p:t p:m", "A"), trace("p:s p:m", "B"), limit=10, end_a=True, end_b=False)
    assert shape(pairs) == [(1, 1), (2, None), (3, 2)]


def test_row_kinds_and_fork_markers():
    a = ev(
        1, "model_io", "p", "A", direction="response", payload={"content": [{"type": "text", "text": "x"}]}
    )
    b = ev(
        1, "model_io", "p", "B", direction="response", payload={"content": [{"type": "text", "text": "y"}]}
    )
    row = compare_row(a, b)
    assert row.kind == CHANGED and [(o.op, o.text) for o in row.text_diff] == [("del", "x"), ("add", "y")]
    forked = ev(4, "run_forked", run="B", parentRunId="A")
    assert compare_row(None, forked).kind == MARKER
    note = ev(9, "annotation", run="B", text="{}", tags=["workbench:replay.diverged"])
    assert compare_row(None, note).kind == MARKER
    # durations measured on a clock are not a difference; an artifact's data is, path by path
    slow = ev(2, "model_io", "p", "B", direction="response", durationMs=900)
    assert compare_row(ev(2, "model_io", "p", "A", direction="response", durationMs=100), slow).kind == SAME
    art = {"artifactKey": "k", "typeId": "t", "version": 1}
    wa = ev(3, "artifact_written", run="A", artifact={**art, "data": {"a": 1, "b": [1]}})
    wb = ev(3, "artifact_written", run="B", artifact={**art, "data": {"a": 2, "b": [1, 2]}})
    assert [(c.path, c.kind) for c in compare_row(wa, wb).json_diff] == [("/a", "changed"), ("/b/1", "added")]


def test_text_diff_by_word_and_by_line():
    ops, mode = text_diff("the cat sat on the mat", "the dog sat on the mat")
    assert mode == "word" and [(o.op, o.text) for o in ops] == [
        ("same", "the "),
        ("del", "cat "),
        ("add", "dog "),
        ("same", "sat on the mat"),
    ]
    before = "\n".join(f"line {i} " + "w " * 3 for i in range(800))
    after = before.replace("line 600 ", "LINE 600 ")  # 4,000 words: by line
    ops, mode = text_diff(before, after)
    assert mode == "line" and [o.op for o in ops] == ["same", "del", "add", "same"]
    assert ops[1].text.startswith("line 600") and ops[2].text.startswith("LINE 600")
    assert "".join(o.text for o in ops if o.op != "add") == before


def test_deltas_have_signs_and_percentages():
    assert delta(40, 60).text == "+20 (+50.0%)"
    assert delta(Decimal("0.0040"), Decimal("0.003")).text == "\u22120.001 (\u221225.0%)"
    assert delta(3, 3).text == "0" and delta(3, 3).sign == "zero"
    assert delta(0, 5).text == "+5 (new)" and delta(5, None).text == "\u22125 (\u2212100.0%)"
    assert delta(None, None).text == "" and delta(0.1, 0.3).text == "+0.2 (+200.0%)"  # exact, not 0.19999...


def test_identical_stretches_fold():
    rows = [compare_row(x, y) for x, y in zip(trace("p:s " * 6, "A"), trace("p:s " * 6, "B"), strict=True)]
    rows[2].kind = CHANGED
    blocks = fold_same(rows, at_least=3)
    assert [getattr(b, "is_fold", False) for b in blocks] == [False, False, False, True]
    assert [r.a.seq for r in blocks[3].rows] == [4, 5, 6]


def test_equal_events_line_up_around_an_extra_one_of_the_same_kind():
    a = [ev(i, "annotation", "p", "A", text=f"note {i}") for i in range(1, 9) if i != 4]
    b = [ev(i, "annotation", "p", "B", text=f"note {i}") for i in range(1, 9)]
    pairs, _, _ = align(a, b, limit=100, end_a=True, end_b=True)
    assert [(x.body["text"] if x else None, y.body["text"] if y else None) for x, y in pairs][2:5] == [
        ("note 3", "note 3"),
        (None, "note 4"),
        ("note 5", "note 5"),
    ]
    assert [compare_row(x, y).kind for x, y in pairs].count(SAME) == 7


def test_model_calls_show_token_cost_and_latency_deltas():
    def call(run: str, output_tokens: int, amount: float, currency: str, ms: int) -> EventRecord:
        usage = {"inputTokens": 100, "outputTokens": output_tokens}
        cost = {"amount": amount, "currency": currency}
        return ev(3, "model_io", "p", run, direction="response", usage=usage, cost=cost, durationMs=ms)

    a = call("A", 40, 0.002, "usd", 300)
    row = compare_row(a, call("B", 60, 0.003, "USD ", 300))
    assert [(label, d.text) for label, d in row.metrics] == [
        ("tokens", "+20 (+14.3%)"),
        ("cost USD", "+0.001 (+50.0%)"),
    ]
    row = compare_row(a, call("B", 40, 0.002, "usd", 450))  # slower only: no difference, a delta
    assert row.kind == SAME and [(label, d.text) for label, d in row.metrics] == [("ms", "+150 (+50.0%)")]


def test_artifacts_kept_outside_differ_by_their_pointers():
    from runs.presenters.compare import artifact_rows

    def summary(pointer):
        version = {"artifactKey": "big", "typeId": "t", "version": 2, "pointer": pointer}
        return {"artifacts": {"big": version}, "artifact_versions": {"big": 2}}

    ext = {"kind": "external", "ref": "s3://x", "payloadHash": "a" * 64}
    (row,) = artifact_rows(summary(ext), summary({**ext, "payloadHash": "b" * 64}))
    assert row.kind == CHANGED and [(c.path, c.kind) for c in row.changes] == [
        ("/pointer/payloadHash", "changed")
    ]
    (row,) = artifact_rows(summary(ext), summary(dict(ext)))
    assert row.kind == SAME


def test_events_of_different_types_are_not_diffed_field_by_field():
    art = ev(
        3, "artifact_written", run="A", artifact={"artifactKey": "k", "typeId": "t", "version": 1, "data": {}}
    )
    note = ev(3, "annotation", run="B", text="carried in")
    row = compare_row(art, note)
    assert row.kind == CHANGED and row.json_diff == [] and row.text_diff == []
    assert row.summary_a and row.summary_b  # each side still says what it is


def test_alignment_never_pairs_events_of_different_types():
    a = [ev(1, "step_started", "p"), ev(2, "artifact_written", "p", artifact={"artifactKey": "k"})]
    b = [ev(1, "step_started", "p", run="B"), ev(2, "annotation", "p", run="B", text="note")]
    pairs, used_a, used_b = align(a, b, limit=10, end_a=True, end_b=True)
    kinds = [compare_row(pa, pb).kind for pa, pb in pairs]
    assert kinds == [SAME, ONLY_A, ONLY_B] and (used_a, used_b) == (2, 2)  # removed, added: not "changed"
