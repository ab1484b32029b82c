"""A bundle with a unique canary string in every free-text and content field of the protocol.

Every event type of protocol 1.0.0 appears, each field that a person writes or a model says
holds its own canary (``CANARIES`` maps each canary to the place it was planted), and so does a
key the protocol does not define (objects tolerate unknown keys on parse). Structure (ids,
names, numbers, model names, decisions) holds no canary: it stays under every policy.

``KEPT_BY_USER`` lists the canaries the ``user`` policy (the reference's profile) keeps: all of
them but ``run.metadata``, ``model_io.payload`` and ``tool_call.args``/``result``.
"""

from __future__ import annotations

import re
from typing import Any

from runs.protocol.integrity import seal_bundle

RUN_ID = "run_canary"
CANARY = re.compile(rb"cnry[0-9]{3}x")

CANARIES: dict[str, str] = {}


def plant(where: str) -> str:
    """A fresh canary for ``where`` (``cnry007x``: no canary is a prefix of another)."""
    canary = f"cnry{len(CANARIES):03d}x"
    CANARIES[canary] = where
    return canary


def _event(n: int, event_type: str, step: str | None = None, **fields: Any) -> dict:
    event: dict[str, Any] = {
        "id": f"evt_canary_{n:02d}",
        "runId": RUN_ID,
        "ts": f"2026-03-01T10:00:{n:02d}.000Z",
    }
    if step:
        event["stepId"] = step
    event["type"] = event_type
    event.update(fields)
    return event


def _rule_set(where: str) -> dict:
    return {
        "id": "rs-canary",
        "ruleSchemaId": "schema.any",
        "rules": [
            {
                "id": "rule-1",
                "priority": 1,
                "enabled": True,
                "label": plant(f"{where}.rules[0].label"),
                "payload": {"instruction": plant(f"{where}.rules[0].payload")},
            }
        ],
    }


def _artifact(version: int, where: str, created: str) -> dict:
    return {
        "artifactKey": "doc",
        "typeId": "doc",
        "version": version,
        "createdAt": created,
        "data": {"body": plant(f"{where}.data")},
    }


def build() -> dict:
    """The full (signed) canary bundle; ``CANARIES`` is filled as a side effect."""
    CANARIES.clear()
    workflow = {
        "id": "wf-canary",
        "version": 1,
        "title": plant("workflowSnapshot.title"),
        "steps": [
            {
                "id": "draft",
                "title": plant("steps[0].title"),
                "description": plant("steps[0].description"),
                "gatePolicy": "PAUSE_AFTER",
                "inputs": [],
                "outputs": ["doc"],
            },
            {
                "id": "review",
                "title": plant("steps[1].title"),
                "gatePolicy": "AUTO",
                "inputs": ["doc"],
                "outputs": [],
            },
        ],
        "edges": [{"id": "e1", "from": "draft", "to": "review"}],
    }
    run = {
        "id": RUN_ID,
        "workflowId": "wf-canary",
        "workflowVersion": 1,
        "workflowSnapshot": workflow,
        "startedAt": "2026-03-01T10:00:00.000Z",
        "endedAt": "2026-03-01T10:00:40.000Z",
        "status": "failed",
        "subject": {"userId": "user-1", "tenantId": "tenant-1"},
        "metadata": {"workbench.title": plant("run.metadata.title"), "notes": plant("run.metadata.notes")},
        "tags": ["canary"],
        "annotations": [{"at": "2026-03-01T10:00:00.500Z", "text": plant("run.annotations[0].text")}],
    }
    patched = _artifact(2, "trace.artifact_patch.result", "2026-03-01T10:00:09.000Z")
    trace = [
        _event(
            1,
            "span_started",
            spanId="span-root",
            name="agent.run",
            kind="server",
            attributes={
                "gen_ai.request.model": "gpt-canary",
                "gen_ai.usage.input_tokens": 12,
                "gen_ai.prompt": plant("span_started.attributes.gen_ai.prompt"),
                "app.notes": {"inner": plant("span_started.attributes.app.notes")},
            },
            hostExtra=plant("span_started.unknown key"),
        ),
        _event(2, "step_started", "draft", hostExtra=plant("step_started.unknown key")),
        _event(
            3,
            "model_io",
            "draft",
            correlationId="corr-1",
            direction="request",
            provider="openai",
            model="gpt-canary",
            summary=plant("model_io(request).summary"),
            payload={"messages": [{"role": "user", "content": plant("model_io(request).payload")}]},
        ),
        _event(
            4,
            "model_io",
            "draft",
            correlationId="corr-1",
            direction="stream_chunk",
            provider="openai",
            model="gpt-canary",
            summary=plant("model_io(stream_chunk).summary"),
            payload={"delta": plant("model_io(stream_chunk).payload")},
        ),
        _event(
            5,
            "model_io",
            "draft",
            correlationId="corr-1",
            direction="response",
            provider="openai",
            model="gpt-canary",
            usage={"inputTokens": 12, "outputTokens": 5, "totalTokens": 17},
            cost={"amount": 0.0021, "currency": "USD"},
            durationMs=420,
            summary=plant("model_io(response).summary"),
            payload={
                "choices": [
                    {"message": {"role": "assistant", "content": plant("model_io(response).payload")}}
                ]
            },
        ),
        _event(
            6,
            "tool_call",
            "draft",
            name="search",
            args={"query": plant("tool_call.args")},
            result={"hits": [plant("tool_call.result")]},
        ),
        _event(
            7,
            "artifact_written",
            "draft",
            artifact=_artifact(1, "trace.artifact_written.artifact", "2026-03-01T10:00:07.000Z"),
        ),
        _event(
            8,
            "artifact_patch",
            "draft",
            artifactKey="doc",
            fromVersion=1,
            toVersion=2,
            patch=[
                {"op": "add", "path": "/extra", "value": plant("artifact_patch.patch[0].value")},
            ],
        ),
        _event(9, "rule_changed", ruleSetId="rs-canary", snapshot=_rule_set("rule_changed.snapshot")),
        _event(10, "policy_changed", "review", policy="CHECKPOINT"),
        _event(11, "annotation", "draft", text=plant("annotation.text"), tags=["note"]),
        _event(12, "error", "draft", message=plant("error.message"), code="TOOL_FAILED", fatal=False),
        _event(
            13,
            "human_gate_requested",
            "draft",
            gate="PAUSE_AFTER",
            reason=plant("human_gate_requested.reason"),
        ),
        _event(14, "step_completed", "draft", ok=True),
        _event(
            15,
            "human_gate_resolved",
            "draft",
            gate="PAUSE_AFTER",
            decision="edited",
            note=plant("human_gate_resolved.note"),
        ),
        _event(16, "step_started", "review"),
        _event(
            17,
            "step_completed",
            "review",
            ok=False,
            error={"message": plant("step_completed.error.message"), "code": "REVIEW_FAILED"},
        ),
        _event(
            18,
            "span_ended",
            spanId="span-root",
            status="error",
            durationMs=17000,
            attributes={
                "gen_ai.usage.output_tokens": 5,
                "app.result": plant("span_ended.attributes.app.result"),
            },
            error={"message": plant("span_ended.error.message"), "code": "E_SPAN"},
        ),
        _event(19, "run_forked", parentRunId="run_canary_parent", forkedFromStepId="draft"),
        _event(20, "run_status_changed", status="failed", reason=plant("run_status_changed.reason")),
    ]
    # the patched version's data carries the patched value (it is the artifact, a person's text)
    patched["data"]["extra"] = next(c for c, w in CANARIES.items() if w == "artifact_patch.patch[0].value")
    bundle = {
        "protocolVersion": "1.0.0",
        "run": run,
        "trace": trace,
        "artifacts": [
            {**trace[6]["artifact"]},
            patched,
        ],
        "ruleSets": [_rule_set("ruleSets[0]")],
    }
    return seal_bundle(bundle)


def kept_by_user() -> set[str]:
    """Canaries the ``user`` policy keeps (the reference's profile)."""

    def gone(where: str) -> bool:
        return where.startswith(("run.metadata", "tool_call.")) or (
            where.startswith("model_io(") and where.endswith(".payload")
        )

    return {c for c, where in CANARIES.items() if not gone(where)}


def found(data: bytes | str) -> set[str]:
    """The canaries that occur in ``data``."""
    raw = data.encode() if isinstance(data, str) else data
    return {m.decode() for m in CANARY.findall(raw)}
