"""Run state: what folding a run's events yields.

:class:`RunState` holds the protocol's engine view (step status, gate state, idempotency
keys, revision), the latest artifact version per key and rule set per id, and what the
engine and readers need beyond it: effective gate policies, open gate requests,
rejections, open spans, per-step attempts and counters (events by type, model calls,
tokens, cost per currency as exact decimal strings).

Gate state in the protocol has two values, ``approved`` and ``pending``; a rejection
leaves the gate ``pending`` (as the reference does) and is remembered separately in
``rejections`` so that the engine can say that the gate was rejected, and refuse to let
anything move past it until the gate is requested again (a retry) or the run is forked.

Runs driven from outside (``run.metadata["workbench.driver"] == "external"``: a LangGraph graph,
an agent loop, ``@observe``) orchestrate themselves, and the record follows them:

- a step may start again after it completed or failed: each ``step_started`` of a step opens
  its next attempt (attempt n = the n-th ``step_started`` of that step in the trace);
- a step may start once one of its predecessors completed (a node runs when any incoming edge
  fires), its PAUSE_AFTER review approved;
- a ``step_started`` of a step the workflow does not name adds the step to the run's workflow
  snapshot (``AUTO``, no edges): the graph is discovered as the pipeline runs;
- a step may complete after one of its checkpoints was rejected (the pipeline received the
  rejection and reacted to it), but while a rejection stands nothing moves past it: the only
  steps that may start are the rejected step itself (a retry) and new attempts of steps that are
  not downstream of it (a revise); a first attempt of any step, or a step downstream of the
  rejected one, is refused until the rejected step's next attempt (or a fork);
- a run whose pipeline routes its rejections itself (``run.metadata["workbench.rejections"] ==
  "routed"``: a LangGraph graph, where the node that asked receives the rejection and the graph's
  edges decide what runs next, e.g. reject -> archive) closes a checkpoint's rejection when the
  rejected step's attempt ends: the node received it and reacted, and the next ``step_started``
  is the graph's routing of that reaction. The rejection stays in the trace (and in bundles).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from runs.engine.workflow import Graph

TERMINAL_STATUSES = frozenset({"completed", "failed", "cancelled"})
AFTER_POLICIES = frozenset({"PAUSE_AFTER", "CHECKPOINT"})
USAGE_FIELDS = ("inputTokens", "outputTokens", "totalTokens", "cachedInputTokens", "reasoningTokens")
APPROVED = "approved"
PENDING = "pending"
DRIVER_METADATA_KEY = "workbench.driver"
EXTERNAL_DRIVER = "external"
MAX_STEP_ID_LENGTH = 200


REJECTIONS_METADATA_KEY = "workbench.rejections"
ROUTED_REJECTIONS = "routed"


def routes_rejections(run: dict[str, Any]) -> bool:
    """An external run whose pipeline routes a rejection itself (see the module doc)."""
    metadata = run.get("metadata")
    return (
        is_external_run(run)
        and isinstance(metadata, dict)
        and metadata.get(REJECTIONS_METADATA_KEY) == ROUTED_REJECTIONS
    )


def is_external_run(run: dict[str, Any]) -> bool:
    """A run its pipeline drives from outside the workbench (attempts, discovered steps)."""
    metadata = run.get("metadata")
    return isinstance(metadata, dict) and metadata.get(DRIVER_METADATA_KEY) == EXTERNAL_DRIVER


def discoverable_step_id(step_id: Any) -> bool:
    return isinstance(step_id, str) and 0 < len(step_id) <= MAX_STEP_ID_LENGTH and step_id.strip() == step_id


def initial_gate_state(policy: str) -> dict[str, Any]:
    """Gate state of a step that has not been reviewed yet (the reference's values)."""
    before = PENDING if policy in ("PAUSE_BEFORE", "CHECKPOINT") else APPROVED
    return {"before": before, "after": APPROVED, "checkpoints": {}}


def gate_slot(gate: str, checkpoint: str | None = None) -> str:
    """Key of one gate of a step: ``PAUSE_BEFORE``, ``PAUSE_AFTER``, ``CHECKPOINT`` or ``CHECKPOINT:<name>``."""
    if gate == "CHECKPOINT" and checkpoint:
        return f"CHECKPOINT:{checkpoint}"
    return gate


def gate_payload_key(step_id: str, gate: str, checkpoint: str | None = None) -> str:
    """The artifact a host writes with what a gate asks the reviewer to look at (the SDK's
    ``RemoteRun.gate(payload=...)``): ``gate:<step>:<checkpoint name or gate>``."""
    return f"gate:{step_id}:{checkpoint or gate}"


def _pairs(mapping: dict[str, Any]) -> list[list[Any]]:
    return [[k, v] for k, v in mapping.items()]


def _nested_pairs(mapping: dict[str, dict[str, Any]]) -> list[list[Any]]:
    return [[k, _pairs(v)] for k, v in mapping.items()]


@dataclass(eq=True)
class RunState:
    """State of one run after ``revision`` events. Mutated in place by ``apply_event``."""

    run: dict[str, Any]
    revision: int = 0
    step_status: dict[str, str] = field(default_factory=dict)
    gate_state: dict[str, dict[str, Any]] = field(default_factory=dict)
    idempotency: dict[str, dict[str, Any]] = field(default_factory=dict)
    artifacts: dict[str, dict[str, Any]] = field(default_factory=dict)
    rule_sets: dict[str, dict[str, Any]] = field(default_factory=dict)
    # beyond the protocol's engine snapshot
    policies: dict[str, str] = field(default_factory=dict)
    idempotency_digests: dict[str, str] = field(default_factory=dict)
    open_gates: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    rejections: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    open_spans: dict[str, dict[str, Any]] = field(default_factory=dict)
    step_attempts: dict[str, int] = field(default_factory=dict)
    step_errors: dict[str, dict[str, Any]] = field(default_factory=dict)
    events_by_type: dict[str, int] = field(default_factory=dict)
    model_calls: int = 0
    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(USAGE_FIELDS, 0))
    model_duration_ms: float = 0
    cost: dict[str, str] = field(default_factory=dict)
    parent_run_ids: list[str] = field(default_factory=list)
    last_event_id: str | None = None
    last_event_at: str | None = None
    warnings: list[dict[str, Any]] = field(default_factory=list)
    warning_count: int = 0
    graph: Graph = field(default=None, compare=False, repr=False)  # type: ignore[assignment]

    MAX_WARNINGS = 100

    def __post_init__(self) -> None:
        if self.graph is None:
            self.graph = Graph.of(self.run.get("workflowSnapshot") or {})

    # construction -------------------------------------------------------------------

    @classmethod
    def initial(cls, run: dict[str, Any]) -> RunState:
        """State of ``run`` before any event: every step pending, gates at their start values."""
        state = cls(run=run)
        for step in (run.get("workflowSnapshot") or {}).get("steps", []):
            sid = step["id"]
            policy = step.get("gatePolicy", "AUTO")
            state.step_status[sid] = PENDING
            state.gate_state[sid] = initial_gate_state(policy)
            state.policies[sid] = policy
        context = run.get("context") or {}
        if context.get("parentRunIds"):
            state.parent_run_ids = list(context["parentRunIds"])
        elif context.get("parentRunId"):
            state.parent_run_ids = [context["parentRunId"]]
        return state

    # views ----------------------------------------------------------------------------

    @property
    def run_id(self) -> str:
        run_id: str = self.run["id"]
        return run_id

    @property
    def status(self) -> str:
        status: str = self.run.get("status", "running")
        return status

    @property
    def is_finished(self) -> bool:
        return self.status in TERMINAL_STATUSES

    def policy(self, step_id: str) -> str:
        return self.policies.get(step_id, "AUTO")

    @property
    def is_external(self) -> bool:
        return is_external_run(self.run)

    def can_discover(self, step_id: Any) -> bool:
        """True when a ``step_started`` of ``step_id`` would add it to this run's workflow."""
        return self.is_external and step_id not in self.step_status and discoverable_step_id(step_id)

    def add_step(self, step_id: str) -> None:
        """Add an ``AUTO`` step without edges to the workflow snapshot (an external run found it)."""
        snapshot = dict(self.run.get("workflowSnapshot") or {})
        step = {"id": step_id, "gatePolicy": "AUTO", "inputs": [], "outputs": []}
        snapshot["steps"] = [*snapshot.get("steps", []), step]
        self.run = {**self.run, "workflowSnapshot": snapshot}
        self.step_status[step_id] = PENDING
        self.gate_state[step_id] = initial_gate_state("AUTO")
        self.policies[step_id] = "AUTO"
        self.graph = Graph.of(snapshot)

    def standing_rejection(self, step_id: str) -> str | None:
        """In an external run: why ``step_id`` may not start while a rejection stands, or None."""
        first_attempt = self.step_attempts.get(step_id, 0) == 0
        for rejected_step, slots in self.rejections.items():
            if rejected_step == step_id:
                continue  # a retry of the rejected step
            if first_attempt or step_id in self.graph.descendants(rejected_step):
                slot = next(iter(slots))
                label = slot.replace("CHECKPOINT:", 'CHECKPOINT "') + ('"' if ":" in slot else "")
                return (
                    f'{label} of step "{rejected_step}" was rejected: record a retry (a new attempt of '
                    f'"{rejected_step}") or a revise (a new attempt of an earlier step), or fork the run'
                )
        return None

    def is_rejected(self, step_id: str, slot: str) -> bool:
        return slot in self.rejections.get(step_id, {})

    def to_engine_snapshot(self) -> dict[str, Any]:
        """The protocol's engine object: maps as ``[key, value]`` pairs in insertion order."""
        return {
            "revision": self.revision,
            "stepStatus": _pairs(self.step_status),
            "gateState": [
                [sid, {"before": gs["before"], "after": gs["after"], "checkpoints": dict(gs["checkpoints"])}]
                for sid, gs in self.gate_state.items()
            ],
            "idempotency": [
                [k, {"artifactKey": v["artifactKey"], "version": v["version"]}]
                for k, v in self.idempotency.items()
            ],
        }

    def start_blocker(self, step_id: str) -> str | None:
        """Why ``step_id`` cannot begin now, or ``None`` when it may (run status aside)."""
        if self.can_discover(step_id):
            return self.standing_rejection(step_id)
        status = self.step_status.get(step_id)
        if status is None:
            return "it is not a step of this workflow"
        if status == "running":
            return "it is already running"
        if self.is_external:
            rejection = self.standing_rejection(step_id)
            if rejection is not None:
                return rejection
        elif status == "completed" and not self.is_rejected(step_id, "PAUSE_AFTER"):
            return "it has already completed"
        preds = self.graph.predecessors.get(step_id, ())
        if self.is_external:  # a step runs when any of its incoming edges fires (LangGraph's rule)
            preds = tuple(p for p in preds if self.step_status.get(p) == "completed")
            if self.graph.predecessors.get(step_id) and not preds:
                names = ", ".join(f'"{p}"' for p in self.graph.predecessors[step_id])
                return f"waiting for one of its predecessors ({names}) to complete"
        for pred in preds:
            pst = self.step_status.get(pred, PENDING)
            if pst != "completed":
                return f'waiting for predecessor "{pred}" ({pst})'
        for pred in preds:
            if self.gate_state[pred]["after"] != APPROVED:
                if self.is_rejected(pred, "PAUSE_AFTER"):
                    return f'the PAUSE_AFTER gate of predecessor "{pred}" was rejected'
                return f'waiting for PAUSE_AFTER gate approval of predecessor "{pred}"'
        if self.gate_state[step_id]["before"] != APPROVED:
            gate = "CHECKPOINT" if self.policy(step_id) == "CHECKPOINT" else "PAUSE_BEFORE"
            if self.is_rejected(step_id, gate) or self.is_rejected(step_id, "PAUSE_BEFORE"):
                return f"its {gate} gate was rejected (request the gate again to retry, or fork the run)"
            return f"waiting for {gate} gate approval"
        return None

    def ready_steps(self) -> list[str]:
        """Steps that may begin now, in workflow order (none when the run is finished)."""
        if self.is_finished:
            return []
        return [sid for sid in self.step_status if self.start_blocker(sid) is None]

    def complete_blocker(self, step_id: str) -> str | None:
        """Why ``step_id`` cannot complete successfully now, or ``None``."""
        status = self.step_status.get(step_id)
        if status is None:
            return "it is not a step of this workflow"
        if status != "running":
            return f"it is {status}, not running"
        if self.is_external:  # a rejection reached the pipeline: it may end the attempt and react
            for slot, req in self.open_gates.get(step_id, {}).items():
                if slot.startswith("CHECKPOINT:"):
                    return f'waiting for CHECKPOINT "{req["checkpoint"]}" approval'
            return None
        for name, value in self.gate_state[step_id]["checkpoints"].items():
            if value != APPROVED:
                rejected = self.is_rejected(step_id, gate_slot("CHECKPOINT", name))
                return (
                    f'CHECKPOINT "{name}" was rejected'
                    if rejected
                    else f'waiting for CHECKPOINT "{name}" approval'
                )
        for slot, req in self.open_gates.get(step_id, {}).items():
            if slot.startswith("CHECKPOINT:"):
                return f'waiting for CHECKPOINT "{req["checkpoint"]}" approval'
        return None

    def pending_gates(self) -> list[dict[str, Any]]:
        """Gates a reviewer can decide now, requested ones first (in request order).

        Each item: ``stepId``, ``gate``, ``checkpoint`` (or ``None``), ``reason``,
        ``requestedAt``, ``eventId`` (``None`` when the gate is implied by the policy and
        was not requested by an event) and ``requested``.
        """
        if self.is_finished:
            return []
        out: list[dict[str, Any]] = []
        listed: set[tuple[str, str]] = set()
        for sid, slots in self.open_gates.items():
            for slot, req in slots.items():
                out.append({**req, "requested": True})
                listed.add((sid, slot))
        for sid, status in self.step_status.items():
            gs = self.gate_state[sid]
            if status == "completed" and gs["after"] != APPROVED:
                if (sid, "PAUSE_AFTER") not in listed and not self.is_rejected(sid, "PAUSE_AFTER"):
                    out.append(self._implied_gate(sid, "PAUSE_AFTER"))
            elif status in ("pending", "failed") and gs["before"] != APPROVED:
                gate = "CHECKPOINT" if self.policy(sid) == "CHECKPOINT" else "PAUSE_BEFORE"
                if (sid, gate) in listed or self.is_rejected(sid, gate):
                    continue
                preds = self.graph.predecessors.get(sid, ())
                if all(
                    self.step_status.get(p) == "completed" and self.gate_state[p]["after"] == APPROVED
                    for p in preds
                ):
                    out.append(self._implied_gate(sid, gate))
        return out

    @staticmethod
    def _implied_gate(step_id: str, gate: str) -> dict[str, Any]:
        return {
            "stepId": step_id,
            "gate": gate,
            "checkpoint": None,
            "reason": None,
            "requestedAt": None,
            "eventId": None,
            "requested": False,
        }

    def add_cost(self, currency: str, amount: Any) -> None:
        current = self.cost.get(currency)
        total = Decimal(str(amount)) + (Decimal(current) if current is not None else 0)
        self.cost[currency] = _decimal_text(total)

    def warn(self, code: str, message: str) -> None:
        """Record something odd met while folding (the fold is lenient and never raises)."""
        self.warning_count += 1
        if len(self.warnings) < self.MAX_WARNINGS:
            self.warnings.append({"seq": self.revision, "code": code, "message": message})

    # copies and serialisation --------------------------------------------------------

    def clone(self) -> RunState:
        """An independent copy for trial application (artifact and rule bodies are shared:
        the engine never mutates them in place)."""
        return RunState(
            run=dict(self.run),
            revision=self.revision,
            step_status=dict(self.step_status),
            gate_state={k: {**v, "checkpoints": dict(v["checkpoints"])} for k, v in self.gate_state.items()},
            idempotency=dict(self.idempotency),
            artifacts=dict(self.artifacts),
            rule_sets=dict(self.rule_sets),
            policies=dict(self.policies),
            idempotency_digests=dict(self.idempotency_digests),
            open_gates={k: dict(v) for k, v in self.open_gates.items()},
            rejections={k: dict(v) for k, v in self.rejections.items()},
            open_spans=dict(self.open_spans),
            step_attempts=dict(self.step_attempts),
            step_errors=dict(self.step_errors),
            events_by_type=dict(self.events_by_type),
            model_calls=self.model_calls,
            tokens=dict(self.tokens),
            model_duration_ms=self.model_duration_ms,
            cost=dict(self.cost),
            parent_run_ids=list(self.parent_run_ids),
            last_event_id=self.last_event_id,
            last_event_at=self.last_event_at,
            warnings=list(self.warnings),
            warning_count=self.warning_count,
            graph=self.graph,
        )

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable, lossless form. Maps are ``[key, value]`` pair lists so their
        order survives stores that reorder object keys (PostgreSQL ``jsonb``)."""
        return {
            "format": 1,
            "run": self.run,
            "revision": self.revision,
            "stepStatus": _pairs(self.step_status),
            "gateState": [
                [k, {"before": v["before"], "after": v["after"], "checkpoints": _pairs(v["checkpoints"])}]
                for k, v in self.gate_state.items()
            ],
            "idempotency": _pairs(self.idempotency),
            "artifacts": _pairs(self.artifacts),
            "ruleSets": _pairs(self.rule_sets),
            "policies": _pairs(self.policies),
            "idempotencyDigests": _pairs(self.idempotency_digests),
            "openGates": _nested_pairs(self.open_gates),
            "rejections": _nested_pairs(self.rejections),
            "openSpans": _pairs(self.open_spans),
            "stepAttempts": _pairs(self.step_attempts),
            "stepErrors": _pairs(self.step_errors),
            "eventsByType": _pairs(self.events_by_type),
            "modelCalls": self.model_calls,
            "tokens": _pairs(self.tokens),
            "modelDurationMs": self.model_duration_ms,
            "cost": _pairs(self.cost),
            "parentRunIds": list(self.parent_run_ids),
            "lastEventId": self.last_event_id,
            "lastEventAt": self.last_event_at,
            "warnings": list(self.warnings),
            "warningCount": self.warning_count,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunState:
        """Inverse of :meth:`to_json`."""

        def m(key: str) -> dict[str, Any]:
            return {k: v for k, v in data.get(key, [])}

        def nested(key: str) -> dict[str, dict[str, Any]]:
            return {k: {a: b for a, b in v} for k, v in data.get(key, [])}

        return cls(
            run=data["run"],
            revision=data["revision"],
            step_status=m("stepStatus"),
            gate_state={
                k: {
                    "before": v["before"],
                    "after": v["after"],
                    "checkpoints": {a: b for a, b in v["checkpoints"]},
                }
                for k, v in data.get("gateState", [])
            },
            idempotency=m("idempotency"),
            artifacts=m("artifacts"),
            rule_sets=m("ruleSets"),
            policies=m("policies"),
            idempotency_digests=m("idempotencyDigests"),
            open_gates=nested("openGates"),
            rejections=nested("rejections"),
            open_spans=m("openSpans"),
            step_attempts=m("stepAttempts"),
            step_errors=m("stepErrors"),
            events_by_type=m("eventsByType"),
            model_calls=data.get("modelCalls", 0),
            tokens={**dict.fromkeys(USAGE_FIELDS, 0), **m("tokens")},
            model_duration_ms=data.get("modelDurationMs", 0),
            cost=m("cost"),
            parent_run_ids=list(data.get("parentRunIds", [])),
            last_event_id=data.get("lastEventId"),
            last_event_at=data.get("lastEventAt"),
            warnings=list(data.get("warnings", [])),
            warning_count=data.get("warningCount", 0),
        )


def _decimal_text(value: Decimal) -> str:
    text = format(value.normalize(), "f") if value == value.to_integral_value() else format(value, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text or "0"


def initial_run_doc(run_doc: dict[str, Any]) -> dict[str, Any]:
    """The run as it was when it started: what folding its trace from seq 0 begins with."""
    start = {k: v for k, v in run_doc.items() if k not in ("endedAt", "annotations")}
    start["status"] = "running"
    return start
