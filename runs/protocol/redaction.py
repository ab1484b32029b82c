"""Redacted user bundles: a shareable copy of a run bundle, by a named redaction policy.

A redacted bundle is an ordinary protocol 1.0.0 bundle with its own ``integrity`` (any
implementation verifies it), never a bundle with extra keys: the policy that produced it is
named where the protocol has room for host data, ``run.metadata``::

    run.metadata["workbench.redaction"] = {
        "policy": "user" | "mask" | "drop",
        "version": 1,
        "sourceSha256": "<integrity of the full bundle it was made from>",
        "redacted": [{"where": "trace[3].payload", "sha256": "<hash of what was removed>"}, ...],
    }

``redacted`` lists every value the policy removed or masked, with the SHA-256 of its canonical
JSON: whoever holds the full bundle can prove which original value sat there, the redacted
bundle never reveals it. ``sourceSha256`` ties the copy to the full export.

Policies (``POLICIES``):

* ``user`` -- what the reference runtime's ``exportRunBundle({profile: "user"})`` drops:
  ``model_io.payload``, ``tool_call.args``/``result``, ``run.metadata`` (replaced by the
  redaction note) and the engine snapshot (so the importer re-derives it from the trace).
  Artifact data stays.
* ``mask`` -- ``user``, and every artifact's ``data`` (in ``artifacts`` and in the trace) and
  every JSON Patch ``value`` are replaced by the string ``"[REDACTED]"``; an inline pointer's
  ``payloadHash``/``sha256``/``byteLength`` described the old data, so they are removed (the
  redaction note keeps the old hash).
* ``drop`` -- ``user``, and artifact ``data`` is removed altogether (pointers stay: they still
  name the original bytes), JSON Patch values masked as in ``mask`` (an ``add`` needs one).

Rule sets, step structure, timestamps, usage and cost stay: the run remains a run a reviewer
can read, replay (without payloads) and total up.
"""

from __future__ import annotations

import copy
from typing import Any

from runs.protocol.canonical import canonical_bytes, sha256_hex
from runs.protocol.errors import ErrorCode, ProtocolError
from runs.protocol.integrity import seal_bundle

MASK = "[REDACTED]"
METADATA_KEY = "workbench.redaction"
POLICY_VERSION = 1
POLICIES = ("user", "mask", "drop")

_POINTER_DIGESTS = ("payloadHash", "sha256", "byteLength")


def _digest(value: Any) -> str:
    return sha256_hex(canonical_bytes(value))


class _Redactor:
    def __init__(self, policy: str) -> None:
        self.policy = policy
        self.redacted: list[dict[str, str]] = []

    def note(self, where: str, value: Any) -> None:
        self.redacted.append({"where": where, "sha256": _digest(value)})

    def drop_key(self, obj: dict[str, Any], key: str, where: str) -> None:
        if key in obj:
            self.note(f"{where}.{key}", obj.pop(key))

    def artifact(self, artifact: dict[str, Any], where: str) -> None:
        if self.policy == "user" or "data" not in artifact:
            return
        self.note(f"{where}.data", artifact["data"])
        if self.policy == "drop":
            del artifact["data"]
            return
        artifact["data"] = MASK
        pointer = artifact.get("pointer")
        if isinstance(pointer, dict) and pointer.get("kind") == "inline":
            for key in _POINTER_DIGESTS:
                pointer.pop(key, None)

    def patch(self, ops: list[Any], where: str) -> None:
        if self.policy == "user":
            return
        for i, op in enumerate(ops):
            if isinstance(op, dict) and "value" in op:
                self.note(f"{where}[{i}].value", op["value"])
                op["value"] = MASK

    def event(self, event: dict[str, Any], where: str) -> None:
        kind = event.get("type")
        if kind == "model_io":
            self.drop_key(event, "payload", where)
        elif kind == "tool_call":
            self.drop_key(event, "args", where)
            self.drop_key(event, "result", where)
        elif kind == "artifact_written" and isinstance(event.get("artifact"), dict):
            self.artifact(event["artifact"], f"{where}.artifact")
        elif kind == "artifact_patch" and isinstance(event.get("patch"), list):
            self.patch(event["patch"], f"{where}.patch")


def redact_bundle(bundle: dict[str, Any], policy: str) -> dict[str, Any]:
    """A signed copy of ``bundle`` redacted by ``policy`` (the input is not changed).

    Raises ``ProtocolError(INVALID_INPUT)`` for an unknown policy name.
    """
    if policy not in POLICIES:
        raise ProtocolError(
            ErrorCode.INVALID_INPUT,
            f"unknown redaction policy {policy!r}; expected one of {', '.join(POLICIES)}",
            "policy",
        )
    source = bundle.get("integrity", {}).get("sha256") if isinstance(bundle.get("integrity"), dict) else None
    out = {
        key: copy.deepcopy(bundle[key])
        for key in ("protocolVersion", "run", "trace", "artifacts", "ruleSets")
    }
    redactor = _Redactor(policy)
    run = out["run"]
    redactor.drop_key(run, "metadata", "run")
    for i, event in enumerate(out["trace"]):
        redactor.event(event, f"trace[{i}]")
    for i, artifact in enumerate(out["artifacts"]):
        redactor.artifact(artifact, f"artifacts[{i}]")
    note: dict[str, Any] = {"policy": policy, "version": POLICY_VERSION}
    if source:
        note["sourceSha256"] = source
    note["redacted"] = redactor.redacted
    run["metadata"] = {METADATA_KEY: note}
    return seal_bundle(out)


def redact_events(events: Any, policy: str) -> list[dict[str, Any]]:
    """Copies of trace events redacted as :func:`redact_bundle` redacts a trace by ``policy``:
    what a run that carries a redaction note records from then on (its replays included)."""
    redactor = _Redactor(policy)
    out = []
    for i, event in enumerate(events):
        event = copy.deepcopy(event)
        redactor.event(event, f"trace[{i}]")
        out.append(event)
    return out


def redaction_of(bundle: dict[str, Any]) -> dict[str, Any] | None:
    """The redaction note of a bundle made by :func:`redact_bundle` (``None`` for a full one)."""
    metadata = bundle.get("run", {}).get("metadata")
    note = metadata.get(METADATA_KEY) if isinstance(metadata, dict) else None
    return note if isinstance(note, dict) else None
