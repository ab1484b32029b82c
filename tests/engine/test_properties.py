"""Random valid command sequences: incremental application equals a fold of all events."""

from __future__ import annotations

import json
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runs.engine import (
    Annotate,
    BeginStep,
    CompleteStep,
    EngineError,
    LogModelIO,
    PatchArtifact,
    RequestGate,
    ResolveGate,
    RunState,
    SetGatePolicy,
    WriteArtifact,
    apply_event,
    decide,
    fold,
    new_run,
)
from tests.engine.conftest import GATED, make_ctx

STEPS = [s["id"] for s in GATED["steps"]]

command = st.one_of(
    st.builds(BeginStep, st.sampled_from(STEPS)),
    st.builds(CompleteStep, st.sampled_from(STEPS), st.booleans(), st.just({"message": "x"})),
    st.builds(
        ResolveGate,
        st.sampled_from(STEPS),
        st.sampled_from(["PAUSE_BEFORE", "PAUSE_AFTER", "CHECKPOINT"]),
        st.sampled_from(["approved", "rejected", "edited"]),
        checkpoint=st.one_of(st.none(), st.sampled_from(["c1", "c2"])),
    ),
    st.builds(
        RequestGate,
        st.sampled_from(STEPS),
        st.sampled_from(["PAUSE_BEFORE", "PAUSE_AFTER", "CHECKPOINT"]),
        checkpoint=st.one_of(st.none(), st.sampled_from(["c1", "c2"])),
    ),
    st.builds(
        WriteArtifact,
        st.sampled_from(["k1", "k2"]),
        st.just("doc"),
        st.dictionaries(st.sampled_from(["a", "b"]), st.integers(0, 3)),
        idempotency_key=st.one_of(st.none(), st.sampled_from(["i1", "i2", "i3"])),
    ),
    st.builds(
        PatchArtifact,
        st.sampled_from(["k1", "k2"]),
        st.integers(1, 4),
        st.lists(st.builds(lambda v: {"op": "add", "path": "/a", "value": v}, st.integers(0, 3)), max_size=2),
        idempotency_key=st.one_of(st.none(), st.sampled_from(["i1", "i4"])),
    ),
    st.builds(
        SetGatePolicy,
        st.sampled_from(STEPS),
        st.sampled_from(["AUTO", "PAUSE_BEFORE", "PAUSE_AFTER", "CHECKPOINT"]),
    ),
    st.builds(
        LogModelIO,
        st.just("response"),
        usage=st.fixed_dictionaries({"inputTokens": st.integers(0, 10)}),
        cost=st.fixed_dictionaries(
            {"amount": st.sampled_from([0.1, 0.2, 1]), "currency": st.sampled_from(["USD", "eur"])}
        ),
    ),
    st.builds(Annotate, st.text(max_size=5)),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(command, max_size=40))
def test_incremental_application_equals_fold(commands):
    ctx = make_ctx()
    state = new_run(ctx=ctx, workflow=GATED, run_id="run_prop")
    initial_run = dict(state.run)
    trace: list[dict] = []
    for cmd in commands:
        before = json.dumps(state.to_json(), sort_keys=True)
        try:
            events = decide(state, cmd, ctx)
        except EngineError:
            assert json.dumps(state.to_json(), sort_keys=True) == before  # refused: nothing changed
            continue
        for event in events:
            apply_event(state, event)
        trace.extend(events)
        assert state.revision == len(trace)
        # the engine snapshot only ever holds the protocol's values
        for _, gs in state.to_engine_snapshot()["gateState"]:
            assert gs["before"] in ("approved", "pending") and gs["after"] in ("approved", "pending")
    folded = fold(initial_run, trace)
    assert folded == state
    assert folded.warnings == []
    assert RunState.from_json(json.loads(json.dumps(state.to_json()))) == state
    # a step never starts while a predecessor is unfinished
    seen_completed: set[str] = set()
    preds = {s: folded.graph.predecessors[s] for s in STEPS}
    for event in trace:
        if event["type"] == "step_started":
            assert all(p in seen_completed for p in preds[event["stepId"]])
        if event["type"] == "step_completed" and event["ok"]:
            seen_completed.add(event["stepId"])


def test_fold_of_100k_events_is_fast():
    ctx = make_ctx()
    state = new_run(ctx=ctx, workflow=GATED, run_id="run_big")
    run = dict(state.run)
    ts = "2026-03-01T20:00:00.000Z"
    events = []
    kinds = [
        {
            "type": "model_io",
            "direction": "response",
            "usage": {"inputTokens": 3, "outputTokens": 5},
            "cost": {"amount": 0.001, "currency": "USD"},
        },
        {"type": "tool_call", "name": "search", "args": {"q": "x"}},
        {"type": "annotation", "text": "hello"},
        {
            "type": "artifact_written",
            "artifact": {
                "artifactKey": "k",
                "typeId": "doc",
                "version": 1,
                "createdAt": ts,
                "data": {"n": 1},
            },
        },
    ]
    for i in range(100_000):
        body = kinds[i % len(kinds)]
        events.append({"id": f"evt_{i}", "runId": "run_big", "ts": ts, **body})
    started = time.perf_counter()
    folded = fold(run, events)
    elapsed = time.perf_counter() - started
    assert folded.revision == 100_000 and folded.model_calls == 25_000
    assert folded.cost == {"USD": "25"}
    print(f"fold of 100k events: {elapsed:.3f}s")
    assert elapsed < 2.0  # well under a second on an idle core; slack for a shared CI machine
