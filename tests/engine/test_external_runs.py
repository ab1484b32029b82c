"""Runs driven from outside (``metadata["workbench.driver"] = "external"``): attempts, revisions
after a rejection, steps discovered as the pipeline runs, and the seed's rule that nothing moves
past a rejected gate unless the pipeline records a retry, a revise or a fork."""

from __future__ import annotations

import itertools

import pytest

from runs.engine import AppendEvents, EngineError, ResolveGate, decide, fold, new_run
from runs.engine.state import initial_run_doc
from runs.protocol.validate import validate_bundle

from .conftest import Driver

LOOP = {
    "id": "wf-loop",
    "version": 1,
    "steps": [{"id": "draft"}, {"id": "review"}, {"id": "publish"}],
    "edges": [{"id": "e1", "from": "draft", "to": "review"}, {"id": "e2", "from": "review", "to": "publish"}],
}
EXTERNAL = {"workbench.driver": "external"}


class Host(Driver):
    """Appends raw events as a host SDK does (``POST /runs/{id}/events``)."""

    ids = itertools.count(1)

    def send(self, etype: str, **fields) -> None:
        event = {"id": f"evt_h{next(self.ids):04d}", "runId": self.state.run_id, "ts": self.ctx.now()}
        event.update(type=etype, **fields)
        self.do(AppendEvents([event]))

    def start(self, step: str) -> None:
        self.send("step_started", stepId=step)

    def done(self, step: str, ok: bool = True) -> None:
        self.send("step_completed", stepId=step, ok=ok)

    def ask(self, step: str, name: str) -> None:
        self.send("human_gate_requested", stepId=step, gate="CHECKPOINT", correlationId=f"checkpoint:{name}")


def host(ctx, *, external: bool = True, workflow=LOOP) -> Host:
    return Host(
        new_run(ctx=ctx, workflow=workflow, run_id="run_x", metadata=EXTERNAL if external else None), ctx
    )


def refused(h: Host, etype: str, match: str, **fields) -> None:
    with pytest.raises(EngineError, match=match) as exc:
        h.send(etype, **fields)
    assert exc.value.code == "INVALID_STATE_TRANSITION"


def test_a_rejection_the_pipeline_revises_is_recorded_as_attempts(ctx):
    h = host(ctx)
    h.start("draft")
    h.done("draft")
    h.start("review")
    h.ask("review", "interrupt")
    h.do(ResolveGate("review", "CHECKPOINT", "rejected", checkpoint="interrupt", note="too long"))
    h.done("review")  # the node received the rejection and ended: allowed for an external run
    refused(h, "step_started", 'CHECKPOINT "interrupt" of step "review" was rejected', stepId="publish")
    h.start("draft")  # the revise: attempt 2 of an earlier step
    h.done("draft")
    h.start("review")  # attempt 2 of the rejected step clears its checkpoint's rejection
    assert h.state.rejections == {}
    h.ask("review", "interrupt")
    h.do(ResolveGate("review", "CHECKPOINT", "approved", checkpoint="interrupt", note="good now"))
    h.done("review")
    h.start("publish")
    h.done("publish")
    h.send("run_status_changed", status="completed")
    assert h.state.step_attempts == {"draft": 2, "review": 2, "publish": 1}
    assert h.state.status == "completed"
    notes = [e.get("note") for e in h.trace if e["type"] == "human_gate_resolved"]
    assert notes == ["too long", "good now"]
    # the trace folds back to the same state, and the bundle is a valid protocol 1.0.0 bundle
    again = fold(initial_run_doc(h.state.run), h.trace)
    assert again.to_json() == h.state.to_json()
    validate_bundle(
        {"protocolVersion": "1.0.0", "run": h.state.run, "trace": h.trace, "artifacts": [], "ruleSets": []}
    )


def test_without_the_external_driver_the_seed_rules_stand(ctx):
    h = host(ctx, external=False)
    h.start("draft")
    h.done("draft")
    h.start("review")
    h.ask("review", "interrupt")
    h.do(ResolveGate("review", "CHECKPOINT", "rejected", checkpoint="interrupt"))
    refused(h, "step_completed", 'CHECKPOINT "interrupt" was rejected', stepId="review", ok=True)
    h.done("review", ok=False)
    refused(h, "step_started", "already completed", stepId="draft")
    refused(h, "step_started", 'waiting for predecessor "review"', stepId="publish")
    with pytest.raises(EngineError) as exc:
        h.send("step_started", stepId="brand-new")
    assert exc.value.code == "UNKNOWN_STEP"


def test_nothing_moves_past_a_standing_rejection(ctx):
    wf = {**LOOP, "steps": [*LOOP["steps"], {"id": "notify"}]}  # notify: no edges
    h = host(ctx, workflow=wf)
    h.start("draft")
    h.done("draft")
    h.start("review")
    h.ask("review", "interrupt")
    h.do(ResolveGate("review", "CHECKPOINT", "rejected", checkpoint="interrupt"))
    h.done("review", ok=False)
    # a first attempt of any step, known or discovered, would move past the rejection
    refused(h, "step_started", "was rejected", stepId="notify")
    refused(h, "step_started", "was rejected", stepId="somewhere-else")
    assert "somewhere-else" not in h.state.step_status
    # a retry of the rejected step itself is fine (its predecessor completed)
    h.start("review")
    assert h.state.step_attempts["review"] == 2 and h.state.rejections == {}


def test_a_step_downstream_of_the_rejection_cannot_start_again(ctx):
    h = host(ctx)
    for step in ("draft", "review", "publish"):
        h.start(step)
        h.done(step)
    h.start("review")
    h.ask("review", "second-look")
    h.do(ResolveGate("review", "CHECKPOINT", "rejected", checkpoint="second-look"))
    h.done("review")
    refused(h, "step_started", "was rejected", stepId="publish")  # attempted before, but downstream
    h.start("draft")
    assert h.state.step_attempts["draft"] == 2


def test_a_running_step_cannot_start_twice_and_pending_checkpoints_hold_completion(ctx):
    h = host(ctx)
    h.start("draft")
    refused(h, "step_started", "already running", stepId="draft")
    h.ask("draft", "look")
    refused(h, "step_completed", 'waiting for CHECKPOINT "look"', stepId="draft", ok=True)


def test_steps_are_discovered_as_the_pipeline_runs(ctx):
    h = host(ctx, workflow={"id": "pipeline", "version": 0, "steps": [{"id": "pipeline"}]})
    h.start("pipeline")
    h.start("summarize")
    h.send("model_io", stepId="summarize", direction="request", provider="openai", model="m")
    h.done("summarize")
    h.start("summarize")
    h.done("summarize")
    h.done("pipeline")
    steps = h.state.run["workflowSnapshot"]["steps"]
    assert [s["id"] for s in steps] == ["pipeline", "summarize"]
    assert steps[1] == {"id": "summarize", "gatePolicy": "AUTO", "inputs": [], "outputs": []}
    assert h.state.step_attempts == {"pipeline": 1, "summarize": 2}
    # a fold from the final document and a fold from the start document agree
    start = fold(
        initial_run_doc(
            {
                **h.state.run,
                "workflowSnapshot": {
                    "id": "pipeline",
                    "version": 0,
                    "steps": [{"id": "pipeline", "gatePolicy": "AUTO", "inputs": [], "outputs": []}],
                    "edges": [],
                },
            }
        ),
        h.trace,
    )
    assert start.to_json() == fold(initial_run_doc(h.state.run), h.trace).to_json() == h.state.to_json()
    # other events still need a known step
    with pytest.raises(EngineError) as exc:
        h.send("model_io", stepId="unknown", direction="request")
    assert exc.value.code == "UNKNOWN_STEP"


def test_a_bad_discovered_step_id_or_driver_is_refused(ctx):
    h = host(ctx)
    with pytest.raises(EngineError) as exc:
        h.send("step_started", stepId=" padded ")
    assert exc.value.code == "UNKNOWN_STEP"
    with pytest.raises(EngineError) as exc:
        new_run(ctx=ctx, workflow=LOOP, metadata={"workbench.driver": "internal"})
    assert exc.value.code == "INVALID_INPUT" and exc.value.path == "metadata.workbench.driver"


def test_decide_leaves_the_state_alone_when_refused(ctx):
    h = host(ctx)
    before = h.state.to_json()
    with pytest.raises(EngineError):
        decide(
            h.state,
            AppendEvents(
                [
                    {
                        "id": "e",
                        "runId": "run_x",
                        "ts": ctx.now(),
                        "type": "step_completed",
                        "stepId": "draft",
                        "ok": True,
                    }
                ]
            ),
            ctx,
        )
    assert h.state.to_json() == before


def test_one_completed_predecessor_is_enough_in_an_external_run(ctx):
    """LangGraph runs a node when any of its incoming edges fires (a conditional join)."""
    join = {
        "id": "wf-join",
        "version": 0,
        "steps": [{"id": "route"}, {"id": "left"}, {"id": "right"}, {"id": "merge"}],
        "edges": [
            {"id": "a", "from": "route", "to": "left"},
            {"id": "b", "from": "route", "to": "right"},
            {"id": "c", "from": "left", "to": "merge"},
            {"id": "d", "from": "right", "to": "merge"},
        ],
    }
    h = host(ctx, workflow=join)
    refused(h, "step_started", "waiting for one of its predecessors", stepId="left")
    h.start("route")
    h.done("route")
    h.start("left")
    h.done("left")
    h.start("merge")  # "right" never ran
    assert h.state.step_status == {
        "route": "completed",
        "left": "completed",
        "right": "pending",
        "merge": "running",
    }
    strict = host(ctx, external=False, workflow=join)
    for step in ("route", "left"):
        strict.start(step)
        strict.done(step)
    refused(strict, "step_started", 'waiting for predecessor "right"', stepId="merge")
