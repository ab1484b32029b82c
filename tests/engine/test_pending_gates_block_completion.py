"""A run is never completed while a gate waits for a person (nobody decided it)."""

from __future__ import annotations

import pytest

from runs.engine import AppendEvents, BeginStep, CompleteRun, CompleteStep, EngineError, ResolveGate


def test_complete_run_is_refused_while_a_pause_after_gate_waits(gated):
    gated.do(BeginStep("intake"))
    gated.do(ResolveGate("intake", "PAUSE_BEFORE", "approved"))
    gated.do(BeginStep("intake"))
    gated.do(CompleteStep("intake"))
    gated.do(BeginStep("draft"))
    gated.do(CompleteStep("draft"))  # PAUSE_AFTER: now waits for a reviewer
    with pytest.raises(EngineError, match='still waiting for a decision: PAUSE_AFTER of "draft"') as exc:
        gated.do(CompleteRun())
    assert exc.value.code == "INVALID_STATE_TRANSITION"
    assert gated.state.run["status"] == "running"


def test_an_external_completed_status_is_refused_while_a_gate_waits(gated):
    gated.do(BeginStep("intake"))  # PAUSE_BEFORE requested, undecided
    event = {
        "id": "evt_ext",
        "runId": gated.state.run_id,
        "ts": "2026-03-01T20:00:01.000Z",
        "type": "run_status_changed",
        "status": "completed",
    }
    with pytest.raises(EngineError, match="still waiting for a decision") as exc:
        gated.do(AppendEvents(events=(event,)))
    assert exc.value.path == "events[0].status"
    # failing or cancelling stays possible: only "completed" pretends the gate was passed
    gated.do(AppendEvents(events=({**event, "id": "evt_fail", "status": "failed"},)))
    assert gated.state.run["status"] == "failed"


def test_complete_run_is_allowed_once_every_gate_is_decided(gated):
    for step in ("intake",):
        gated.do(BeginStep(step))
        gated.do(ResolveGate(step, "PAUSE_BEFORE", "approved"))
        gated.do(BeginStep(step))
        gated.do(CompleteStep(step))
    gated.do(BeginStep("draft"))
    gated.do(CompleteStep("draft"))
    gated.do(ResolveGate("draft", "PAUSE_AFTER", "approved"))
    gated.do(BeginStep("review"))
    gated.do(ResolveGate("review", "CHECKPOINT", "approved"))
    gated.do(BeginStep("review"))
    gated.do(CompleteStep("review"))
    gated.do(ResolveGate("review", "PAUSE_AFTER", "approved"))  # a CHECKPOINT step is reviewed after too
    gated.do(BeginStep("publish"))
    gated.do(CompleteStep("publish"))
    assert gated.do(CompleteRun())[-1]["status"] == "completed"
