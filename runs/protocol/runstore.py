"""RunBundle <-> RunStoreState, the reference's HTTP persistence wire format.

``RunStoreState`` (PROTOCOL.md) is what the reference's ``HttpRunRepository`` PUTs and
GETs: ``{revision, run, trace, artifactsByKey, ruleSetsById, stepStatus, gateState,
idempotency}``, maps as ``[key, value]`` pairs, plain JSON, no ``protocolVersion``, no
``integrity``.

:func:`bundle_to_runstore` reproduces the body the reference PUTs after importing a
bundle (``importRunBundle`` then ``save``):

* ``revision`` and the three engine maps come from the bundle's ``engine`` (or the
  ``engine`` argument, which wins). Without either, the engine is inferred from the trace
  the way the reference importer does it (:func:`infer_engine`): step status from
  ``step_started`` / ``step_completed``, gates from the workflow's gate policies and
  ``human_gate_resolved`` events, ``revision`` = number of trace events, no idempotency
  keys (they are not recoverable from the trace).
* every workflow step missing from ``stepStatus`` / ``gateState`` is appended as
  ``pending`` / its policy's initial gate state; a gate state always carries
  ``checkpoints`` (``{}`` when absent);
* ``artifactsByKey`` holds, per artifact key (in order of first appearance in
  ``artifacts``), the version with the **highest** ``version`` number;
  ``ruleSetsById`` holds the **last** rule set listed under each id.

:func:`runstore_to_bundle` goes the other way, like the reference's ``exportRunBundle``:
an unsigned bundle (``protocolVersion`` "1.0.0", no ``integrity``; sign it with
``runs.protocol.integrity.seal_bundle``) whose ``artifacts`` are the store's artifacts
sorted by key and ``ruleSets`` the store's rule sets sorted by id (ICU en-US order, as
``localeCompare``), and whose ``engine`` is rebuilt from the store's maps.

What the store loses relative to a bundle: every artifact version but the latest of each
key, every rule set but the last per id, and (when the bundle had no engine) nothing
else, since the inferred engine is exactly what the store keeps. ``runstore_to_bundle``
therefore exports only the latest version per artifact key, as the reference does: the
older versions are still described by the trace's ``artifact_written`` /
``artifact_patch`` events, but they are not put back into ``artifacts``. For bundles
exported by the reference (which already hold only the latest versions, sorted) the round
trip body -> bundle -> body is the identity.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runs.protocol.collation import collation_key
from runs.protocol.errors import ErrorCode, ProtocolError

PROTOCOL_VERSION = "1.0.0"

RUNSTORE_KEYS = (
    "revision",
    "run",
    "trace",
    "artifactsByKey",
    "ruleSetsById",
    "stepStatus",
    "gateState",
    "idempotency",
)


def initial_gate_state(policy: str | None) -> dict[str, Any]:
    """A step's gate state before anything happened, per its gate policy."""
    before = "pending" if policy in ("PAUSE_BEFORE", "CHECKPOINT") else "approved"
    return {"before": before, "after": "approved", "checkpoints": {}}


def _gate_copy(gate: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "before": gate.get("before"),
        "after": gate.get("after"),
        "checkpoints": dict(gate.get("checkpoints") or {}),
    }


def infer_engine(workflow: Mapping[str, Any], trace: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The engine snapshot the reference importer infers for a bundle without ``engine``."""
    steps = workflow.get("steps") or []
    policies = {step["id"]: step.get("gatePolicy", "AUTO") for step in steps}
    status: dict[str, str] = {}
    gates: dict[str, dict[str, Any]] = {}
    for step in steps:
        status[step["id"]] = "pending"
        gates[step["id"]] = initial_gate_state(step.get("gatePolicy", "AUTO"))
    for event in trace:
        kind = event.get("type")
        if kind == "step_started":
            status[event["stepId"]] = "running"
        elif kind == "step_completed":
            step_id = event["stepId"]
            status[step_id] = "completed" if event.get("ok") else "failed"
            gate = gates.get(step_id)
            if (
                event.get("ok")
                and gate is not None
                and policies.get(step_id) in ("PAUSE_AFTER", "CHECKPOINT")
            ):
                gate["after"] = "pending"
        elif kind == "human_gate_resolved":
            resolved: Any = event.get("stepId")  # as recorded: a miss unless one of the step ids
            gate = gates.get(resolved)
            if gate is None:
                continue
            approved = event.get("decision") != "rejected"
            which = event.get("gate")
            if which == "PAUSE_BEFORE" and approved:
                gate["before"] = "approved"
            elif which == "PAUSE_AFTER" and approved:
                gate["after"] = "approved"
            elif which == "CHECKPOINT":
                note = event.get("note")
                if note:
                    gate["checkpoints"][note] = "approved" if approved else "pending"
                elif approved:
                    gate["before"] = "approved"
    return {
        "revision": len(trace),
        "stepStatus": [[k, v] for k, v in status.items()],
        "gateState": [[k, _gate_copy(v)] for k, v in gates.items()],
        "idempotency": [],
    }


def _pairs(value: Any, path: str) -> list[tuple[Any, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ProtocolError(ErrorCode.INVALID_RUN_STATE, "expected an array of [key, value] pairs", path)
    pairs = []
    for index, item in enumerate(value):
        if not isinstance(item, list | tuple) or len(item) != 2:
            raise ProtocolError(
                ErrorCode.INVALID_RUN_STATE, "expected a [key, value] pair", f"{path}[{index}]"
            )
        pairs.append((item[0], item[1]))
    return pairs


def _engine_maps(
    engine: Mapping[str, Any], steps: list[Mapping[str, Any]]
) -> tuple[int, dict[str, Any], dict[str, Any], dict[str, Any]]:
    # Like JavaScript's ``new Map(pairs)``: a repeated key keeps its first position, last value.
    step_status = dict(_pairs(engine.get("stepStatus"), "engine.stepStatus"))
    gate_state = {k: _gate_copy(v) for k, v in _pairs(engine.get("gateState"), "engine.gateState")}
    idempotency = dict(_pairs(engine.get("idempotency"), "engine.idempotency"))
    for step in steps:
        step_status.setdefault(step["id"], "pending")
        if step["id"] not in gate_state:
            gate_state[step["id"]] = initial_gate_state(step.get("gatePolicy", "AUTO"))
    return engine.get("revision", 0), step_status, gate_state, idempotency


def latest_artifacts(artifacts: list[Mapping[str, Any]]) -> dict[str, Mapping[str, Any]]:
    """Per key (first-appearance order) the artifact version with the highest number."""
    latest: dict[str, Mapping[str, Any]] = {}
    for artifact in artifacts:
        key = artifact["artifactKey"]
        previous = latest.get(key)
        if previous is None or artifact["version"] > previous["version"]:
            latest[key] = artifact
    return latest


def bundle_to_runstore(
    bundle: Mapping[str, Any], *, engine: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The RunStoreState body the reference would PUT for this (already validated) bundle."""
    if not isinstance(bundle, Mapping) or not isinstance(bundle.get("run"), Mapping):
        raise ProtocolError(ErrorCode.INVALID_RUN_BUNDLE, "a run bundle needs a run object", "run")
    run = bundle["run"]
    trace = list(bundle.get("trace") or [])
    workflow = run.get("workflowSnapshot") or {}
    snapshot = engine if engine is not None else bundle.get("engine")
    if snapshot is None:
        snapshot = infer_engine(workflow, trace)
    revision, step_status, gate_state, idempotency = _engine_maps(snapshot, workflow.get("steps") or [])
    rule_sets: dict[str, Any] = {}
    for rule_set in bundle.get("ruleSets") or []:
        rule_sets[rule_set["id"]] = rule_set
    return {
        "revision": revision,
        "run": run,
        "trace": trace,
        "artifactsByKey": [[k, v] for k, v in latest_artifacts(list(bundle.get("artifacts") or [])).items()],
        "ruleSetsById": [[k, v] for k, v in rule_sets.items()],
        "stepStatus": [[k, v] for k, v in step_status.items()],
        "gateState": [[k, v] for k, v in gate_state.items()],
        "idempotency": [[k, v] for k, v in idempotency.items()],
    }


def runstore_to_bundle(state: Mapping[str, Any]) -> dict[str, Any]:
    """An unsigned protocol 1.0.0 bundle (with engine) from a RunStoreState body.

    Missing ``revision`` reads as 0 and missing maps or trace as empty, as the reference
    client reads them; anything that is not a state object with a ``run`` raises
    ``ProtocolError(INVALID_RUN_STATE)``.
    """
    if not isinstance(state, Mapping) or not isinstance(state.get("run"), Mapping):
        raise ProtocolError(ErrorCode.INVALID_RUN_STATE, "a run store state needs a run object", "run")
    trace = state.get("trace")
    artifacts = dict(_pairs(state.get("artifactsByKey"), "artifactsByKey"))
    rule_sets = dict(_pairs(state.get("ruleSetsById"), "ruleSetsById"))
    revision = state.get("revision")
    engine = {
        "revision": revision if revision is not None else 0,
        "stepStatus": [[k, v] for k, v in dict(_pairs(state.get("stepStatus"), "stepStatus")).items()],
        "gateState": [
            [k, _gate_copy(v)] for k, v in dict(_pairs(state.get("gateState"), "gateState")).items()
        ],
        "idempotency": [[k, v] for k, v in dict(_pairs(state.get("idempotency"), "idempotency")).items()],
    }
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "run": state["run"],
        "trace": list(trace) if isinstance(trace, list) else [],
        "artifacts": sorted(artifacts.values(), key=lambda a: collation_key(a["artifactKey"])),
        "ruleSets": sorted(rule_sets.values(), key=lambda r: collation_key(r["id"])),
        "engine": engine,
    }
