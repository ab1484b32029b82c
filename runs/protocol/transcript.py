"""A run as an agent exchange transcript: one JSON object per line, in seq order.

Line shape (keys in this order; absent values are omitted, never null):

    {"seq": 1.., "run_id", "path", "ts", "type", "payload",
     "event_seq"?, "event_id"?, "parent_run_id"?, "child_run_id"?}

- `seq` numbers the transcript's own lines, strictly increasing from 1. `event_seq` is the seq of the
  stored protocol event a line came from (a `tool_call` with a result yields two lines with the same
  `event_seq`; synthesized lines such as `run.started` have none).
- `path` is the step the line belongs to (the event's `stepId`), "" at run level.
- `type` is the seed's closed vocabulary: run.started, run.completed, step.started, step.completed,
  step.call_workflow.started, step.call_workflow.completed, message.user, message.assistant,
  tool.call, tool.result. Protocol events with no type of their own are mapped explicitly
  (`OTHER_EVENTS`): a gate or a span opens and closes like a step (`payload.kind` "gate" /
  "span"); artifact writes and patches, rule and policy changes, errors, annotations, forks and
  non-terminal status changes are one `step.completed` line whose `payload.kind` says what it
  was and `payload.event_type` names the protocol event. Readers must still pass unknown types
  through (the seed's forward-compatibility rule).
- `ts` is the event's instant in UTC as JavaScript prints it (`2026-04-01T06:30:00.123Z`, from
  `2026-04-01T12:00:00.123+05:30`); the event itself keeps its own text in the run's bundle.
- `payload.blocks` of messages and tool lines are typed content blocks (text, thinking, tool_use,
  tool_result, command, stream), each with a `fidelity`: "router" when Workbench's own execution
  seam produced the event (actor `playground:*`, `system*`, `workbench*`), "agent_emitted" when a
  host reported it. The same marker is on the payload.
- Lineage: every line of a child run carries `parent_run_id`; the parent's transcript has a
  `step.call_workflow.started` (and, once the child ended, `...completed`) line with `child_run_id`,
  placed by time among the parent's events.

The mapping is pure (`transcript_lines`); `iter_run_transcript` reads a stored run in bounded chunks.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from runs.protocol.canonical import wire_bytes
from runs.protocol.errors import ProtocolError
from runs.protocol.timestamps import to_utc_iso

ROUTER_ACTOR_PREFIXES = ("playground", "system", "workbench")
TERMINAL = {"completed", "failed", "cancelled"}

CLOSED_TYPES = (
    "run.started",
    "run.completed",
    "step.started",
    "step.completed",
    "step.call_workflow.started",
    "step.call_workflow.completed",
    "message.user",
    "message.assistant",
    "tool.call",
    "tool.result",
)
# Protocol events outside that vocabulary -> (transcript type, payload kind).
OTHER_EVENTS = {
    "human_gate_requested": ("step.started", "gate"),
    "human_gate_resolved": ("step.completed", "gate"),
    "span_started": ("step.started", "span"),
    "span_ended": ("step.completed", "span"),
    "artifact_written": ("step.completed", "artifact"),
    "artifact_patch": ("step.completed", "artifact"),
    "rule_changed": ("step.completed", "rules"),
    "policy_changed": ("step.completed", "policy"),
    "error": ("step.completed", "error"),
    "annotation": ("step.completed", "annotation"),
    "run_forked": ("step.completed", "fork"),
    "run_status_changed": ("step.completed", "status"),  # to "running"; terminal ones end the run
}
_ENVELOPE = {"id", "runId", "ts", "type", "stepId", "correlationId"}


@dataclass(frozen=True)
class StoredEvent:
    seq: int
    body: dict[str, Any]
    actor: str = ""


@dataclass(frozen=True)
class ChildRun:
    run_id: str
    workflow_id: str
    started_at: str
    ended_at: str | None = None
    status: str = "running"
    from_step_id: str | None = None


def utc(ts: str) -> str:
    """A protocol timestamp as its UTC instant (JavaScript's toISOString); other text as is."""
    return to_utc_iso(ts) or ts


def fidelity_of(actor: str) -> str:
    return "router" if actor.startswith(ROUTER_ACTOR_PREFIXES) else "agent_emitted"


def parent_ids(run: dict[str, Any]) -> list[str]:
    context = run.get("context") or {}
    if context.get("parentRunIds"):
        return list(context["parentRunIds"])
    if context.get("parentRunId"):
        return [context["parentRunId"]]
    return []


def _when(ts: str | None) -> datetime | None:
    if not ts:
        return None
    try:
        moment = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


# --------------------------------------------------------------------------------------------
# Content blocks


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _json_value(value: Any) -> Any:
    """Tool arguments sometimes travel as JSON text (OpenAI): parse it when it is an object."""
    if isinstance(value, str):
        try:
            parsed = orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
        return parsed if isinstance(parsed, dict | list) else value
    return value


def _content_blocks(content: Any, fidelity: str) -> list[dict[str, Any]]:
    """Anthropic-style / OpenAI-style content (a string or a list of typed parts) -> blocks."""
    if isinstance(content, str):
        return [{"type": "text", "text": content, "fidelity": fidelity}]
    blocks: list[dict[str, Any]] = []
    if not isinstance(content, list):
        return blocks
    for part in content:
        if isinstance(part, str):
            blocks.append({"type": "text", "text": part, "fidelity": fidelity})
            continue
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in ("text", "input_text", "output_text") and _text(part.get("text")) is not None:
            blocks.append({"type": "text", "text": part["text"], "fidelity": fidelity})
        elif kind in ("thinking", "redacted_thinking", "reasoning"):
            text = part.get("thinking") or part.get("text") or ""
            if not text and isinstance(part.get("summary"), list):
                text = "\n".join(s.get("text", "") for s in part["summary"] if isinstance(s, dict))
            blocks.append({"type": "thinking", "text": text, "fidelity": fidelity})
        elif kind in ("tool_use", "function_call"):
            blocks.append(
                {
                    "type": "tool_use",
                    "tool_name": part.get("name"),
                    "tool_id": part.get("id") or part.get("call_id"),
                    "tool_input": _json_value(part.get("input", part.get("arguments"))),
                    "fidelity": fidelity,
                }
            )
        elif kind in ("tool_result", "function_call_output"):
            blocks.append(
                {
                    "type": "tool_result",
                    "tool_id": part.get("tool_use_id") or part.get("call_id"),
                    "tool_content": part.get("content", part.get("output")),
                    "fidelity": fidelity,
                }
            )
        elif kind == "message":  # OpenAI Responses API output item
            blocks.extend(_content_blocks(part.get("content"), fidelity))
    return blocks


def _request_blocks(payload: Any, fidelity: str) -> tuple[list[dict[str, Any]], str | None]:
    """(user blocks, composed system prompt) of a model request payload."""
    if isinstance(payload, str):
        return [{"type": "text", "text": payload, "fidelity": fidelity}], None
    if not isinstance(payload, dict):
        return [], None
    system = payload.get("system") or payload.get("system_prompt") or payload.get("instructions")
    system_text = system if isinstance(system, str) else None
    if isinstance(system, list):
        system_text = "\n".join(b["text"] for b in _content_blocks(system, fidelity) if b["type"] == "text")
    blocks: list[dict[str, Any]] = []
    messages = payload.get("messages") or payload.get("input")
    if isinstance(messages, str):
        blocks = _content_blocks(messages, fidelity)
    elif isinstance(messages, list):
        for message in messages:
            if not isinstance(message, dict):
                continue
            role = message.get("role")
            if role in ("system", "developer"):
                text = message.get("content")
                if isinstance(text, str):
                    system_text = f"{system_text}\n{text}" if system_text else text
                continue
            blocks.extend(_content_blocks(message.get("content"), fidelity))
    for key in ("prompt", "user", "text"):
        if not blocks and _text(payload.get(key)) is not None:
            blocks = [{"type": "text", "text": payload[key], "fidelity": fidelity}]
    return blocks, system_text


def _response_blocks(payload: Any, fidelity: str) -> list[dict[str, Any]]:
    if isinstance(payload, str):
        return [{"type": "text", "text": payload, "fidelity": fidelity}]
    if not isinstance(payload, dict):
        return []
    if isinstance(payload.get("content"), list | str):  # Anthropic Messages
        return _content_blocks(payload["content"], fidelity)
    if isinstance(payload.get("choices"), list) and payload["choices"]:  # OpenAI Chat Completions
        message = payload["choices"][0].get("message") if isinstance(payload["choices"][0], dict) else None
        if isinstance(message, dict):
            blocks: list[dict[str, Any]] = []
            reasoning = message.get("reasoning_content") or message.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                blocks.append({"type": "thinking", "text": reasoning, "fidelity": fidelity})
            blocks.extend(_content_blocks(message.get("content"), fidelity))
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                blocks.append(
                    {
                        "type": "tool_use",
                        "tool_name": function.get("name"),
                        "tool_id": call.get("id"),
                        "tool_input": _json_value(function.get("arguments")),
                        "fidelity": fidelity,
                    }
                )
            return blocks
    if isinstance(payload.get("output"), list):  # OpenAI Responses
        return _content_blocks(payload["output"], fidelity)
    for key in ("text", "output", "completion", "response"):
        if _text(payload.get(key)) is not None:
            return [{"type": "text", "text": payload[key], "fidelity": fidelity}]
    return []


def _stream_blocks(payload: Any, fidelity: str) -> list[dict[str, Any]]:
    text: Any = None
    if isinstance(payload, str):
        text = payload
    elif isinstance(payload, dict):
        delta = payload.get("delta")
        if isinstance(delta, str):
            text = delta
        elif isinstance(delta, dict):
            text = delta.get("text") or delta.get("thinking") or delta.get("partial_json")
        elif isinstance(payload.get("choices"), list) and payload["choices"]:
            text = ((payload["choices"][0] or {}).get("delta") or {}).get("content")
        else:
            text = payload.get("text")
    block: dict[str, Any] = {"type": "stream", "fidelity": fidelity}
    if isinstance(text, str):
        block["text"] = text
    else:
        block["chunk"] = payload
    return [block]


# --------------------------------------------------------------------------------------------
# Events -> lines


def _model_lines(event: dict[str, Any], fidelity: str) -> list[tuple[str, dict[str, Any]]]:
    direction = event.get("direction")
    payload = event.get("payload")
    meta: dict[str, Any] = {k: event[k] for k in ("provider", "model") if k in event}
    if direction == "request":
        blocks, system = _request_blocks(payload, fidelity)
        if not blocks and _text(event.get("summary")):
            blocks = [{"type": "text", "text": event["summary"], "fidelity": fidelity}]
        body: dict[str, Any] = {**meta, "blocks": blocks, "fidelity": fidelity}
        if system is not None:
            body["system_prompt"] = system
        return [("message.user", body)]
    if direction == "stream_chunk":
        return [
            ("message.assistant", {**meta, "blocks": _stream_blocks(payload, fidelity), "fidelity": fidelity})
        ]
    blocks = _response_blocks(payload, fidelity)
    if not blocks and _text(event.get("summary")):
        blocks = [{"type": "text", "text": event["summary"], "fidelity": fidelity}]
    body = {**meta, "blocks": blocks, "fidelity": fidelity}
    for src, dst in (("usage", "usage"), ("cost", "cost"), ("durationMs", "duration_ms")):
        if src in event:
            body[dst] = event[src]
    return [("message.assistant", body)]


def _tool_lines(event: dict[str, Any], fidelity: str) -> list[tuple[str, dict[str, Any]]]:
    tool_id = event.get("correlationId") or event.get("id")
    name = event.get("name")
    call = {
        "tool_name": name,
        "tool_id": tool_id,
        "tool_input": event.get("args"),
        "fidelity": fidelity,
        "blocks": [
            {
                "type": "tool_use",
                "tool_name": name,
                "tool_id": tool_id,
                "tool_input": event.get("args"),
                "fidelity": fidelity,
            }
        ],
    }
    lines = [("tool.call", call)]
    if "result" in event:  # a call without a result (timeout, crash) stays dangling, as recorded
        lines.append(
            (
                "tool.result",
                {
                    "tool_name": name,
                    "tool_id": tool_id,
                    "tool_content": event["result"],
                    "fidelity": fidelity,
                    "blocks": [
                        {
                            "type": "tool_result",
                            "tool_id": tool_id,
                            "tool_content": event["result"],
                            "fidelity": fidelity,
                        }
                    ],
                },
            )
        )
    return lines


def event_lines(event: dict[str, Any], actor: str = "") -> list[tuple[str, dict[str, Any]]]:
    """(type, payload) pairs for one protocol event (one, or two for a tool call with its result)."""
    kind = event.get("type")
    fidelity = fidelity_of(actor)
    if kind == "step_started":
        return [("step.started", {"kind": "step", "step_id": event.get("stepId")})]
    if kind == "step_completed":
        body: dict[str, Any] = {"kind": "step", "step_id": event.get("stepId"), "ok": event.get("ok")}
        if "error" in event:
            body["error"] = event["error"]
        return [("step.completed", body)]
    if kind == "model_io":
        return _model_lines(event, fidelity)
    if kind == "tool_call":
        return _tool_lines(event, fidelity)
    if kind == "run_status_changed" and event.get("status") in TERMINAL:
        return [("run.completed", {k: event[k] for k in ("status", "reason") if k in event})]
    line_type, payload_kind = OTHER_EVENTS.get(str(kind), ("step.completed", "event"))
    body = {"kind": payload_kind, "event_type": kind}
    if kind == "error":
        body["ok"] = False
    body.update({k: v for k, v in event.items() if k not in _ENVELOPE})
    return [(line_type, body)]


def _child_markers(
    children: Sequence[ChildRun],
) -> list[tuple[datetime | None, str, str, dict[str, Any], ChildRun]]:
    markers = []
    for child in children:
        started = {"child_run_id": child.run_id, "workflow_id": child.workflow_id}
        markers.append(
            (_when(child.started_at), child.started_at, "step.call_workflow.started", started, child)
        )
        if child.ended_at and child.status in TERMINAL:
            ended = {"child_run_id": child.run_id, "status": child.status}
            markers.append(
                (_when(child.ended_at), child.ended_at, "step.call_workflow.completed", ended, child)
            )
    # Unparseable times go last, in the order given.
    return sorted(markers, key=lambda m: (m[0] is None, m[0].timestamp() if m[0] else 0.0))


def transcript_lines(
    run: dict[str, Any], events: Iterable[StoredEvent], children: Sequence[ChildRun] = ()
) -> Iterator[dict[str, Any]]:
    """The transcript of one run (a protocol RunInstance and its events in seq order)."""
    run_id = run["id"]
    parents = parent_ids(run)
    counter = 0

    def line(
        kind: str,
        payload: dict[str, Any],
        *,
        ts: str,
        path: str = "",
        event: StoredEvent | None = None,
        child_run_id: str | None = None,
    ) -> dict[str, Any]:
        nonlocal counter
        counter += 1
        out: dict[str, Any] = {"seq": counter, "run_id": run_id, "path": path, "ts": utc(ts), "type": kind}
        out["payload"] = payload
        if event is not None:
            out["event_seq"] = event.seq
            if "id" in event.body:
                out["event_id"] = event.body["id"]
        if parents:
            out["parent_run_id"] = parents[0]
        if child_run_id is not None:
            out["child_run_id"] = child_run_id
        return out

    started: dict[str, Any] = {
        "workflow_id": run.get("workflowId"),
        "workflow_version": run.get("workflowVersion"),
    }
    for src, dst in (("subject", "subject"), ("tags", "tags"), ("metadata", "metadata")):
        if run.get(src) is not None:
            started[dst] = run[src]
    if parents:
        started["parent_run_ids"] = parents
        if (run.get("context") or {}).get("forkedFromStepId"):
            started["forked_from_step_id"] = run["context"]["forkedFromStepId"]
    yield line("run.started", started, ts=run.get("startedAt", ""))

    markers = _child_markers(children)
    completed = False
    for event in events:
        at = _when(event.body.get("ts"))
        while markers and markers[0][0] is not None and at is not None and markers[0][0] <= at:
            _, ts, kind, payload, child = markers.pop(0)
            yield line(kind, payload, ts=ts, path=child.from_step_id or "", child_run_id=child.run_id)
        path = event.body.get("stepId") or ""
        for kind, payload in event_lines(event.body, event.actor):
            completed = completed or kind == "run.completed"
            yield line(kind, payload, ts=event.body.get("ts", ""), path=path, event=event)
    for _, ts, kind, payload, child in markers:
        yield line(kind, payload, ts=ts, path=child.from_step_id or "", child_run_id=child.run_id)
    if not completed and run.get("status") in TERMINAL:
        # Imported runs may end without a status event; the run document still says how they ended.
        yield line(
            "run.completed",
            {"status": run["status"], "synthesized": True},
            ts=run.get("endedAt") or "",
        )


_SAFE_SEQ = 2**53 - 1


def line_bytes(
    seq: int,
    run_id: str,
    path: str,
    ts: str,
    kind: str,
    payload: dict[str, Any],
    event_seq: int | None = None,
    event_id: str | None = None,
    child_run_id: str | None = None,
    parent_run_id: str | None = None,
) -> bytes:
    """``dump_line`` of the line ``{seq, run_id, path, ts, type, payload, event_seq?, event_id?,
    child_run_id?, parent_run_id?}`` (``ts`` already in UTC): the same bytes, with only the
    payload walked by ``wire_bytes`` (the envelope holds text and small seqs, which orjson writes
    as JavaScript does). Anything unusual (a seq beyond 2**53 - 1, a lone surrogate, a payload
    ``wire_bytes`` refuses) takes ``dump_line`` itself."""
    out: dict[str, Any] = {
        "seq": seq,
        "run_id": run_id,
        "path": path,
        "ts": ts,
        "type": kind,
        "payload": payload,
    }
    if event_seq is not None:
        out["event_seq"] = event_seq
    if event_id is not None:
        out["event_id"] = event_id
    if child_run_id is not None:
        out["child_run_id"] = child_run_id
    if parent_run_id is not None:
        out["parent_run_id"] = parent_run_id
    if (
        type(seq) is int
        and 0 <= seq <= _SAFE_SEQ
        and (event_seq is None or (type(event_seq) is int and 0 <= event_seq <= _SAFE_SEQ))
    ):
        try:
            out["payload"] = orjson.Fragment(wire_bytes(payload))
            return orjson.dumps(out) + b"\n"
        except (orjson.JSONEncodeError, ProtocolError, TypeError):
            out["payload"] = payload
    return dump_line(out)


def dump_line(obj: dict[str, Any]) -> bytes:
    """One transcript line: a complete JSON object and LF (NUL bytes and controls are escaped),
    numbers spelt as ECMAScript prints them, like every JSON the server writes (wire_bytes)."""
    try:
        return wire_bytes(obj) + b"\n"
    except ProtocolError:  # e.g. a lone surrogate: escape to ASCII instead of failing the stream
        import json

        return json.dumps(obj, ensure_ascii=True, separators=(",", ":")).encode() + b"\n"


# --------------------------------------------------------------------------------------------
# Stored runs


def output_text(event: dict[str, Any]) -> str | None:
    """The text a ``model_io`` event carries (a response's or chunk's text blocks, a request's user
    text), joined by newlines; None when it carries no text (a payload this reader does not know)."""
    if event.get("type") != "model_io":
        return None
    _kind, body = _model_lines(event, "agent_emitted")[0]
    texts = [b["text"] for b in body["blocks"] if isinstance(b.get("text"), str)]
    return "\n".join(texts) if texts else None


# The payload readers, for other pure readers of model calls (the trace view's span detail,
# runs.presenters.span_detail): typed content blocks of a message's content and of a response.
content_blocks = _content_blocks
response_blocks = _response_blocks
