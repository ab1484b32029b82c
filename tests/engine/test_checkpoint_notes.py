"""A note on a CHECKPOINT resolution: a checkpoint's name, or the reviewer's words.

A resolution written here names its checkpoint in ``correlationId`` (``checkpoint:<name>``) and
keeps the reviewer's words in ``note``; one without that correlation id names a checkpoint in
``note`` (the reference's convention). Approving the step's own CHECKPOINT gate with a note must
approve that gate, never an unrequested checkpoint.
"""

from __future__ import annotations

import pytest

from runs.engine import (
    AppendEvents,
    BeginStep,
    CompleteStep,
    EngineError,
    RequestGate,
    ResolveGate,
    apply_event,
    decide,
    fold,
)
from runs.engine.fold import checkpoint_name, reviewer_note


def to_review(gated) -> None:
    """intake and draft done; ``review`` (policy CHECKPOINT) asked for its start approval."""
    gated.do(BeginStep("intake"))
    gated.do(ResolveGate("intake", "PAUSE_BEFORE", "approved"))
    gated.do(BeginStep("intake"))
    gated.do(CompleteStep("intake"))
    gated.do(BeginStep("draft"))
    gated.do(CompleteStep("draft"))
    gated.do(ResolveGate("draft", "PAUSE_AFTER", "approved"))
    gated.do(BeginStep("review"))
    assert gated.trace[-1]["type"] == "human_gate_requested"
    assert [g["gate"] for g in gated.state.pending_gates()] == ["CHECKPOINT"]


def test_approving_the_checkpoint_gate_with_a_note_unblocks_the_step(gated):
    to_review(gated)
    gated.do(ResolveGate("review", "CHECKPOINT", "approved", note="numbers look right"))
    resolved = gated.trace[-1]
    assert resolved["type"] == "human_gate_resolved" and resolved["note"] == "numbers look right"
    state = gated.state
    assert state.gate_state["review"] == {"before": "approved", "after": "approved", "checkpoints": {}}
    assert state.pending_gates() == []
    gated.do(BeginStep("review"))
    assert gated.state.step_status["review"] == "running"
    # the stored trace folds to the same state: the note is read back as a note
    assert fold({**state.run}, gated.trace).to_engine_snapshot() == gated.state.to_engine_snapshot()


def test_rejecting_with_a_note_keeps_the_note_and_the_rejection(gated):
    to_review(gated)
    gated.do(ResolveGate("review", "CHECKPOINT", "rejected", note="sources missing"))
    assert gated.trace[-1]["note"] == "sources missing"
    assert set(gated.state.rejections["review"]) == {"CHECKPOINT"}
    assert gated.state.gate_state["review"]["checkpoints"] == {}
    with pytest.raises(EngineError, match="was rejected"):
        gated.do(ResolveGate("review", "CHECKPOINT", "approved"))


def test_a_requested_checkpoint_is_still_named_by_the_note(gated):
    to_review(gated)
    gated.do(ResolveGate("review", "CHECKPOINT", "approved"))
    gated.do(BeginStep("review"))
    gated.do(RequestGate("review", "CHECKPOINT", checkpoint="facts"))
    gated.do(ResolveGate("review", "CHECKPOINT", "approved", checkpoint="facts", note="checked twice"))
    resolved = gated.trace[-1]
    assert resolved["note"] == "checked twice" and resolved["correlationId"] == "checkpoint:facts"
    assert reviewer_note(resolved) == "checked twice"
    assert gated.state.gate_state["review"]["checkpoints"] == {"facts": "approved"}
    assert fold(gated.state.run, gated.trace).to_engine_snapshot() == gated.state.to_engine_snapshot()


def test_a_note_equal_to_a_pending_checkpoint_name_goes_to_an_annotation(gated):
    """The step's own gate and a checkpoint "ok" both wait: a note "ok" must not approve "ok"."""
    to_review(gated)
    gated.do(RequestGate("review", "CHECKPOINT", checkpoint="ok"))
    gated.do(ResolveGate("review", "CHECKPOINT", "approved", note="ok"))
    resolved = gated.trace[-1]
    assert resolved["note"] == "ok" and resolved["correlationId"] == "checkpoint:"
    assert reviewer_note(resolved) == "ok"
    assert gated.state.gate_state["review"]["before"] == "approved"
    assert [g["checkpoint"] for g in gated.state.pending_gates()] == ["ok"]


def test_an_unrequested_named_checkpoint_cannot_hide_behind_the_waiting_gate(gated):
    to_review(gated)
    with pytest.raises(EngineError) as exc:
        gated.do(ResolveGate("review", "CHECKPOINT", "approved", checkpoint="cp-9"))
    assert exc.value.code == "INVALID_STATE_TRANSITION" and exc.value.path == "checkpoint"


def test_fold_reads_notes_by_what_was_requested(gated):
    """Raw events as another implementation might append them."""
    to_review(gated)
    state = gated.state
    step_gate_note = {"type": "human_gate_resolved", "stepId": "review", "gate": "CHECKPOINT", "note": "lgtm"}
    assert checkpoint_name(state, step_gate_note) is None
    gated.do(ResolveGate("review", "CHECKPOINT", "approved"))
    # nothing unnamed is waiting any more: the reference's convention names checkpoint "cp-1"
    named = {"type": "human_gate_resolved", "stepId": "review", "gate": "CHECKPOINT", "note": "cp-1"}
    assert checkpoint_name(gated.state, named) == "cp-1"
    assert checkpoint_name(gated.state, {**named, "gate": "PAUSE_AFTER"}) is None


def test_appended_resolution_with_a_note_resolves_the_waiting_gate(gated, ctx):
    to_review(gated)
    event = {
        "id": "evt_ext_1",
        "runId": gated.state.run["id"],
        "type": "human_gate_resolved",
        "ts": "2026-03-01T21:00:00.000Z",
        "stepId": "review",
        "gate": "CHECKPOINT",
        "decision": "approved",
        "note": "fine by me",
    }
    events = decide(gated.state, AppendEvents([event]), ctx)
    assert events == [event]
    for e in events:
        apply_event(gated.state, e)
    assert gated.state.gate_state["review"]["before"] == "approved"
    assert gated.state.gate_state["review"]["checkpoints"] == {}


def test_a_named_checkpoint_without_words_repeats_its_name_in_note(gated):
    """The reference reads the checkpoint's name from ``note``: without words it still can."""
    to_review(gated)
    gated.do(ResolveGate("review", "CHECKPOINT", "approved"))
    gated.do(BeginStep("review"))
    gated.do(RequestGate("review", "CHECKPOINT", checkpoint="facts"))
    gated.do(ResolveGate("review", "CHECKPOINT", "rejected", checkpoint="facts"))
    resolved = gated.trace[-1]
    assert resolved["note"] == "facts" and reviewer_note(resolved) is None
    assert gated.state.rejections["review"]["CHECKPOINT:facts"]["note"] is None
