from __future__ import annotations

import pytest

from runs.engine import (
    Annotate,
    AppendEvents,
    BeginStep,
    CancelRun,
    ChangeRuleSet,
    CompleteRun,
    CompleteStep,
    EndSpan,
    EngineError,
    FailRun,
    LogModelIO,
    LogToolCall,
    PatchArtifact,
    RecordError,
    RequestGate,
    ResolveGate,
    SetGatePolicy,
    StartSpan,
    WriteArtifact,
    decide,
    fold,
    fork_run,
    new_run,
)
from tests.engine.conftest import DIAMOND, Driver


def codes(excinfo) -> str:
    return excinfo.value.code


def test_new_run_rejects_bad_workflows(ctx):
    cyclic = {**DIAMOND, "edges": DIAMOND["edges"] + [{"id": "da", "from": "d", "to": "a"}]}
    for wf in (cyclic, {**DIAMOND, "steps": []}, {**DIAMOND, "steps": [{"id": "a"}, {"id": "a"}]}):
        with pytest.raises(EngineError) as exc:
            new_run(ctx=ctx, workflow=wf)
        assert exc.value.code == "INVALID_WORKFLOW"
    self_edge = {**DIAMOND, "edges": [{"id": "x", "from": "a", "to": "a"}]}
    with pytest.raises(EngineError, match="itself"):
        new_run(ctx=ctx, workflow=self_edge)


def test_new_run_defaults_and_initial_gates(gated):
    s = gated.state
    assert s.run["status"] == "running" and s.revision == 0
    assert s.run["workflowSnapshot"]["steps"][3] == {
        "id": "publish",
        "gatePolicy": "AUTO",
        "inputs": [],
        "outputs": [],
    }
    assert s.gate_state["intake"] == {"before": "pending", "after": "approved", "checkpoints": {}}
    assert s.gate_state["review"]["before"] == "pending"
    assert s.ready_steps() == []
    assert [(g["stepId"], g["gate"], g["requested"]) for g in s.pending_gates()] == [
        ("intake", "PAUSE_BEFORE", False)
    ]


def test_pause_before_requests_then_holds_until_approved(gated):
    events = gated.do(BeginStep("intake"))
    assert [e["type"] for e in events] == ["human_gate_requested"]
    assert gated.state.step_status["intake"] == "pending"
    with pytest.raises(EngineError, match="waiting for PAUSE_BEFORE gate approval") as exc:
        gated.do(BeginStep("intake"))
    assert exc.value.code == "INVALID_STATE_TRANSITION"
    gated.do(ResolveGate("intake", "PAUSE_BEFORE", "approved"))
    assert gated.do(BeginStep("intake"))[0]["type"] == "step_started"


def test_predecessor_message(gated):
    with pytest.raises(EngineError) as exc:
        gated.do(BeginStep("draft"))
    assert exc.value.message == 'step "draft" cannot start: waiting for predecessor "intake" (pending)'


def run_intake(d: Driver) -> None:
    d.do(BeginStep("intake"))
    d.do(ResolveGate("intake", "PAUSE_BEFORE", "approved"))
    d.do(BeginStep("intake"))
    d.do(CompleteStep("intake"))


def test_full_gated_flow_matches_reference_shape(gated):
    run_intake(gated)
    gated.do(BeginStep("draft"))
    events = gated.do(CompleteStep("draft"))
    assert [e["type"] for e in events] == ["human_gate_requested", "step_completed"]
    assert gated.state.gate_state["draft"]["after"] == "pending"
    with pytest.raises(EngineError, match='PAUSE_AFTER gate approval of predecessor "draft"'):
        gated.do(BeginStep("review"))
    gated.do(
        ResolveGate(
            "draft",
            "PAUSE_AFTER",
            "edited",
            note="tweaked headline",
            edit=WriteArtifact("headline", "job.profile", {"headline": "h", "skills": [], "summary": "s"}),
        )
    )
    assert gated.trace[-2]["type"] == "artifact_written" and gated.trace[-2]["stepId"] == "draft"
    gated.do(ResolveGate("review", "CHECKPOINT", "approved", checkpoint="cp-1"))
    gated.do(ResolveGate("review", "CHECKPOINT", "approved"))
    gated.do(BeginStep("review"))
    gated.do(CompleteStep("review"))
    gated.do(ResolveGate("review", "PAUSE_AFTER", "approved", note="ship it"))
    gated.do(BeginStep("publish"))
    gated.do(CompleteStep("publish"))
    gated.do(CompleteRun())
    s = gated.state
    assert s.run["status"] == "completed" and s.run["endedAt"] == gated.trace[-1]["ts"]
    assert s.gate_state["review"] == {
        "before": "approved",
        "after": "approved",
        "checkpoints": {"cp-1": "approved"},
    }
    assert fold({**s.run, "status": "running"}, gated.trace).to_engine_snapshot() == s.to_engine_snapshot()
    # an annotation is the one thing a finished run takes (a review after the fact); it changes no state
    before = gated.state.to_engine_snapshot()
    gated.do(Annotate("late", tags=["workbench:review"]))
    after = gated.state.to_engine_snapshot()
    assert gated.trace[-1]["type"] == "annotation" and after["revision"] == before["revision"] + 1
    assert {**after, "revision": 0} == {**before, "revision": 0}  # only the append count moved
    assert gated.state.run["status"] == "completed"
    with pytest.raises(EngineError, match="completed") as exc:
        gated.do(BeginStep("publish"))
    assert exc.value.code == "INVALID_STATE_TRANSITION"


def test_pause_before_rejection_stops_until_requested_again(gated):
    gated.do(BeginStep("intake"))
    gated.do(ResolveGate("intake", "PAUSE_BEFORE", "rejected", note="no"))
    assert gated.state.gate_state["intake"]["before"] == "pending"
    with pytest.raises(EngineError, match="rejected"):
        gated.do(BeginStep("intake"))
    with pytest.raises(EngineError, match="request it again"):
        gated.do(ResolveGate("intake", "PAUSE_BEFORE", "approved"))
    assert gated.state.pending_gates() == []
    gated.do(RequestGate("intake", "PAUSE_BEFORE", reason="retry"))
    gated.do(ResolveGate("intake", "PAUSE_BEFORE", "approved"))
    assert gated.do(BeginStep("intake"))[0]["type"] == "step_started"


def test_pause_after_rejection_blocks_successors_until_step_retried(gated):
    run_intake(gated)
    gated.do(BeginStep("draft"))
    gated.do(CompleteStep("draft"))
    gated.do(ResolveGate("draft", "PAUSE_AFTER", "rejected"))
    with pytest.raises(EngineError, match='PAUSE_AFTER gate of predecessor "draft" was rejected'):
        gated.do(BeginStep("review"))
    assert gated.state.ready_steps() == ["draft"]  # the retry
    gated.do(BeginStep("draft"))
    assert gated.state.step_attempts["draft"] == 2
    gated.do(CompleteStep("draft"))
    gated.do(ResolveGate("draft", "PAUSE_AFTER", "approved"))
    assert gated.state.ready_steps() == []  # review still needs its start approval
    assert gated.state.pending_gates()[0]["gate"] == "CHECKPOINT"


def test_checkpoints_inside_a_step(gated):
    run_intake(gated)
    gated.do(BeginStep("draft"))
    gated.do(CompleteStep("draft"))
    gated.do(ResolveGate("draft", "PAUSE_AFTER", "approved"))
    gated.do(BeginStep("review"))  # requests the start approval
    gated.do(ResolveGate("review", "CHECKPOINT", "approved"))
    gated.do(BeginStep("review"))
    gated.do(RequestGate("review", "CHECKPOINT", checkpoint="facts"))
    assert gated.trace[-1]["correlationId"] == "checkpoint:facts"
    assert gated.do(RequestGate("review", "CHECKPOINT", checkpoint="facts")) == []
    with pytest.raises(EngineError, match='waiting for CHECKPOINT "facts" approval'):
        gated.do(CompleteStep("review"))
    gated.do(ResolveGate("review", "CHECKPOINT", "rejected", checkpoint="facts", note="wrong numbers"))
    assert gated.trace[-1]["note"] == "wrong numbers"
    assert gated.trace[-1]["correlationId"] == "checkpoint:facts"
    with pytest.raises(EngineError, match='CHECKPOINT "facts" was rejected'):
        gated.do(CompleteStep("review"))
    gated.do(RequestGate("review", "CHECKPOINT", checkpoint="facts"))
    gated.do(ResolveGate("review", "CHECKPOINT", "approved", checkpoint="facts"))
    gated.do(CompleteStep("review"))
    assert gated.state.gate_state["review"]["checkpoints"] == {"facts": "approved"}


def test_failed_step_can_be_retried_and_blocks_successors(diamond):
    diamond.do(BeginStep("a"))
    events = diamond.do(CompleteStep("a", ok=False, error={"message": "boom", "code": "E1"}))
    assert [e["type"] for e in events] == ["step_completed", "error"]
    assert diamond.state.step_status["a"] == "failed"
    with pytest.raises(EngineError, match='predecessor "a" \\(failed\\)'):
        diamond.do(BeginStep("b"))
    diamond.do(BeginStep("a"))
    diamond.do(CompleteStep("a"))
    assert diamond.state.ready_steps() == ["b", "c"]
    diamond.do(BeginStep("b"))
    diamond.do(CompleteStep("b"))
    with pytest.raises(EngineError, match='predecessor "c" \\(pending\\)'):
        diamond.do(BeginStep("d"))


def test_step_transitions_are_checked(diamond):
    with pytest.raises(EngineError) as exc:
        diamond.do(CompleteStep("a"))
    assert codes(exc) == "INVALID_STATE_TRANSITION"
    with pytest.raises(EngineError) as exc:
        diamond.do(BeginStep("zz"))
    assert codes(exc) == "UNKNOWN_STEP"
    diamond.do(BeginStep("a"))
    with pytest.raises(EngineError, match="already running"):
        diamond.do(BeginStep("a"))
    with pytest.raises(EngineError, match="running step"):
        diamond.do(CompleteRun())
    diamond.do(CompleteStep("a"))
    with pytest.raises(EngineError, match="already completed"):
        diamond.do(BeginStep("a"))


def test_idempotent_write_and_patch(diamond):
    d = diamond
    d.do(WriteArtifact("report", "doc", {"n": 1}, idempotency_key="w1"))
    assert d.do(WriteArtifact("report", "doc", {"n": 1}, idempotency_key="w1")) == []
    with pytest.raises(EngineError) as exc:
        d.do(WriteArtifact("report", "doc", {"n": 2}, idempotency_key="w1"))
    assert codes(exc) == "IDEMPOTENCY_CONFLICT"
    with pytest.raises(EngineError) as exc:
        d.do(WriteArtifact("other", "doc", {"n": 1}, idempotency_key="w1"))
    assert codes(exc) == "IDEMPOTENCY_CONFLICT"
    patch = [{"op": "replace", "path": "/n", "value": 2}]
    d.do(PatchArtifact("report", 1, patch, idempotency_key="p1"))
    assert d.do(PatchArtifact("report", 1, patch, idempotency_key="p1")) == []
    assert d.state.artifacts["report"]["data"] == {"n": 2}
    assert d.state.to_engine_snapshot()["idempotency"] == [
        ["w1", {"artifactKey": "report", "version": 1}],
        ["p1", {"artifactKey": "report", "version": 2}],
    ]
    assert d.state.revision == 2


def test_patch_errors(diamond):
    d = diamond
    with pytest.raises(EngineError) as exc:
        d.do(PatchArtifact("nope", 1, []))
    assert codes(exc) == "UNKNOWN_ARTIFACT"
    d.do(WriteArtifact("doc", "doc", {"a": 1}))
    d.do(PatchArtifact("doc", 1, [{"op": "add", "path": "/b", "value": 2}]))
    with pytest.raises(EngineError, match="at version 2") as exc:
        d.do(PatchArtifact("doc", 1, [{"op": "add", "path": "/c", "value": 3}]))
    assert codes(exc) == "PATCH_FAILED"
    for bad in (
        [{"op": "remove", "path": "/zz"}],
        [{"op": "merge", "path": "/a"}],
        [{"op": "remove", "path": "/a", "value": 1}],
    ):
        with pytest.raises(EngineError) as exc:
            d.do(PatchArtifact("doc", 2, bad))
        assert codes(exc) == "PATCH_FAILED"
    assert d.state.revision == 2


def test_schema_validation_of_writes_and_patches(diamond):
    d = diamond
    with pytest.raises(EngineError) as exc:
        d.do(WriteArtifact("v", "playground.validation", {"result": "yes", "comment": "x"}))
    assert codes(exc) == "INVALID_INPUT" and exc.value.path == "data.result"
    d.do(WriteArtifact("v", "playground.validation", {"result": True, "comment": "x"}))
    with pytest.raises(EngineError) as exc:
        d.do(PatchArtifact("v", 1, [{"op": "remove", "path": "/comment"}]))
    assert codes(exc) == "INVALID_INPUT"


def test_patched_pointer_gets_a_fresh_payload_hash(diamond, ctx):
    from runs.engine.artifacts import payload_hash

    d = diamond
    pointer = {"kind": "inline", "payloadHash": payload_hash({"a": 1})}
    with pytest.raises(EngineError, match="payloadHash"):
        d.do(WriteArtifact("doc", "doc", {"a": 2}, pointer=pointer))
    d.do(WriteArtifact("doc", "doc", {"a": 1}, pointer=pointer))
    d.do(PatchArtifact("doc", 1, [{"op": "replace", "path": "/a", "value": 5}]))
    assert d.state.artifacts["doc"]["pointer"]["payloadHash"] == payload_hash({"a": 5})


def test_logging_commands(diamond):
    d = diamond
    d.do(
        LogModelIO(
            "response",
            provider="anthropic",
            model="m",
            usage={"inputTokens": 3, "outputTokens": 4},
            cost={"amount": 0.1, "currency": " usd "},
            step_id="a",
        )
    )
    d.do(LogModelIO("response", cost={"amount": 0.2, "currency": "USD"}))
    d.do(LogModelIO("request"))
    assert d.state.model_calls == 2 and d.state.tokens["inputTokens"] == 3
    assert d.state.cost == {"USD": "0.3"}
    for bad in (
        LogModelIO("sideways"),
        LogModelIO("response", usage={"inputTokens": -1}),
        LogModelIO("response", cost={"amount": -1, "currency": "USD"}),
    ):
        with pytest.raises(EngineError) as exc:
            d.do(bad)
        assert codes(exc) == "INVALID_INPUT"
    d.do(LogToolCall("search", args={"q": 1}, result=[1]))
    with pytest.raises(EngineError):
        d.do(LogToolCall(" "))
    d.do(Annotate("note", tags=["x"]))
    assert d.state.events_by_type == {"model_io": 3, "tool_call": 1, "annotation": 1}


def test_spans(diamond):
    d = diamond
    d.do(StartSpan("root", span_id="s1"))
    d.do(StartSpan("child", span_id="s2", parent_span_id="s1", kind="client"))
    with pytest.raises(EngineError, match="already open"):
        d.do(StartSpan("again", span_id="s1"))
    d.do(EndSpan("s2", status="ok", duration_ms=1.5))
    with pytest.raises(EngineError, match="not open"):
        d.do(EndSpan("s2"))
    assert list(d.state.open_spans) == ["s1"]


def test_policy_change_and_rule_sets(diamond, ctx):
    d = diamond
    d.do(SetGatePolicy("b", "PAUSE_BEFORE"))
    assert d.do(SetGatePolicy("b", "PAUSE_BEFORE")) == []
    assert d.state.gate_state["b"]["before"] == "pending"
    d.do(BeginStep("a"))
    d.do(CompleteStep("a"))
    assert d.state.ready_steps() == ["c"]
    rules = {
        "id": "rs",
        "ruleSchemaId": "rules.basic",
        "rules": [
            {"id": "r1", "priority": 0, "enabled": True, "payload": {"kind": "remote", "value": "yes"}}
        ],
    }
    d.do(ChangeRuleSet(rules))
    assert d.state.rule_sets["rs"] == rules
    bad = {**rules, "rules": [{**rules["rules"][0], "payload": {"kind": "remote"}}]}
    with pytest.raises(EngineError) as exc:
        d.do(ChangeRuleSet(bad))
    assert codes(exc) == "INVALID_INPUT" and exc.value.path == "ruleSet.rules[0].payload"


def test_fatal_error_fails_running_steps_and_run(diamond):
    d = diamond
    d.do(BeginStep("a"))
    d.do(RecordError("minor"))
    events = d.do(RecordError("disk on fire", code="E_FIRE", fatal=True))
    assert [e["type"] for e in events] == ["error", "step_completed", "run_status_changed"]
    assert d.state.run["status"] == "failed" and d.state.step_status["a"] == "failed"
    with pytest.raises(EngineError) as exc:
        d.do(BeginStep("a"))
    assert codes(exc) == "INVALID_STATE_TRANSITION"


def test_cancel_and_fail_run(ctx):
    d = Driver(new_run(ctx=ctx, workflow=DIAMOND), ctx)
    d.do(BeginStep("a"))
    d.do(CancelRun(reason="stop"))
    assert d.state.run["status"] == "cancelled" and d.state.step_status["a"] == "failed"
    with pytest.raises(EngineError):
        d.do(CancelRun())
    d2 = Driver(new_run(ctx=ctx, workflow=DIAMOND), ctx)
    events = d2.do(FailRun("bad", code="X"))
    assert [e["type"] for e in events] == ["run_status_changed", "error"] and events[1]["fatal"] is True


def test_append_events_checks_each_event_against_state(diamond, ctx):
    d = diamond
    rid = d.state.run_id
    ok = [
        {"id": "e1", "runId": rid, "ts": "2026-03-01T20:00:01.000Z", "type": "step_started", "stepId": "a"},
        {
            "id": "e2",
            "runId": rid,
            "ts": "2026-03-01T20:00:02.000Z",
            "type": "step_completed",
            "stepId": "a",
            "ok": True,
        },
    ]
    assert d.do(AppendEvents(ok)) == ok
    bad_cases = [
        ({"id": "e3", "runId": "other", "ts": "t", "type": "annotation", "text": "x"}, "INVALID_TRACE_EVENT"),
        ({"id": "e3", "runId": rid, "ts": "t", "type": "step_started", "stepId": "zz"}, "UNKNOWN_STEP"),
        (
            {"id": "e3", "runId": rid, "ts": "t", "type": "step_started", "stepId": "d"},
            "INVALID_STATE_TRANSITION",
        ),
        ({"id": "e3", "runId": rid, "ts": "t", "type": "step_paused", "stepId": "b"}, "INVALID_TRACE_EVENT"),
    ]
    for event, code in bad_cases:
        with pytest.raises(EngineError) as exc:
            decide(d.state, AppendEvents([ok[0] | {"id": "x", "stepId": "b"}, event]), ctx)
        assert codes(exc) == code and exc.value.path.startswith("events[1]")
    assert d.state.revision == 2


def test_fork_copies_artifacts_rules_and_lineage(diamond, ctx):
    d = diamond
    d.do(WriteArtifact("notes", "text", "shared"))
    d.do(WriteArtifact("notes", "text", "shared v2"))
    d.do(ChangeRuleSet({"id": "rs", "ruleSchemaId": "x", "rules": []}))
    d.do(SetGatePolicy("d", "PAUSE_AFTER"))
    child, events = fork_run(
        d.state, ctx=ctx, new_run_id="run_child", from_step_id="a", extra_parents=["run_other"], from_seq=4
    )
    assert [e["type"] for e in events] == ["artifact_written", "rule_changed", "policy_changed", "run_forked"]
    assert events[-1]["parentRunIds"] == [d.state.run_id, "run_other"]
    assert child.run["context"] == {
        "parentRunId": d.state.run_id,
        "parentRunIds": [d.state.run_id, "run_other"],
        "forkedFromStepId": "a",
    }
    assert "fork" in child.run["tags"] and child.run["metadata"] == {"forkedFromSeq": 4}
    for e in events:
        from runs.engine import apply_event

        apply_event(child, e)
    assert child.artifacts["notes"]["data"] == "shared v2" and child.artifacts["notes"]["version"] == 1
    assert child.policy("d") == "PAUSE_AFTER" and child.parent_run_ids == [d.state.run_id, "run_other"]
    with pytest.raises(EngineError):
        fork_run(d.state, ctx=ctx, from_seq=1)


def test_total_tokens_fall_back_to_input_plus_output():
    from runs.engine import LogModelIO, apply_event, decide, new_run
    from tests.engine.conftest import GATED, make_ctx

    ctx = make_ctx()
    state = new_run(ctx=ctx, workflow=GATED, run_id="run_tokens")
    for usage in (
        {"inputTokens": 10, "outputTokens": 5},
        {"inputTokens": 1, "outputTokens": 1, "totalTokens": 7},
    ):
        for event in decide(state, LogModelIO("response", usage=usage), ctx):
            apply_event(state, event)
    assert state.tokens["totalTokens"] == 15 + 7


def test_write_with_an_expected_version(diamond):
    d = diamond
    d.do(WriteArtifact("report", "doc", {"n": 1}, expected_version=0))
    d.do(WriteArtifact("report", "doc", {"n": 2}, expected_version=1, idempotency_key="e1"))
    assert d.state.artifacts["report"]["version"] == 2
    # a repeated submit is an idempotent no-op, even though its expected version is now stale
    assert d.do(WriteArtifact("report", "doc", {"n": 2}, expected_version=1, idempotency_key="e1")) == []
    with pytest.raises(EngineError) as exc:
        d.do(WriteArtifact("report", "doc", {"n": 3}, expected_version=1))
    assert codes(exc) == "PATCH_FAILED" and exc.value.path == "expectedVersion"
    assert "version 2" in exc.value.message
    with pytest.raises(EngineError) as exc:
        d.do(WriteArtifact("fresh", "doc", {"n": 1}, expected_version=3))
    assert codes(exc) == "PATCH_FAILED"
    assert d.state.revision == 2
