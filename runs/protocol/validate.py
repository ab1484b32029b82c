"""Validation of every protocol 1.0.0 shape, with the protocol's error code and a JSON path.

Hand-written rather than JSON Schema: a 100,000-event bundle validates in a fraction of a
second (``jsonschema`` manages a few thousand objects a second here), and every failure
names the exact value (``trace[3].usage.inputTokens``) with a human message.

Rules (PROTOCOL.md):

* strict objects (``subject``, ``usage``, ``cost``, JSON Patch operations) reject unknown
  keys; all other objects tolerate them (integrity still covers them);
* integers follow JavaScript: ``3.0`` is the integer 3; booleans are never numbers;
* timestamps are ISO 8601 date-times with seconds optional, fractions allowed and a
  mandatory ``Z`` or ``+HH:MM`` offset;
* schema failures raise the ``code`` the caller passes (``INVALID_RUN_BUNDLE`` for bundles,
  ``INVALID_TRACE_EVENT`` for single events from an API, ``INVALID_RUN_STATE`` for a
  stored run state); a malformed workflow graph is always ``INVALID_WORKFLOW``.

``validate_bundle`` = :func:`validate_bundle_schema` + :func:`check_bundle_invariants`;
the bundle check runs the integrity check between the two, as the reference does.

The value checks, the artifact, rule set and patch shapes and the per-event-type checkers live in
:mod:`runs.protocol.validate_shapes`; this module holds the entry points built on them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from runs.protocol.errors import ErrorCode, ProtocolError
from runs.protocol.validate_shapes import (
    EVENT_VALIDATORS,
    GATE_MARKS,
    GATE_POLICIES,
    RUN_STATUSES,
    STEP_STATUSES,
    SUBJECT_KEYS,
    as_array,
    as_object,
    check_enum,
    check_int,
    check_strict,
    check_strings,
    common_ts_ok,
    expected,
    fail,
    join_path,
    opt_str,
    req_enum,
    req_int,
    req_str,
    req_ts,
    require,
    validate_artifact_version,
    validate_rule_set,
)

_RB = ErrorCode.INVALID_RUN_BUNDLE


# ---------------------------------------------------------------- workflow


def validate_workflow(spec: Any, path: str = "workflow", code: str = ErrorCode.INVALID_WORKFLOW) -> None:
    """A WorkflowSpec: its shape (raising ``code``) and its graph (always ``INVALID_WORKFLOW``)."""
    validate_workflow_shape(spec, path, code)
    check_workflow_graph(spec, path)


def validate_workflow_shape(
    spec: Any, path: str = "workflow", code: str = ErrorCode.INVALID_WORKFLOW
) -> None:
    """``{id, version >= 0, title?, steps: [Step] (>= 1), edges?: [{id, from, to}]}``."""
    obj = as_object(spec, path, code)
    req_str(obj, "id", path, code, nonempty=True)
    req_int(obj, "version", path, code, minimum=0)
    opt_str(obj, "title", path, code)
    steps_path = join_path(path, "steps")
    steps = as_array(require(obj, "steps", path, code), steps_path, code)
    if not steps:
        raise fail(code, steps_path, "must have at least 1 step")
    for i, step in enumerate(steps):
        step_path = f"{steps_path}[{i}]"
        s = as_object(step, step_path, code)
        req_str(s, "id", step_path, code, nonempty=True)
        opt_str(s, "title", step_path, code)
        opt_str(s, "description", step_path, code)
        if "gatePolicy" in s:
            check_enum(s["gatePolicy"], GATE_POLICIES, join_path(step_path, "gatePolicy"), code)
        for key in ("inputs", "outputs"):
            if key in s:
                check_strings(s[key], join_path(step_path, key), code)
    if "edges" in obj:
        edges_path = join_path(path, "edges")
        for i, edge in enumerate(as_array(obj["edges"], edges_path, code)):
            edge_path = f"{edges_path}[{i}]"
            e = as_object(edge, edge_path, code)
            for key in ("id", "from", "to"):
                req_str(e, key, edge_path, code, nonempty=True)


def check_workflow_graph(spec: dict[str, Any], path: str = "workflow") -> None:
    """Unique step ids, edges between known steps, no self edge, no cycle (``INVALID_WORKFLOW``)."""
    code = ErrorCode.INVALID_WORKFLOW
    step_ids: set[str] = set()
    for i, step in enumerate(spec["steps"]):
        if step["id"] in step_ids:
            raise fail(code, f"{path}.steps[{i}].id", f"duplicate step id {step['id']!r}")
        step_ids.add(step["id"])
    successors: dict[str, list[str]] = {s: [] for s in step_ids}
    edge_ids: set[str] = set()
    for i, edge in enumerate(spec.get("edges", [])):
        edge_path = f"{path}.edges[{i}]"
        if edge["id"] in edge_ids:
            raise fail(code, f"{edge_path}.id", f"duplicate edge id {edge['id']!r}")
        edge_ids.add(edge["id"])
        for end in ("from", "to"):
            if edge[end] not in step_ids:
                raise fail(code, f"{edge_path}.{end}", f"edge references unknown step {edge[end]!r}")
        if edge["from"] == edge["to"]:
            raise fail(code, edge_path, f"self edge on step {edge['from']!r}")
        successors[edge["from"]].append(edge["to"])
    # Kahn's algorithm: whatever cannot be ordered lies on or behind a cycle.
    indegree = dict.fromkeys(step_ids, 0)
    for targets in successors.values():
        for target in targets:
            indegree[target] += 1
    ready = [s for s, d in indegree.items() if d == 0]
    while ready:
        node = ready.pop()
        for target in successors[node]:
            indegree[target] -= 1
            if indegree[target] == 0:
                ready.append(target)
    remaining = {s for s, d in indegree.items() if d > 0}
    if remaining:
        cycle = sorted(_nodes_on_cycles(remaining, successors))
        raise fail(code, f"{path}.edges", f"workflow graph contains a cycle involving: {', '.join(cycle)}")


def _nodes_on_cycles(candidates: set[str], successors: dict[str, list[str]]) -> set[str]:
    """Nodes of ``candidates`` that can reach themselves (drops nodes merely downstream of a cycle)."""
    on_cycle = set()
    for start in candidates:
        stack = [t for t in successors[start] if t in candidates]
        seen: set[str] = set()
        while stack:
            node = stack.pop()
            if node == start:
                on_cycle.add(start)
                break
            if node in seen:
                continue
            seen.add(node)
            stack.extend(t for t in successors[node] if t in candidates)
    return on_cycle or candidates


# ---------------------------------------------------------------- run


def validate_run(run: Any, path: str = "run", code: str = _RB, structural: bool = True) -> None:
    """A RunInstance, including its workflow snapshot's shape (not its graph).

    ``structural`` also checks that ``workflowId``/``workflowVersion`` equal the snapshot's
    (the bundle check defers that to :func:`check_bundle_invariants`, after integrity).
    """
    obj = as_object(run, path, code)
    req_str(obj, "id", path, code, nonempty=True)
    req_str(obj, "workflowId", path, code, nonempty=True)
    req_int(obj, "workflowVersion", path, code, minimum=0)
    snapshot_path = join_path(path, "workflowSnapshot")
    validate_workflow_shape(require(obj, "workflowSnapshot", path, code), snapshot_path, code)
    req_ts(obj, "startedAt", path, code)
    if "endedAt" in obj:
        req_ts(obj, "endedAt", path, code)
    req_enum(obj, "status", RUN_STATUSES, path, code)
    if "context" in obj:
        _context(obj["context"], join_path(path, "context"), code)
    if "subject" in obj:
        subject_path = join_path(path, "subject")
        subject = as_object(obj["subject"], subject_path, code)
        check_strict(subject, SUBJECT_KEYS, subject_path, code)
        for key in SUBJECT_KEYS:
            opt_str(subject, key, subject_path, code, nonempty=True)
    if "metadata" in obj:
        as_object(obj["metadata"], join_path(path, "metadata"), code)
    if "tags" in obj:
        check_strings(obj["tags"], join_path(path, "tags"), code)
    if "annotations" in obj:
        annotations_path = join_path(path, "annotations")
        for i, note in enumerate(as_array(obj["annotations"], annotations_path, code)):
            note_path = f"{annotations_path}[{i}]"
            n = as_object(note, note_path, code)
            req_ts(n, "at", note_path, code)
            req_str(n, "text", note_path, code)
    if structural:
        check_run_workflow_ids(obj, path, code)


def check_run_workflow_ids(run: dict[str, Any], path: str = "run", code: str = _RB) -> None:
    """A schema-valid run's ``workflowId``/``workflowVersion`` equal its snapshot's."""
    obj = run
    snapshot = obj["workflowSnapshot"]
    if obj["workflowId"] != snapshot["id"]:
        raise fail(
            code,
            join_path(path, "workflowId"),
            f"must equal workflowSnapshot.id ({snapshot['id']!r}), got {obj['workflowId']!r}",
        )
    if obj["workflowVersion"] != snapshot["version"]:
        raise fail(
            code,
            join_path(path, "workflowVersion"),
            f"must equal workflowSnapshot.version ({snapshot['version']!r}), got {obj['workflowVersion']!r}",
        )


def _context(value: Any, path: str, code: str) -> None:
    ctx = as_object(value, path, code)
    opt_str(ctx, "parentRunId", path, code)
    if "parentRunIds" in ctx:
        check_strings(
            ctx["parentRunIds"],
            join_path(path, "parentRunIds"),
            code,
            nonempty_list=True,
            nonempty_items=True,
        )
    if "parentRunId" not in ctx and "parentRunIds" not in ctx:
        raise fail(code, path, "needs parentRunId or parentRunIds")
    if "parentRunId" in ctx and "parentRunIds" in ctx and ctx["parentRunIds"][0] != ctx["parentRunId"]:
        raise fail(code, join_path(path, "parentRunIds[0]"), "must equal parentRunId when both are set")
    opt_str(ctx, "forkedFromStepId", path, code)
    if "pinnedArtifacts" in ctx:
        pinned_path = join_path(path, "pinnedArtifacts")
        for i, pin in enumerate(as_array(ctx["pinnedArtifacts"], pinned_path, code)):
            _artifact_ref(pin, f"{pinned_path}[{i}]", code)


def _artifact_ref(value: Any, path: str, code: str) -> None:
    ref = as_object(value, path, code)
    req_str(ref, "artifactKey", path, code)
    req_int(ref, "version", path, code, minimum=1)


# ---------------------------------------------------------------- trace events

EVENT_TYPES: tuple[str, ...] = tuple(EVENT_VALIDATORS)


def validate_event(event: Any, path: str = "event", code: str = ErrorCode.INVALID_TRACE_EVENT) -> None:
    """A TraceEvent: common fields (``id, runId, ts, stepId?, correlationId?``) and its type's fields."""
    if type(event) is not dict:
        raise expected(code, path, "an object", event)
    # The hot path (a bundle's trace, a host's batch): the usual event's common fields in one
    # expression. Whatever it cannot vouch for goes to the helpers below, which find and
    # explain the first fault in field order.
    try:
        event_type = event["type"]
        validator = EVENT_VALIDATORS[event_type]
        ts = event["ts"]
        usual = (
            type(event_type) is str
            and type(event["id"]) is str
            and event["id"] != ""
            and type(event["runId"]) is str
            and event["runId"] != ""
            and type(ts) is str
            and common_ts_ok(ts)
            and type(event.get("stepId", "")) is str
            and type(event.get("correlationId", "")) is str
        )
    except (KeyError, TypeError):
        usual = False
    if usual:
        validator(event, path, code)
        return
    event_type = event.get("type")
    found = EVENT_VALIDATORS.get(event_type) if type(event_type) is str else None
    if found is None:
        check_enum(event.get("type"), EVENT_TYPES, join_path(path, "type"), code)  # raises
    req_str(event, "id", path, code, nonempty=True)
    req_str(event, "runId", path, code, nonempty=True)
    req_ts(event, "ts", path, code)
    for key in ("stepId", "correlationId"):
        opt_str(event, key, path, code)
    if found is not None:  # always: check_enum raised above otherwise
        found(event, path, code)


@dataclass
class TraceFacts:
    """What the structural invariants need from a trace, gathered while it is validated
    (each event is still in the CPU cache then; a second walk of 100k events is not)."""

    length: int
    run_ids: set[Any]
    step_ids: set[Any]
    # indices of the ``human_gate_resolved`` events (what a signature's approvals must cover)
    gate_resolved: list[int] = field(default_factory=list)

    def all_fine(self, run_id: str, workflow_step_ids: set[str]) -> bool:
        """No event of another run, no unknown step: :func:`_check_trace` would pass."""
        self.step_ids.discard(None)
        self.step_ids.discard("")
        return self.run_ids <= {run_id} and self.step_ids <= workflow_step_ids


def _validate_events(events: list[Any], path: str, code: str) -> TraceFacts:
    """:func:`validate_event` of each item; paths are only spelt out for the one that fails.

    The usual event's common fields are checked here, inline (one call less per event on a
    100,000-event trace); anything else takes :func:`validate_event`, which explains it.
    """
    run_ids: set[Any] = set()
    step_ids: set[Any] = set()
    gate_resolved: list[int] = []
    add_run_id, add_step_id = run_ids.add, step_ids.add
    validators = EVENT_VALIDATORS
    gate_validator = EVENT_VALIDATORS["human_gate_resolved"]
    ts_ok = common_ts_ok
    i = 0
    try:
        for i, event in enumerate(events):  # noqa: B007 (i names the failing event below)
            try:
                validator = validators[event["type"]]
                event_id, run_id, ts = event["id"], event["runId"], event["ts"]
                step_id = event.get("stepId", "")
                usual = (
                    type(event_id) is str
                    and event_id != ""
                    and type(run_id) is str
                    and run_id != ""
                    and type(ts) is str
                    and ts_ok(ts)
                    and type(step_id) is str
                    and type(event.get("correlationId", "")) is str
                )
            except (KeyError, TypeError, AttributeError):  # not an object, no such field or type
                usual = False
            if usual:
                validator(event, path, code)
                if validator is gate_validator:
                    gate_resolved.append(i)
            else:
                validate_event(event, path, code)
                run_id, step_id = event["runId"], event.get("stepId")
                if event["type"] == "human_gate_resolved":
                    gate_resolved.append(i)
            add_run_id(run_id)
            add_step_id(step_id)
    except ProtocolError:
        validate_event(events[i], f"{path}[{i}]", code)  # raises again, with its path
        raise
    return TraceFacts(len(events), run_ids, step_ids, gate_resolved)


def validate_trace_events(events: list[Any], code: str = _RB) -> TraceFacts:
    """:func:`validate_event` of consecutive trace events (a streamed import's batch), with the
    facts :func:`check_bundle_invariants` uses; indices in the facts are the batch's."""
    return _validate_events(events, "trace", code)


# ---------------------------------------------------------------- engine snapshot


def _pairs(value: Any, path: str, code: str) -> list[list[Any]]:
    pairs = as_array(value, path, code)
    for i, pair in enumerate(pairs):
        if type(pair) is not list or len(pair) != 2:
            raise fail(code, f"{path}[{i}]", "must be a [key, value] pair")
        if type(pair[0]) is not str:
            raise expected(code, f"{path}[{i}][0]", "a string key", pair[0])
    return pairs


def validate_engine_snapshot(engine: Any, path: str = "engine", code: str = _RB) -> None:
    """``{revision >= 0, stepStatus, gateState, idempotency}`` with maps as ``[key, value]`` pairs."""
    obj = as_object(engine, path, code)
    req_int(obj, "revision", path, code, minimum=0)
    status_path = join_path(path, "stepStatus")
    for i, (_, status) in enumerate(_pairs(require(obj, "stepStatus", path, code), status_path, code)):
        check_enum(status, STEP_STATUSES, f"{status_path}[{i}][1]", code)
    gates_path = join_path(path, "gateState")
    for i, (_, gate) in enumerate(_pairs(require(obj, "gateState", path, code), gates_path, code)):
        gate_path = f"{gates_path}[{i}][1]"
        g = as_object(gate, gate_path, code)
        req_enum(g, "before", GATE_MARKS, gate_path, code)
        req_enum(g, "after", GATE_MARKS, gate_path, code)
        if "checkpoints" in g:
            checkpoints_path = join_path(gate_path, "checkpoints")
            for name, mark in as_object(g["checkpoints"], checkpoints_path, code).items():
                check_enum(mark, GATE_MARKS, join_path(checkpoints_path, name), code)
    idem_path = join_path(path, "idempotency")
    for i, (_, ref) in enumerate(_pairs(require(obj, "idempotency", path, code), idem_path, code)):
        _artifact_ref(ref, f"{idem_path}[{i}][1]", code)


# ---------------------------------------------------------------- bundle


def validate_bundle_schema(obj: Any, code: str = _RB) -> TraceFacts:
    """Shapes of a RunBundle (``protocolVersion`` is the migration layer's business).

    Returns what :func:`check_bundle_invariants` can use to skip its own walk of the trace.
    """
    bundle = as_object(obj, "", code)
    validate_run(require(bundle, "run", "", code), "run", code, structural=False)
    facts = _validate_events(as_array(require(bundle, "trace", "", code), "trace", code), "trace", code)
    for i, artifact in enumerate(as_array(require(bundle, "artifacts", "", code), "artifacts", code)):
        validate_artifact_version(artifact, f"artifacts[{i}]", code)
    for i, rule_set in enumerate(as_array(require(bundle, "ruleSets", "", code), "ruleSets", code)):
        validate_rule_set(rule_set, f"ruleSets[{i}]", code)
    if "engine" in bundle:
        validate_engine_snapshot(bundle["engine"], "engine", code)
    if "integrity" in bundle:
        integrity = as_object(bundle["integrity"], "integrity", code)
        req_str(integrity, "sha256", "integrity", code, nonempty=True)
    return facts


def check_bundle_invariants(obj: dict[str, Any], code: str = _RB, facts: TraceFacts | None = None) -> None:
    """Structural invariants of a schema-valid bundle.

    Graph errors are ``INVALID_WORKFLOW``; events of another run, unknown steps (events,
    engine), duplicate artifact versions, rule set ids, rule ids within a rule set and
    duplicate keys in any engine map (``stepStatus``, ``gateState``, ``idempotency``) are
    ``code``. Like the reference, events may share an id and an empty ``stepId`` names no
    step. ``facts`` (from :func:`validate_bundle_schema` of the same, unchanged bundle) spares
    the trace walk when they show nothing wrong.
    """
    run = obj["run"]
    workflow = run["workflowSnapshot"]
    check_workflow_graph(workflow, "run.workflowSnapshot")
    check_run_workflow_ids(run, "run", code)
    step_ids = {s["id"] for s in workflow["steps"]}
    if facts is None or not facts.all_fine(run["id"], step_ids):
        _check_trace(obj["trace"], run["id"], step_ids, "trace", code)
    seen_versions: set[tuple[str, int]] = set()
    for i, artifact in enumerate(obj["artifacts"]):
        key = (artifact["artifactKey"], int(artifact["version"]))
        if key in seen_versions:
            raise fail(code, f"artifacts[{i}]", f"duplicate artifact version {key[0]!r} v{key[1]}")
        seen_versions.add(key)
    seen_rule_sets: set[str] = set()
    for i, rule_set in enumerate(obj["ruleSets"]):
        if rule_set["id"] in seen_rule_sets:
            raise fail(code, f"ruleSets[{i}].id", f"duplicate rule set id {rule_set['id']!r}")
        seen_rule_sets.add(rule_set["id"])
        _no_duplicates([rule["id"] for rule in rule_set["rules"]], f"ruleSets[{i}].rules", "rule id", code)
    if "engine" in obj:
        engine = obj["engine"]
        for name in ENGINE_MAPS:
            _no_duplicate_keys(engine[name], join_path("engine", name), code)
        _check_engine_steps(engine, step_ids, "engine", code)


ENGINE_MAPS = ("stepStatus", "gateState", "idempotency")


def _no_duplicates(values: list[Any], path: str, what: str, code: str) -> None:
    seen: set[Any] = set()
    for i, value in enumerate(values):
        if value in seen:
            raise fail(code, f"{path}[{i}]", f"duplicate {what} {value!r}")
        seen.add(value)


def _no_duplicate_keys(pairs: list[list[Any]], path: str, code: str) -> None:
    """A map sent as ``[key, value]`` pairs names each key once (the reference refuses repeats)."""
    seen: set[str] = set()
    for i, pair in enumerate(pairs):
        if pair[0] in seen:
            raise fail(code, f"{path}[{i}][0]", f"duplicate key {pair[0]!r} in a map of [key, value] pairs")
        seen.add(pair[0])


def _check_trace(trace: list[dict[str, Any]], run_id: str, step_ids: set[str], path: str, code: str) -> None:
    for i, event in enumerate(trace):
        event_id = event["id"]
        if event["runId"] != run_id:
            raise fail(
                code,
                f"{path}[{i}].runId",
                f"trace event {event_id!r} belongs to run {event['runId']!r}, expected {run_id!r}",
            )
        step_id = event.get("stepId")
        if step_id and step_id not in step_ids:
            raise fail(
                code,
                f"{path}[{i}].stepId",
                f"trace event {event_id!r} references unknown workflow step {step_id!r}",
            )


def _check_engine_steps(engine: dict[str, Any], step_ids: set[str], path: str, code: str) -> None:
    for key in ("stepStatus", "gateState"):
        for i, (step_id, _) in enumerate(engine[key]):
            if step_id not in step_ids:
                raise fail(
                    code,
                    f"{join_path(path, key)}[{i}][0]",
                    f"engine references unknown workflow step {step_id!r}",
                )


def validate_bundle(obj: Any) -> None:
    """Schema then structural invariants of a RunBundle (no integrity, no version migration)."""
    validate_bundle_schema(obj)
    check_bundle_invariants(obj)


# ---------------------------------------------------------------- run store state


def validate_run_store_state(obj: Any) -> None:
    """A RunStoreState as the reference's HTTP persistence adapter PUTs it (``INVALID_RUN_STATE``)."""
    code = ErrorCode.INVALID_RUN_STATE
    state = as_object(obj, "", code)
    check_int(require(state, "revision", "", code), "revision", code, minimum=0)
    validate_run(require(state, "run", "", code), "run", code)
    trace = as_array(require(state, "trace", "", code), "trace", code)
    _validate_events(trace, "trace", code)
    artifacts = _pairs(require(state, "artifactsByKey", "", code), "artifactsByKey", code)
    for i, (key, artifact) in enumerate(artifacts):
        validate_artifact_version(artifact, f"artifactsByKey[{i}][1]", code)
        if artifact["artifactKey"] != key:
            raise fail(code, f"artifactsByKey[{i}][1].artifactKey", f"must equal its map key {key!r}")
    rule_sets = _pairs(require(state, "ruleSetsById", "", code), "ruleSetsById", code)
    for i, (rule_set_id, rule_set) in enumerate(rule_sets):
        validate_rule_set(rule_set, f"ruleSetsById[{i}][1]", code)
        if rule_set["id"] != rule_set_id:
            raise fail(code, f"ruleSetsById[{i}][1].id", f"must equal its map key {rule_set_id!r}")
    engine = {key: require(state, key, "", code) for key in ENGINE_MAPS}
    engine["revision"] = state["revision"]
    validate_engine_snapshot(engine, "", code)
    for key, pairs in (("artifactsByKey", artifacts), ("ruleSetsById", rule_sets)):
        _no_duplicate_keys(pairs, key, code)
    for key in ENGINE_MAPS:
        _no_duplicate_keys(engine[key], key, code)
    run = state["run"]
    workflow = run["workflowSnapshot"]
    check_workflow_graph(workflow, "run.workflowSnapshot")
    step_ids = {s["id"] for s in workflow["steps"]}
    _check_trace(trace, run["id"], step_ids, "trace", code)
    _check_engine_steps(engine, step_ids, "", code)
