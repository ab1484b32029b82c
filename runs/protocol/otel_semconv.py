"""The OTel mapping's spans rewritten to the current GenAI semantic conventions (schema 1.42).

The reference's mapping (``runs.protocol.otel``) stays the default, for parity with the
reference. With this option a ``model_io`` span instead carries:

* ``gen_ai.provider.name`` (not the retired ``gen_ai.system``) and ``gen_ai.operation.name``
  ``chat``; the span is named ``chat <model>``;
* ``gen_ai.usage.input_tokens``: the whole prompt, cache reads and writes included (the
  protocol's ``inputTokens`` is recorded that way), with ``gen_ai.usage.cache_read.input_tokens``
  from ``cachedInputTokens`` as a part of it, not an addition;
* ``gen_ai.usage.output_tokens``: all output, reasoning included (the protocol's convention),
  with ``gen_ai.usage.reasoning.output_tokens`` from ``reasoningTokens`` as a part of it.

* ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON text, the conventions' message
  shape ``{role, parts: [{type, ...}], finish_reason?}``) when the call's request event (same
  correlation id) and the response carry Anthropic Messages or OpenAI Chat Completions bodies
  as payload (what ``workbench_sdk.traced`` records).

No count is added to another, so a ledger built from either form never counts cached or
reasoning tokens twice. The protocol has no field for cache-creation tokens; they are not
invented here. Pure: no Django.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

MODEL_SPAN_PREFIX = "model-"


def to_current_conventions(
    records: list[dict[str, Any]], events: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """New span records (the input is not changed) with model spans in the 1.42 conventions."""
    events = list(events)
    model_events = {e.get("id"): e for e in events if e.get("type") == "model_io"}
    requests = {
        e["correlationId"]: e
        for e in events
        if e.get("type") == "model_io" and e.get("direction") == "request" and e.get("correlationId")
    }
    out = []
    for record in records:
        span_id = record.get("spanId", "")
        event = (
            model_events.get(span_id[len(MODEL_SPAN_PREFIX) :])
            if span_id.startswith(MODEL_SPAN_PREFIX)
            else None
        )
        if event is None:
            out.append(record)
            continue
        attributes = dict(record["attributes"])
        provider = attributes.pop("gen_ai.system", None)
        if provider is not None:
            attributes["gen_ai.provider.name"] = provider
        attributes["gen_ai.operation.name"] = "chat"
        usage = event.get("usage") or {}
        if isinstance(usage.get("cachedInputTokens"), int):
            attributes["gen_ai.usage.cache_read.input_tokens"] = usage["cachedInputTokens"]
        if isinstance(usage.get("reasoningTokens"), int):
            attributes["gen_ai.usage.reasoning.output_tokens"] = usage["reasoningTokens"]
        request = requests.get(event.get("correlationId") or "")
        inputs = input_messages((request or {}).get("payload"))
        outputs = output_messages(event.get("payload"))
        if inputs:
            attributes["gen_ai.input.messages"] = json.dumps(
                inputs, ensure_ascii=False, separators=(",", ":")
            )
        if outputs:
            attributes["gen_ai.output.messages"] = json.dumps(
                outputs, ensure_ascii=False, separators=(",", ":")
            )
        model = event.get("model")
        out.append({**record, "name": f"chat {model}" if model else "chat", "attributes": attributes})
    return out


def _parts(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, Mapping):
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append({"type": "text", "content": block.get("text", "")})
        elif kind == "tool_use":
            parts.append(
                {
                    "type": "tool_call",
                    "id": block.get("id"),
                    "name": block.get("name"),
                    "arguments": block.get("input"),
                }
            )
        elif kind == "tool_result":
            parts.append(
                {
                    "type": "tool_call_response",
                    "id": block.get("tool_use_id"),
                    "response": block.get("content"),
                }
            )
        elif kind == "thinking":
            parts.append({"type": "reasoning", "content": block.get("thinking", "")})
        else:
            parts.append({"type": str(kind or "unknown")})
    return parts


def _openai_tool_calls(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    out = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        arguments = function.get("arguments")
        try:
            arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError:
            pass
        out.append(
            {"type": "tool_call", "id": call.get("id"), "name": function.get("name"), "arguments": arguments}
        )
    return out


def input_messages(body: Any) -> list[dict[str, Any]]:
    """The conventions' input messages of an Anthropic or OpenAI request body ([] when unknown)."""
    if not isinstance(body, Mapping) or not isinstance(body.get("messages"), list):
        return []
    out = []
    system = body.get("system")
    if system:
        out.append({"role": "system", "parts": _parts(system)})
    for message in body["messages"]:
        if not isinstance(message, Mapping):
            continue
        role = message.get("role", "user")
        parts = _parts(message.get("content"))
        parts += _openai_tool_calls(message)
        if role == "tool":
            parts = [
                {
                    "type": "tool_call_response",
                    "id": message.get("tool_call_id"),
                    "response": message.get("content"),
                }
            ]
        out.append({"role": role, "parts": parts})
    return out


def output_messages(body: Any) -> list[dict[str, Any]]:
    """The conventions' output messages of an Anthropic Message or OpenAI ChatCompletion ([] when unknown)."""
    if not isinstance(body, Mapping):
        return []
    if isinstance(body.get("content"), list) and body.get("role") == "assistant":
        message = {"role": "assistant", "parts": _parts(body["content"])}
        if body.get("stop_reason"):
            message["finish_reason"] = body["stop_reason"]
        return [message]
    out = []
    for choice in body.get("choices") or []:
        if not isinstance(choice, Mapping) or not isinstance(choice.get("message"), Mapping):
            continue
        message = choice["message"]
        parts = _parts(message.get("content")) if message.get("content") else []
        parts += _openai_tool_calls(message)
        entry = {"role": message.get("role", "assistant"), "parts": parts}
        if choice.get("finish_reason"):
            entry["finish_reason"] = choice["finish_reason"]
        out.append(entry)
    return out
