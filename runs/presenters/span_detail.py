"""What happened inside one span, for the trace view's detail pane. Pure: the span's events in,
view data out: its model calls (input and output as a conversation, tool calls as calls, tokens,
cost, latency), its tool calls, its errors and a list of its events; its attributes as rows.

``events`` are the ``(seq, event)`` pairs read inside the span (runs.selectors.spans.span_events:
its seq range or its correlation id, bounded). Events of a child span (between a nested
``span_started`` and its ``span_ended``) belong to that child and are left out here.

Model payloads are read in the shapes the workbench stores: OpenAI Chat Completions and Responses,
Anthropic Messages (both through runs.protocol.transcript's block readers), and the GenAI semantic
conventions' ``inputMessages`` / ``outputMessages`` of calls ingested from OTLP.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from runs.presenters import numbers
from runs.protocol.transcript import content_blocks, response_blocks

MAX_TEXT = 20_000  # characters of one message part shown (the event itself holds all of it)
MAX_ATTRIBUTES = 200


@dataclass
class Part:
    kind: str  # text | thinking | tool_call | tool_result | data
    text: str = ""
    name: str = ""
    call_id: str = ""


@dataclass
class Message:
    role: str
    parts: list[Part]


@dataclass
class ModelCall:
    provider: str = ""
    model: str = ""
    request_seq: int | None = None
    response_seq: int | None = None
    input: list[Message] = field(default_factory=list)
    output: list[Message] = field(default_factory=list)
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    cached_tokens: int | None = None
    cost: str = ""  # "USD 0.0021" by the one money rule
    cost_exact: str = ""
    duration_ms: float | None = None


@dataclass
class ToolCall:
    seq: int
    name: str
    args: str
    result: str | None


@dataclass
class EventLink:
    seq: int
    type: str
    label: str


@dataclass
class SpanContents:
    calls: list[ModelCall] = field(default_factory=list)
    tools: list[ToolCall] = field(default_factory=list)
    errors: list[tuple[int, str]] = field(default_factory=list)  # (seq, "[CODE] message")
    events: list[EventLink] = field(default_factory=list)
    children: int = 0  # child spans started inside (their events are theirs)
    tokens: int = 0
    cost: str = ""
    truncated: bool = False  # more events than were read


def _clip(text: str) -> str:
    return (
        text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + f"… ({len(text) - MAX_TEXT:,} more characters)"
    )


def _text(value: Any) -> str:
    """A value as text: strings as they are, anything else as indented JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        parsed = _json_or_none(value)
        if isinstance(parsed, dict | list):
            return _clip(json.dumps(parsed, indent=2, ensure_ascii=False))
        return _clip(value)
    return _clip(json.dumps(value, indent=2, ensure_ascii=False, default=str))


def _json_or_none(text: str) -> Any:
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        return json.loads(stripped)
    except ValueError:
        return None


def _parts_of_blocks(blocks: list[dict[str, Any]]) -> list[Part]:
    parts = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            parts.append(Part("text", _clip(str(block.get("text") or ""))))
        elif kind == "thinking":
            parts.append(Part("thinking", _clip(str(block.get("text") or ""))))
        elif kind == "tool_use":
            parts.append(
                Part(
                    "tool_call",
                    _text(block.get("tool_input")),
                    str(block.get("tool_name") or "tool"),
                    str(block.get("tool_id") or ""),
                )
            )
        elif kind == "tool_result":
            parts.append(
                Part("tool_result", _text(block.get("tool_content")), "", str(block.get("tool_id") or ""))
            )
    return parts


def _semconv_parts(parts: Any) -> list[Part]:
    """GenAI semantic conventions' message parts (text, tool_call, tool_call_response, reasoning)."""
    out = []
    for part in parts if isinstance(parts, list) else []:
        if isinstance(part, str):
            out.append(Part("text", _clip(part)))
            continue
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind in ("text", None) and "content" in part:
            out.append(Part("text", _text(part.get("content"))))
        elif kind == "reasoning":
            out.append(Part("thinking", _text(part.get("content"))))
        elif kind == "tool_call":
            out.append(
                Part(
                    "tool_call",
                    _text(part.get("arguments")),
                    str(part.get("name") or "tool"),
                    str(part.get("id") or ""),
                )
            )
        elif kind == "tool_call_response":
            result = part.get("response", part.get("result"))
            out.append(Part("tool_result", _text(result), "", str(part.get("id") or "")))
        else:
            out.append(Part("data", _text(part)))
    return out


def _semconv_messages(messages: Any) -> list[Message]:
    out = []
    for message in messages if isinstance(messages, list) else []:
        if isinstance(message, dict):
            out.append(Message(str(message.get("role") or "user"), _semconv_parts(message.get("parts"))))
    return out


def _chat_message(message: dict[str, Any]) -> Message:
    """One message of an OpenAI or Anthropic request: its content blocks, OpenAI's tool calls, and
    a ``tool`` message's result."""
    role = str(message.get("role") or "user")
    content = message.get("content")
    if role == "tool":
        return Message(
            role, [Part("tool_result", _text(content), "", str(message.get("tool_call_id") or ""))]
        )
    parts = _parts_of_blocks(content_blocks(content, ""))
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict):
            function: dict[str, Any] = call["function"] if isinstance(call.get("function"), dict) else {}
            parts.append(
                Part(
                    "tool_call",
                    _text(function.get("arguments")),
                    str(function.get("name") or "tool"),
                    str(call.get("id") or ""),
                )
            )
    return Message(role, parts)


def input_messages(payload: Any) -> list[Message]:
    """A model request's input as a conversation (system first)."""
    if isinstance(payload, str):
        return [Message("user", [Part("text", _clip(payload))])]
    if not isinstance(payload, dict):
        return []
    out: list[Message] = []
    system = payload.get("system") or payload.get("instructions") or payload.get("systemInstructions")
    if isinstance(system, str):
        out.append(Message("system", [Part("text", _clip(system))]))
    elif isinstance(system, list):
        parts = (
            _semconv_parts(system) if any(isinstance(p, dict) and "content" in p for p in system) else None
        )
        out.append(Message("system", parts or _parts_of_blocks(content_blocks(system, ""))))
    if "inputMessages" in payload:
        return out + _semconv_messages(payload["inputMessages"])
    messages = payload.get("messages", payload.get("input"))
    if isinstance(messages, str):
        return out + [Message("user", [Part("text", _clip(messages))])]
    for message in messages if isinstance(messages, list) else []:
        if isinstance(message, dict):
            out.append(_chat_message(message))
    for key in ("prompt", "user", "text"):
        if len(out) <= 1 and isinstance(payload.get(key), str):
            out.append(Message("user", [Part("text", _clip(payload[key]))]))
    return out


def output_messages(payload: Any) -> list[Message]:
    """A model response's output as assistant messages."""
    if isinstance(payload, dict) and "outputMessages" in payload:
        return _semconv_messages(payload["outputMessages"])
    parts = _parts_of_blocks(response_blocks(payload, ""))
    return [Message("assistant", parts)] if parts else []


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _apply_response(call: ModelCall, seq: int, event: dict[str, Any]) -> None:
    call.response_seq = seq
    call.provider = call.provider or str(event.get("provider") or "")
    call.model = str(event.get("model") or call.model)
    call.output = output_messages(event.get("payload"))
    if not call.output and isinstance(event.get("summary"), str):
        call.output = [Message("assistant", [Part("text", _clip(event["summary"]))])]
    usage: dict[str, Any] = event["usage"] if isinstance(event.get("usage"), dict) else {}
    call.input_tokens, call.output_tokens = _int(usage.get("inputTokens")), _int(usage.get("outputTokens"))
    call.cached_tokens = _int(usage.get("cachedInputTokens"))
    total = _int(usage.get("totalTokens"))
    if total is None and (call.input_tokens is not None or call.output_tokens is not None):
        total = (call.input_tokens or 0) + (call.output_tokens or 0)
    call.total_tokens = total
    cost = event.get("cost")
    if isinstance(cost, dict) and isinstance(cost.get("currency"), str):
        currency = cost["currency"].strip().upper()
        call.cost = f"{currency} {numbers.money(cost.get('amount'), currency)}"
        call.cost_exact = f"{currency} {numbers.plain(cost.get('amount'))}"
    duration = event.get("durationMs")
    if isinstance(duration, int | float) and not isinstance(duration, bool):
        call.duration_ms = float(duration)


def error_of(event: dict[str, Any]) -> str:
    """An ``error`` event's text: ``[CODE] message``."""
    message = str(event.get("message") or "")
    code = event.get("code")
    return f"[{code}] {message}" if isinstance(code, str) and code else message


def _label(event: dict[str, Any]) -> str:
    kind = str(event.get("type") or "")
    if kind == "model_io":
        return f"model {event.get('direction') or ''} · {event.get('model') or event.get('provider') or ''}".strip(
            " ·"
        )
    if kind == "tool_call":
        return f"tool call · {event.get('name') or ''}"
    if kind == "error":
        return f"error · {error_of(event)[:80]}"
    if kind in ("span_started", "span_ended"):
        return f"{kind.replace('_', ' ')} · {event.get('name') or event.get('spanId') or ''}"
    return kind.replace("_", " ")


def contents(events: list[tuple[int, dict[str, Any]]], *, truncated: bool = False) -> SpanContents:
    """The span's own model calls, tool calls, errors and events (a child span's are skipped)."""
    out = SpanContents(truncated=truncated)
    depth = 0
    open_calls: dict[str, ModelCall] = {}
    costs: dict[str, Any] = {}
    for seq, event in events:
        kind = event.get("type")
        if kind == "span_started":
            if depth == 0:
                out.children += 1
                out.events.append(EventLink(seq, str(kind), _label(event)))
            depth += 1
            continue
        if kind == "span_ended" and depth > 0:
            depth -= 1
            continue
        if depth > 0:
            continue
        out.events.append(EventLink(seq, str(kind), _label(event)))
        if kind == "model_io":
            key = str(event.get("correlationId") or "")
            direction = event.get("direction")
            if direction == "request":
                call = ModelCall(provider=str(event.get("provider") or ""), model=str(event.get("model") or ""),
                                 request_seq=seq, input=input_messages(event.get("payload")))  # fmt: skip
                if not call.input and isinstance(event.get("summary"), str):
                    call.input = [Message("user", [Part("text", _clip(event["summary"]))])]
                out.calls.append(call)
                open_calls[key] = call
            elif direction == "response":
                found = open_calls.pop(key, None)
                if found is not None:
                    call = found
                else:
                    call = ModelCall()
                    out.calls.append(call)
                _apply_response(call, seq, event)
                out.tokens += call.total_tokens or 0
                cost = event.get("cost")
                if isinstance(cost, dict) and isinstance(cost.get("currency"), str):
                    currency = cost["currency"].strip().upper()
                    held = numbers.decimal_of(cost.get("amount"))
                    if held is not None:
                        costs[currency] = costs.get(currency, 0) + held
        elif kind == "tool_call":
            result = _text(event["result"]) if "result" in event else None
            out.tools.append(
                ToolCall(seq, str(event.get("name") or "tool"), _text(event.get("args")), result)
            )
        elif kind == "error":
            out.errors.append((seq, error_of(event)))
        elif kind == "step_completed" and isinstance(event.get("error"), dict):
            out.errors.append((seq, error_of(event["error"])))
    out.cost = ", ".join(f"{cur} {numbers.money(amount, cur)}" for cur, amount in sorted(costs.items()))
    return out


def attribute_rows(
    attributes: Any, *, prefix: str = "", limit: int = MAX_ATTRIBUTES
) -> list[tuple[str, str]]:
    """Attributes as (dotted key, value text) rows, nested objects flattened, at most ``limit``."""
    rows: list[tuple[str, str]] = []

    def walk(value: Any, key: str) -> None:
        if len(rows) >= limit:
            return
        if isinstance(value, dict) and value:
            for name in sorted(value):
                walk(value[name], f"{key}.{name}" if key else str(name))
            return
        if isinstance(value, str):
            rows.append((key, _clip(value)))
        else:
            rows.append((key, json.dumps(value, ensure_ascii=False, default=str)))

    walk(attributes, prefix)
    return rows
