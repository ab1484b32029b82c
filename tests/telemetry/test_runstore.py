"""RunBundle <-> RunStoreState translation against the reference's PUT bodies."""

from __future__ import annotations

import copy

import pytest

from runs.protocol.errors import ErrorCode, ProtocolError
from runs.protocol.integrity import seal_bundle, verify_integrity
from runs.protocol.runstore import RUNSTORE_KEYS, bundle_to_runstore, infer_engine, runstore_to_bundle
from tests.telemetry.corpus import bundle_names, load_bundle, load_expected, same_json


@pytest.mark.parametrize("name", bundle_names("runstore"))
def test_body_equals_reference_put(name):
    expected = load_expected(name, "runstore")
    assert expected["request"]["method"] == "PUT"
    same_json(bundle_to_runstore(load_bundle(name)), expected["body"])


@pytest.mark.parametrize("name", bundle_names("runstore"))
def test_body_round_trips_through_a_bundle(name):
    body = load_expected(name, "runstore")["body"]
    bundle = runstore_to_bundle(body)
    assert bundle["protocolVersion"] == "1.0.0" and "integrity" not in bundle
    same_json(bundle_to_runstore(bundle), body)


@pytest.mark.parametrize("name", bundle_names("runstore"))
def test_reference_bundle_comes_back_from_its_body(name):
    original = load_bundle(name)
    back = runstore_to_bundle(bundle_to_runstore(original))
    for key in ("run", "trace", "artifacts", "ruleSets"):
        same_json(back[key], original[key])
    if "engine" in original:
        same_json(back["engine"], original["engine"])
        # Signed, it is the very bundle the reference exported.
        assert seal_bundle(back)["integrity"] == original["integrity"]
    else:  # the importer's inferred engine is made explicit
        same_json(back["engine"], infer_engine(original["run"]["workflowSnapshot"], original["trace"]))


def _artifact(key, version, data):
    return {
        "artifactKey": key,
        "typeId": "doc",
        "version": version,
        "createdAt": "2026-01-01T00:00:00.000Z",
        "data": data,
    }


WORKFLOW = {
    "id": "wf",
    "version": 1,
    "steps": [
        {"id": "a", "gatePolicy": "AUTO", "inputs": [], "outputs": []},
        {"id": "b", "gatePolicy": "PAUSE_BEFORE", "inputs": [], "outputs": []},
        {"id": "c", "gatePolicy": "CHECKPOINT", "inputs": [], "outputs": []},
    ],
    "edges": [],
}


def _bundle(**overrides):
    bundle = {
        "protocolVersion": "1.0.0",
        "run": {"id": "run_1", "workflowId": "wf", "workflowVersion": 1, "workflowSnapshot": WORKFLOW,
                "startedAt": "2026-01-01T00:00:00.000Z", "status": "running"},
        "trace": [],
        "artifacts": [],
        "ruleSets": [],
    }  # fmt: skip
    bundle.update(overrides)
    return bundle


def test_store_keeps_the_highest_version_per_key_and_loses_older_ones():
    bundle = _bundle(
        artifacts=[
            _artifact("z", 1, "z1"),
            _artifact("a", 2, "a2"),
            _artifact("z", 3, "z3"),
            _artifact("a", 1, "a1"),
        ],
        ruleSets=[
            {"id": "r", "ruleSchemaId": "s", "rules": []},
            {"id": "r", "ruleSchemaId": "s2", "rules": []},
        ],
        engine={"revision": 4, "stepStatus": [], "gateState": [], "idempotency": []},
    )
    body = bundle_to_runstore(bundle)
    assert list(body) == list(RUNSTORE_KEYS)
    assert [(k, v["version"]) for k, v in body["artifactsByKey"]] == [("z", 3), ("a", 2)]
    assert body["ruleSetsById"] == [["r", {"id": "r", "ruleSchemaId": "s2", "rules": []}]]
    # Steps the engine does not mention are filled in from the workflow's gate policies.
    assert body["stepStatus"] == [["a", "pending"], ["b", "pending"], ["c", "pending"]]
    assert [g[1]["before"] for g in body["gateState"]] == ["approved", "pending", "pending"]

    exported = runstore_to_bundle(body)
    assert [(a["artifactKey"], a["version"]) for a in exported["artifacts"]] == [("a", 2), ("z", 3)]


def test_export_sorts_artifacts_and_rule_sets_like_locale_compare():
    body = bundle_to_runstore(
        _bundle(artifacts=[_artifact("Zebra", 1, 0), _artifact("Ünicode", 1, 0), _artifact("apple", 1, 0)])
    )
    assert [a["artifactKey"] for a in runstore_to_bundle(body)["artifacts"]] == ["apple", "Ünicode", "Zebra"]


def test_engine_argument_wins_and_is_inferred_when_absent():
    trace = [
        {"id": "e1", "runId": "run_1", "ts": "t", "type": "step_started", "stepId": "a"},
        {"id": "e2", "runId": "run_1", "ts": "t", "type": "step_completed", "stepId": "a", "ok": True},
        {"id": "e3", "runId": "run_1", "ts": "t", "type": "human_gate_resolved", "stepId": "b",
         "gate": "PAUSE_BEFORE", "decision": "approved"},
        {"id": "e4", "runId": "run_1", "ts": "t", "type": "human_gate_resolved", "stepId": "c",
         "gate": "CHECKPOINT", "decision": "rejected", "note": "cp"},
    ]  # fmt: skip
    inferred = bundle_to_runstore(_bundle(trace=trace))
    assert inferred["revision"] == 4
    assert inferred["stepStatus"] == [["a", "completed"], ["b", "pending"], ["c", "pending"]]
    assert inferred["gateState"][1] == ["b", {"before": "approved", "after": "approved", "checkpoints": {}}]
    assert inferred["gateState"][2] == [
        "c",
        {"before": "pending", "after": "approved", "checkpoints": {"cp": "pending"}},
    ]
    assert inferred["idempotency"] == []

    given = {"revision": 9, "stepStatus": [["b", "running"]], "gateState": [["b", {"before": "approved", "after": "approved"}]],
             "idempotency": [["k", {"artifactKey": "x", "version": 1}]]}  # fmt: skip
    body = bundle_to_runstore(_bundle(trace=trace), engine=given)
    assert body["revision"] == 9
    assert body["stepStatus"] == [["b", "running"], ["a", "pending"], ["c", "pending"]]
    assert body["gateState"][0] == ["b", {"before": "approved", "after": "approved", "checkpoints": {}}]
    assert body["idempotency"] == [["k", {"artifactKey": "x", "version": 1}]]


def test_exported_bundle_can_be_signed_and_verified():
    body = bundle_to_runstore(_bundle(artifacts=[_artifact("k", 1, {"n": 1})]))
    signed = seal_bundle(runstore_to_bundle(body))
    assert verify_integrity(signed) == "valid"
    tampered = copy.deepcopy(signed)
    tampered["artifacts"][0]["data"]["n"] = 2
    assert verify_integrity(tampered) == "mismatch"


def test_lenient_reading_and_errors():
    minimal = runstore_to_bundle({"run": _bundle()["run"]})
    assert minimal["engine"] == {"revision": 0, "stepStatus": [], "gateState": [], "idempotency": []}
    assert minimal["trace"] == [] and minimal["artifacts"] == []
    for bad in (None, [], {"revision": 1}, {"run": "x"}):
        with pytest.raises(ProtocolError) as caught:
            runstore_to_bundle(bad)
        assert caught.value.code == ErrorCode.INVALID_RUN_STATE
    with pytest.raises(ProtocolError) as caught:
        runstore_to_bundle({"run": {"id": "r"}, "stepStatus": [["a"]]})
    assert caught.value.path == "stepStatus[0]"
    with pytest.raises(ProtocolError) as caught:
        bundle_to_runstore({"trace": []})
    assert caught.value.code == ErrorCode.INVALID_RUN_BUNDLE
