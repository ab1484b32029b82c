"""Redacted user bundles: a shareable copy of a run bundle, by a named redaction policy.

A redacted bundle is an ordinary protocol 1.0.0 bundle with its own ``integrity`` (any
implementation verifies it), never a bundle with extra keys: the policy that produced it is
named where the protocol has room for host data, ``run.metadata``::

    run.metadata["workbench.redaction"] = {
        "policy": "user" | "mask" | "drop",
        "version": 1 | 2,
        "sourceSha256": "<integrity of the full bundle it was made from>",
        "redacted": [{"where": "trace[3].payload", "sha256": "<hash of what was removed>"}, ...],
    }

``redacted`` lists every value the policy removed or masked, with the SHA-256 of its canonical
JSON: whoever holds the full bundle can prove which original value sat there, the redacted
bundle never reveals it. ``sourceSha256`` ties the copy to the full export.

Policies (``POLICIES``):

* ``user`` -- the reference runtime's ``exportRunBundle({profile: "user"})``, no more:
  ``model_io.payload``, ``tool_call.args``/``result``, ``run.metadata`` (replaced by the
  redaction note) and the engine snapshot (so the importer re-derives it from the trace) go.
  Everything else stays, free text included: titles, ``model_io.summary``, annotations, gate
  notes, error messages, span attributes and artifact data. It is the reference's profile,
  not a privacy guarantee.
* ``mask`` -- nothing a person wrote or a model said is left. ``user``, and every free-text
  field is replaced by the string ``"[REDACTED]"``: workflow and step titles and step
  descriptions, run annotations, ``model_io.summary``, gate reasons and notes, status-change
  reasons, ``error.message`` and the messages of step and span errors, annotation text, rule
  labels and payloads (in ``ruleSets`` and in ``rule_changed`` snapshots), every span attribute
  value except the GenAI model names and numeric usage (``KEPT_ATTRIBUTES``, so a reviewer still
  totals tokens and cost; the keys stay), every artifact's ``data`` (in ``artifacts`` and in
  the trace; an inline pointer's ``payloadHash``/``sha256``/``byteLength`` described the old
  data, so they go) and every JSON Patch ``value``. A key the protocol does not define (objects
  tolerate unknown keys) is removed: nothing unlisted rides along.
* ``drop`` -- as ``mask``, but optional free text (titles, descriptions, summaries, reasons,
  notes, rule labels) and artifact ``data`` are removed altogether (pointers stay: they still
  name the original bytes); what the protocol requires (``error.message``, annotation text,
  rule payloads, span attribute values, JSON Patch values) is masked.

What stays under every policy is the structure: ids, types, step ids, span ids and names, tool
names, timestamps, statuses, gate decisions, usage, cost, durations, providers and model names,
tags, the subject and the lineage. The run remains one a reviewer can read, replay (without
payloads) and total up.

:func:`redact_events` and :func:`redact_run_doc` apply the same rules to events and to a run
document: what a run that carries a redaction note records from then on, and what its
transcript and OTLP export show.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from runs.protocol.canonical import canonical_bytes, sha256_hex
from runs.protocol.errors import ErrorCode, ProtocolError
from runs.protocol.integrity import seal_bundle

MASK = "[REDACTED]"
METADATA_KEY = "workbench.redaction"
POLICIES = ("user", "mask", "drop")
# The note's ``version``: which rules of the policy made the copy. ``user`` is the reference's
# profile and has not changed; ``mask`` and ``drop`` 1 left free text (titles, summaries,
# annotations, notes, error messages, span attributes, rule sets) in place.
POLICY_VERSIONS = {"user": 1, "mask": 2, "drop": 2}

_POINTER_DIGESTS = ("payloadHash", "sha256", "byteLength")

# Span attributes whose value stays under mask and drop: the model and provider names, and
# (numbers only) the token usage and cost of the GenAI conventions, in both the reference's
# mapping and the current conventions.
KEPT_ATTRIBUTES = frozenset(
    {
        "gen_ai.system",
        "gen_ai.provider.name",
        "gen_ai.operation.name",
        "gen_ai.request.model",
        "gen_ai.response.model",
        "gen_ai.usage.cost.currency",
    }
)
_NUMERIC_ATTRIBUTE_PREFIX = "gen_ai.usage."

# What a field is (see the policies above).
KEEP = "keep"  # structure: stays
TEXT = "text"  # optional free text: masked (mask) or removed (drop)
REQUIRED_TEXT = "required text"  # free text the protocol requires: masked (mask and drop)
CONTENT = "content"  # payloads: removed by every policy, ``user`` included

_ENVELOPE = {key: KEEP for key in ("id", "runId", "ts", "type", "stepId", "correlationId")}


def _digest(value: Any) -> str:
    return sha256_hex(canonical_bytes(value))


def policy_of(run_doc: Any) -> str | None:
    """The redaction policy a run document carries in its metadata (``None`` for a full run)."""
    metadata = run_doc.get("metadata") if isinstance(run_doc, dict) else None
    note = metadata.get(METADATA_KEY) if isinstance(metadata, dict) else None
    policy = note.get("policy") if isinstance(note, dict) else None
    return policy if policy in POLICIES else None


def _content_only(spec: dict[str, Any]) -> dict[str, Any]:
    return {key: kind for key, kind in spec.items() if isinstance(kind, str) and kind == CONTENT}


class _Redactor:
    def __init__(self, policy: str) -> None:
        self.policy = policy
        self.redacted: list[dict[str, str]] = []
        self.specs: dict[str, dict[str, Any]] = {
            "error": {"message": REQUIRED_TEXT, "code": KEEP},
            "pointer": {key: KEEP for key in ("kind", "ref", *_POINTER_DIGESTS)},
            "artifact": {
                **{key: KEEP for key in ("artifactKey", "typeId", "version", "createdAt")},
                "pointer": self.nested("pointer"),
                "data": self.artifact_data,
            },
            "rule": {"id": KEEP, "priority": KEEP, "enabled": KEEP, "label": TEXT, "payload": REQUIRED_TEXT},
            "rule_set": {"id": KEEP, "ruleSchemaId": KEEP, "rules": self.each("rule")},
            "edge": {"id": KEEP, "from": KEEP, "to": KEEP},
            "step": {
                **{key: KEEP for key in ("id", "gatePolicy", "inputs", "outputs")},
                "title": TEXT,
                "description": TEXT,
            },
            "workflow": {
                "id": KEEP,
                "version": KEEP,
                "title": TEXT,
                "steps": self.each("step"),
                "edges": self.each("edge"),
            },
            "run_annotation": {"at": KEEP, "text": REQUIRED_TEXT},
            "run": {
                **{
                    key: KEEP
                    for key in (
                        "id",
                        "workflowId",
                        "workflowVersion",
                        "startedAt",
                        "endedAt",
                        "status",
                        "context",
                        "subject",
                        "tags",
                    )
                },
                "metadata": CONTENT,
                "workflowSnapshot": self.nested("workflow"),
                "annotations": self.each("run_annotation"),
            },
        }
        keep = dict.fromkeys
        self.events: dict[str, dict[str, Any]] = {
            "step_started": {},
            "step_completed": {"ok": KEEP, "error": self.nested("error")},
            "artifact_written": {"artifact": self.nested("artifact"), "idempotencyKey": KEEP},
            "artifact_patch": {
                **keep(("artifactKey", "fromVersion", "toVersion", "idempotencyKey"), KEEP),
                "patch": self.patch,
            },
            "model_io": {
                **keep(("direction", "provider", "model", "usage", "cost", "durationMs"), KEEP),
                "summary": TEXT,
                "payload": CONTENT,
            },
            "tool_call": {"name": KEEP, "args": CONTENT, "result": CONTENT},
            "human_gate_requested": {"gate": KEEP, "reason": TEXT},
            "human_gate_resolved": {"gate": KEEP, "decision": KEEP, "note": TEXT},
            "rule_changed": {"ruleSetId": KEEP, "snapshot": self.nested("rule_set")},
            "policy_changed": {"policy": KEEP},
            "error": {"message": REQUIRED_TEXT, "code": KEEP, "fatal": KEEP},
            "run_forked": keep(("parentRunId", "parentRunIds", "forkedFromStepId"), KEEP),
            "annotation": {"text": REQUIRED_TEXT, "tags": KEEP},
            "run_status_changed": {"status": KEEP, "reason": TEXT},
            "span_started": {
                **keep(("spanId", "parentSpanId", "name", "kind"), KEEP),
                "attributes": self.attributes,
            },
            "span_ended": {
                **keep(("spanId", "status", "durationMs"), KEEP),
                "attributes": self.attributes,
                "error": self.nested("error"),
            },
        }

        self.events = {kind: {**_ENVELOPE, **spec} for kind, spec in self.events.items()}
        # an artifact_written event's artifact is treated by :meth:`artifact` before its fields
        self.written_spec = {**self.events["artifact_written"], "artifact": KEEP}
        if policy == "user":  # only the payloads go: skip looking at anything else
            self.events = {kind: _content_only(spec) for kind, spec in self.events.items()}
            self.written_spec = _content_only(self.written_spec)
            self.specs["run"] = _content_only(self.specs["run"])

    # -- the record of what went ------------------------------------------------------------

    def note(self, where: str, value: Any) -> None:
        self.redacted.append({"where": where, "sha256": _digest(value)})

    def mask(self, obj: Any, key: Any, where: str) -> None:
        if obj[key] != MASK:  # masking a masked value again records nothing
            self.note(where, obj[key])
            obj[key] = MASK

    def remove(self, obj: dict[str, Any], key: str, where: str) -> None:
        self.note(where, obj.pop(key))

    # -- objects by their spec --------------------------------------------------------------

    def fields(self, obj: dict[str, Any], spec: dict[str, Any], where: str) -> None:
        """Treat each key of ``obj`` as ``spec`` says; in spec order, then the unknown keys."""
        full = self.policy != "user"
        for key, kind in spec.items():
            if key not in obj:
                continue
            path = f"{where}.{key}"
            if kind == CONTENT:
                self.remove(obj, key, path)
            elif kind == KEEP or not full:
                continue
            elif kind == TEXT and self.policy == "drop":
                self.remove(obj, key, path)
            elif kind in (TEXT, REQUIRED_TEXT):
                self.mask(obj, key, path)
            else:
                kind(obj, key, path)
        if full:
            for key in [key for key in obj if key not in spec]:
                self.remove(obj, key, f"{where}.{key}")

    def nested(self, name: str) -> Callable[[dict[str, Any], str, str], None]:
        def treat(obj: dict[str, Any], key: str, where: str) -> None:
            if isinstance(obj[key], dict):
                self.fields(obj[key], self.specs[name], where)
            else:  # not the protocol's shape: nothing in it to keep
                self.mask(obj, key, where)

        return treat

    def each(self, name: str) -> Callable[[dict[str, Any], str, str], None]:
        def treat(obj: dict[str, Any], key: str, where: str) -> None:
            if not isinstance(obj[key], list):
                self.mask(obj, key, where)
                return
            for i, value in enumerate(obj[key]):
                if isinstance(value, dict):
                    self.fields(value, self.specs[name], f"{where}[{i}]")
                else:
                    self.mask(obj[key], i, f"{where}[{i}]")

        return treat

    # -- the special cases ------------------------------------------------------------------

    def artifact_data(self, obj: dict[str, Any], key: str, where: str) -> None:
        """Handled with its pointer by :meth:`artifact` (the spec entry only marks it known)."""

    def artifact(self, artifact: dict[str, Any], where: str) -> None:
        if self.policy != "user" and "data" in artifact:
            if self.policy == "drop":
                self.remove(artifact, "data", f"{where}.data")
            else:
                self.mask(artifact, "data", f"{where}.data")
                pointer = artifact.get("pointer")
                if isinstance(pointer, dict) and pointer.get("kind") == "inline":
                    for key in _POINTER_DIGESTS:
                        pointer.pop(key, None)
        self.fields(artifact, self.specs["artifact"], where)

    def patch(self, obj: dict[str, Any], key: str, where: str) -> None:
        ops = obj[key]
        if not isinstance(ops, list):
            self.mask(obj, key, where)
            return
        for i, op in enumerate(ops):
            if isinstance(op, dict) and "value" in op:
                self.mask(op, "value", f"{where}[{i}].value")

    def attributes(self, obj: dict[str, Any], key: str, where: str) -> None:
        attributes = obj[key]
        if not isinstance(attributes, dict):
            self.mask(obj, key, where)  # not the protocol's shape: nothing in it to keep
            return
        for name, value in attributes.items():
            if name in KEPT_ATTRIBUTES and isinstance(value, str):
                continue
            if name.startswith(_NUMERIC_ATTRIBUTE_PREFIX) and type(value) in (int, float):
                continue
            self.mask(attributes, name, f"{where}.{name}")

    # -- entry points -----------------------------------------------------------------------

    def event(self, event: dict[str, Any], where: str) -> None:
        kind: Any = event.get("type")  # as sent: an unknown type gets the envelope's spec
        if kind == "artifact_written" and isinstance(event.get("artifact"), dict):
            self.artifact(event["artifact"], f"{where}.artifact")
            self.fields(event, self.written_spec, where)
            return
        self.fields(event, self.events.get(kind, _ENVELOPE), where)

    def run(self, run: dict[str, Any], where: str = "run") -> None:
        self.fields(run, self.specs["run"], where)

    def rule_set(self, rule_set: dict[str, Any], where: str) -> None:
        self.fields(rule_set, self.specs["rule_set"], where)


def _check_policy(policy: str) -> None:
    if policy not in POLICIES:
        raise ProtocolError(
            ErrorCode.INVALID_INPUT,
            f"unknown redaction policy {policy!r}; expected one of {', '.join(POLICIES)}",
            "policy",
        )


def redact_bundle(bundle: dict[str, Any], policy: str) -> dict[str, Any]:
    """A copy (with a fresh integrity hash) of ``bundle`` redacted by ``policy`` (the input is not changed).

    Raises ``ProtocolError(INVALID_INPUT)`` for an unknown policy name.
    """
    _check_policy(policy)
    source = bundle.get("integrity", {}).get("sha256") if isinstance(bundle.get("integrity"), dict) else None
    out = {
        key: copy.deepcopy(bundle[key])
        for key in ("protocolVersion", "run", "trace", "artifacts", "ruleSets")
    }
    redactor = _Redactor(policy)
    run = out["run"]
    redactor.run(run)
    for i, event in enumerate(out["trace"]):
        redactor.event(event, f"trace[{i}]")
    for i, artifact in enumerate(out["artifacts"]):
        redactor.artifact(artifact, f"artifacts[{i}]")
    for i, rule_set in enumerate(out["ruleSets"]):
        if isinstance(rule_set, dict):
            redactor.rule_set(rule_set, f"ruleSets[{i}]")
    note: dict[str, Any] = {"policy": policy, "version": POLICY_VERSIONS[policy]}
    if source:
        note["sourceSha256"] = source
    note["redacted"] = redactor.redacted
    run["metadata"] = {METADATA_KEY: note}
    return seal_bundle(out)


def redact_events(events: Any, policy: str) -> list[dict[str, Any]]:
    """Copies of trace events redacted as :func:`redact_bundle` redacts a trace by ``policy``:
    what a run that carries a redaction note records from then on (its replays included)."""
    _check_policy(policy)
    redactor = _Redactor(policy)
    out = []
    for i, event in enumerate(events):
        event = copy.deepcopy(event)
        redactor.event(event, f"trace[{i}]")
        out.append(event)
    return out


def redact_run_doc(run_doc: dict[str, Any], policy: str) -> dict[str, Any]:
    """A copy of a run document redacted as :func:`redact_bundle` redacts ``run``: its metadata
    is the redaction note it already carries, or a note naming ``policy`` (without the list of
    removed values: a view, not a bundle)."""
    _check_policy(policy)
    doc = copy.deepcopy(run_doc)
    metadata = doc.get("metadata")
    kept = metadata.get(METADATA_KEY) if isinstance(metadata, dict) else None
    _Redactor(policy).run(doc)
    note = kept if isinstance(kept, dict) else {"policy": policy, "version": POLICY_VERSIONS[policy]}
    doc["metadata"] = {METADATA_KEY: note}
    return doc


def event_redactor(policy: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A function that returns a copy of one event redacted by ``policy`` (for views that read
    events one at a time: a transcript, an OTLP export; the hashes of what went are not kept)."""
    _check_policy(policy)
    redactor = _Redactor(policy)

    def redact(event: dict[str, Any]) -> dict[str, Any]:
        event = copy.deepcopy(event)
        redactor.event(event, "event")
        redactor.redacted.clear()
        return event

    return redact


def redacted_view(
    run_doc: dict[str, Any], events: Iterable[dict[str, Any]], redact: str | None = None
) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """A run document and its events as they may leave: redacted by ``redact``, or else by the
    policy the run carries (:func:`policy_of`), or untouched. What a transcript or an OTLP
    export of the run shows; the events are redacted one at a time as they are read, so a long
    run streams in bounded memory."""
    policy = redact or policy_of(run_doc)
    if policy is None:
        return run_doc, iter(events)
    redact_event = event_redactor(policy)
    return redact_run_doc(run_doc, policy), (redact_event(event) for event in events)


def redaction_of(bundle: dict[str, Any]) -> dict[str, Any] | None:
    """The redaction note of a bundle made by :func:`redact_bundle` (``None`` for a full one)."""
    metadata = bundle.get("run", {}).get("metadata")
    note = metadata.get(METADATA_KEY) if isinstance(metadata, dict) else None
    return note if isinstance(note, dict) else None
