from __future__ import annotations

import copy

import pytest

from runs.protocol.canonical import parse_json
from runs.protocol.errors import ErrorCode, ProtocolError
from runs.protocol.validate import (
    validate_bundle,
    validate_engine_snapshot,
    validate_event,
    validate_run_store_state,
    validate_workflow,
)
from tests.conftest import CONFORMANCE

RUN_ID = "run-1"
TS = "2026-03-01T14:00:00.007Z"


def _workflow() -> dict:
    return {
        "id": "wf",
        "version": 1,
        "steps": [{"id": "a"}, {"id": "b", "gatePolicy": "PAUSE_BEFORE", "inputs": ["x"]}],
        "edges": [{"id": "e1", "from": "a", "to": "b"}],
    }


def _bundle() -> dict:
    return {
        "protocolVersion": "1.0.0",
        "run": {
            "id": RUN_ID,
            "workflowId": "wf",
            "workflowVersion": 1,
            "workflowSnapshot": _workflow(),
            "startedAt": TS,
            "status": "running",
        },
        "trace": [
            {"id": "e1", "runId": RUN_ID, "ts": TS, "type": "step_started", "stepId": "a"},
            {
                "id": "e2",
                "runId": RUN_ID,
                "ts": "2026-03-01T16:00:00+02:00",
                "type": "model_io",
                "direction": "response",
                "usage": {"inputTokens": 3, "outputTokens": 4},
                "cost": {"amount": 0.001, "currency": "USD"},
                "unknownKeyOnEvent": "tolerated",
            },
        ],
        "artifacts": [{"artifactKey": "x", "typeId": "json", "version": 1, "createdAt": TS, "data": {}}],
        "ruleSets": [{"id": "rs", "ruleSchemaId": "s", "rules": []}],
        "engine": {"revision": 2, "stepStatus": [["a", "running"]], "gateState": [], "idempotency": []},
    }


def test_valid_bundle_passes() -> None:
    validate_bundle(_bundle())


def _set(path: list, value):
    def apply(bundle: dict) -> None:
        target = bundle
        for key in path[:-1]:
            target = target[key]
        if value is KeyError:
            del target[path[-1]]
        else:
            target[path[-1]] = value

    return apply


CASES = [
    (_set(["trace", 1, "usage", "inputTokens"], -1), ErrorCode.INVALID_RUN_BUNDLE, "trace[1].usage.inputTokens"),
    (_set(["trace", 1, "usage", "inputTokens"], 1.5), ErrorCode.INVALID_RUN_BUNDLE, "trace[1].usage.inputTokens"),
    (_set(["trace", 1, "usage", "extra"], 1), ErrorCode.INVALID_RUN_BUNDLE, "trace[1].usage.extra"),
    (_set(["trace", 1, "cost", "currency"], ""), ErrorCode.INVALID_RUN_BUNDLE, "trace[1].cost.currency"),
    (_set(["trace", 1, "cost", "amount"], True), ErrorCode.INVALID_RUN_BUNDLE, "trace[1].cost.amount"),
    (_set(["trace", 0, "ts"], "2026-03-01T14:00:00"), ErrorCode.INVALID_RUN_BUNDLE, "trace[0].ts"),
    (_set(["trace", 0, "ts"], "2026-02-30T14:00:00Z"), ErrorCode.INVALID_RUN_BUNDLE, "trace[0].ts"),
    (_set(["trace", 0, "type"], "step_paused"), ErrorCode.INVALID_RUN_BUNDLE, "trace[0].type"),
    # the one-expression fast paths (usual timestamps, model_io) must refuse what the helpers refuse
    (_set(["trace", 0, "ts"], "2026-02-30T14:00:00.000Z"), ErrorCode.INVALID_RUN_BUNDLE, "trace[0].ts"),
    (_set(["trace", 0, "ts"], "2026-13-01T14:00:00.000Z"), ErrorCode.INVALID_RUN_BUNDLE, "trace[0].ts"),
    (_set(["trace", 0, "ts"], "2026-03-01T24:00:00.000Z"), ErrorCode.INVALID_RUN_BUNDLE, "trace[0].ts"),
    (_set(["trace", 0, "ts"], "2026-03-01T14:00:00.000z"), ErrorCode.INVALID_RUN_BUNDLE, "trace[0].ts"),
    (_set(["trace", 0, "ts"], "2026-W09-1T14:00:00.000Z"), ErrorCode.INVALID_RUN_BUNDLE, "trace[0].ts"),
    (_set(["trace", 0, "ts"], "2026-03-01T14:00:0\u0661.000Z"), ErrorCode.INVALID_RUN_BUNDLE, "trace[0].ts"),
    (_set(["trace", 1, "usage"], None), ErrorCode.INVALID_RUN_BUNDLE, "trace[1].usage"),
    # the trace loop's inline checks of the common fields
    (_set(["trace", 1], "not an event"), ErrorCode.INVALID_RUN_BUNDLE, "trace[1]"),
    (_set(["trace", 1], [1, 2]), ErrorCode.INVALID_RUN_BUNDLE, "trace[1]"),
    (_set(["trace", 1], None), ErrorCode.INVALID_RUN_BUNDLE, "trace[1]"),
    (_set(["trace", 1, "type"], ["model_io"]), ErrorCode.INVALID_RUN_BUNDLE, "trace[1].type"),
    (_set(["trace", 1, "id"], ""), ErrorCode.INVALID_RUN_BUNDLE, "trace[1].id"),
    (_set(["trace", 1, "runId"], 7), ErrorCode.INVALID_RUN_BUNDLE, "trace[1].runId"),
    (_set(["trace", 1, "correlationId"], 7), ErrorCode.INVALID_RUN_BUNDLE, "trace[1].correlationId"),
    (_set(["trace", 1, "stepId"], None), ErrorCode.INVALID_RUN_BUNDLE, "trace[1].stepId"),
    (_set(["trace", 1, "cost"], None), ErrorCode.INVALID_RUN_BUNDLE, "trace[1].cost"),
    (_set(["trace", 1, "durationMs"], -1), ErrorCode.INVALID_RUN_BUNDLE, "trace[1].durationMs"),
    (_set(["trace", 1, "durationMs"], True), ErrorCode.INVALID_RUN_BUNDLE, "trace[1].durationMs"),
    (_set(["trace", 1, "direction"], "sideways"), ErrorCode.INVALID_RUN_BUNDLE, "trace[1].direction"),
    (_set(["trace", 1, "provider"], 7), ErrorCode.INVALID_RUN_BUNDLE, "trace[1].provider"),
    (_set(["trace", 0, "stepId"], KeyError), ErrorCode.INVALID_RUN_BUNDLE, "trace[0].stepId"),
    (_set(["run", "id"], KeyError), ErrorCode.INVALID_RUN_BUNDLE, "run.id"),
    (_set(["run", "subject"], {"userId": "u", "role": "x"}), ErrorCode.INVALID_RUN_BUNDLE, "run.subject.role"),
    (_set(["run", "context"], {"parentRunId": "p", "parentRunIds": ["q"]}), ErrorCode.INVALID_RUN_BUNDLE,
     "run.context.parentRunIds[0]"),
    (_set(["run", "workflowSnapshot", "steps"], []), ErrorCode.INVALID_RUN_BUNDLE, "run.workflowSnapshot.steps"),
    (_set(["artifacts", 0, "version"], 0), ErrorCode.INVALID_RUN_BUNDLE, "artifacts[0].version"),
    (_set(["artifacts", 0, "pointer"], {"kind": "external"}), ErrorCode.INVALID_RUN_BUNDLE,
     "artifacts[0].pointer.ref"),
    (_set(["artifacts", 0, "pointer"], {"kind": "inline", "payloadHash": "AB"}), ErrorCode.INVALID_RUN_BUNDLE,
     "artifacts[0].pointer.payloadHash"),
    (_set(["engine", "stepStatus", 0, 1], "paused"), ErrorCode.INVALID_RUN_BUNDLE, "engine.stepStatus[0][1]"),
    # structural invariants
    (_set(["trace", 0, "runId"], "other"), ErrorCode.INVALID_RUN_BUNDLE, "trace[0].runId"),
    (_set(["trace", 0, "stepId"], "ghost"), ErrorCode.INVALID_RUN_BUNDLE, "trace[0].stepId"),
    (_set(["trace", 1, "runId"], "other"), ErrorCode.INVALID_RUN_BUNDLE, "trace[1].runId"),
    (_set(["trace", 1, "stepId"], "ghost"), ErrorCode.INVALID_RUN_BUNDLE, "trace[1].stepId"),
    (_set(["run", "workflowId"], "other"), ErrorCode.INVALID_RUN_BUNDLE, "run.workflowId"),
    (_set(["engine", "stepStatus", 0, 0], "ghost"), ErrorCode.INVALID_RUN_BUNDLE, "engine.stepStatus[0][0]"),
    (lambda b: b["artifacts"].append(dict(b["artifacts"][0])), ErrorCode.INVALID_RUN_BUNDLE, "artifacts[1]"),
    (lambda b: b["ruleSets"].append(dict(b["ruleSets"][0])), ErrorCode.INVALID_RUN_BUNDLE, "ruleSets[1].id"),
    (lambda b: b["run"]["workflowSnapshot"]["edges"].append({"id": "e2", "from": "b", "to": "a"}),
     ErrorCode.INVALID_WORKFLOW, "run.workflowSnapshot.edges"),
    (lambda b: b["run"]["workflowSnapshot"]["edges"].append({"id": "e2", "from": "a", "to": "a"}),
     ErrorCode.INVALID_WORKFLOW, "run.workflowSnapshot.edges[1]"),
    (lambda b: b["run"]["workflowSnapshot"]["steps"].append({"id": "a"}), ErrorCode.INVALID_WORKFLOW,
     "run.workflowSnapshot.steps[2].id"),
]  # fmt: skip


@pytest.mark.parametrize(("mutate", "code", "path"), CASES)
def test_errors_carry_code_and_path(mutate, code: str, path: str) -> None:
    bundle = copy.deepcopy(_bundle())
    mutate(bundle)
    with pytest.raises(ProtocolError) as info:
        validate_bundle(bundle)
    assert (info.value.code, info.value.path) == (code, path), str(info.value)
    assert str(info.value).startswith(f"{code} at {path}: ")


def test_single_event_uses_the_callers_code() -> None:
    event = {
        "id": "e",
        "runId": "r",
        "ts": TS,
        "type": "human_gate_resolved",
        "stepId": "a",
        "gate": "CHECKPOINT",
    }
    with pytest.raises(ProtocolError) as info:
        validate_event(event, "event", code=ErrorCode.INVALID_TRACE_EVENT)
    assert (info.value.code, info.value.path) == (ErrorCode.INVALID_TRACE_EVENT, "event.decision")
    validate_event({**event, "decision": "edited", "note": "ok"})


@pytest.mark.parametrize(
    "op",
    [
        {"op": "remove", "path": "/a", "value": 1},
        {"op": "merge", "path": "/a"},
        {"op": "move", "path": "/a"},
        {"op": "add", "path": "/a"},
    ],
)
def test_patch_ops_are_strict(op: dict) -> None:
    event = {"id": "e", "runId": "r", "ts": TS, "type": "artifact_patch", "artifactKey": "x"}
    event |= {"fromVersion": 1, "toVersion": 2, "patch": [op]}
    with pytest.raises(ProtocolError) as info:
        validate_event(event)
    assert info.value.path.startswith("event.patch[0]")


def test_run_forked_parent_lists_need_not_agree() -> None:
    """PROTOCOL.md: parentRunIds[0] == parentRunId is a rule of run.context, not of the event."""
    event = {
        "id": "e",
        "runId": "r",
        "ts": TS,
        "type": "run_forked",
        "parentRunId": "p",
        "parentRunIds": ["p", "g"],
    }
    validate_event(event)
    validate_event({**event, "parentRunIds": ["g", "p"]})
    for bad in ({**event, "parentRunIds": []}, {**event, "parentRunIds": [""]}, {**event, "parentRunId": ""}):
        with pytest.raises(ProtocolError):
            validate_event(bad)


def test_workflow_standalone_code() -> None:
    validate_workflow(_workflow())
    with pytest.raises(ProtocolError) as info:
        validate_workflow({"id": "wf", "version": -1, "steps": [{"id": "a"}]})
    assert (info.value.code, info.value.path) == (ErrorCode.INVALID_WORKFLOW, "workflow.version")


def test_engine_checkpoints() -> None:
    engine = {"revision": 0, "stepStatus": [], "idempotency": [["k", {"artifactKey": "x", "version": 1}]]}
    engine["gateState"] = [["a", {"before": "approved", "after": "pending", "checkpoints": {"c": "pending"}}]]
    validate_engine_snapshot(engine)
    engine["gateState"][0][1]["checkpoints"]["c"] = "maybe"
    with pytest.raises(ProtocolError) as info:
        validate_engine_snapshot(engine)
    assert info.value.path == "engine.gateState[0][1].checkpoints.c"


def test_run_store_state() -> None:
    bundle = _bundle()
    state = {
        "revision": 2,
        "run": bundle["run"],
        "trace": bundle["trace"],
        "artifactsByKey": [["x", bundle["artifacts"][0]]],
        "ruleSetsById": [["rs", bundle["ruleSets"][0]]],
        "stepStatus": [["a", "running"]],
        "gateState": [],
        "idempotency": [],
    }
    validate_run_store_state(state)
    state["artifactsByKey"] = [["y", bundle["artifacts"][0]]]
    with pytest.raises(ProtocolError) as info:
        validate_run_store_state(state)
    assert info.value.code == ErrorCode.INVALID_RUN_STATE


def test_reference_runstore_samples_validate() -> None:
    expected = CONFORMANCE / "expected"
    samples = sorted(expected.glob("*.runstore.json"))
    if not samples:
        pytest.skip("conformance corpus absent")
    for sample in samples:
        document = parse_json(sample.read_bytes())
        state = document["body"]
        validate_run_store_state(state)
