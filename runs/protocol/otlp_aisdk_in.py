"""The Vercel AI SDK's own OTel telemetry (``experimental_telemetry``) read into the common shape
(pure: no Django); :mod:`runs.protocol.otlp_semconv_in` asks these readers for any span that
carries ``ai.*`` attributes.

What the AI SDK (``ai`` 4 to 6) emits per call of ``generateText`` / ``streamText`` /
``generateObject`` / ``streamObject``: an outer span (``ai.generateText``: the whole call, its
steps' usage summed; a plain span here, so no call is counted twice) and one provider-call span
per step (``ai.generateText.doGenerate``, ``ai.streamText.doStream``, ...: the model call, with
``gen_ai.system`` / ``gen_ai.request.model`` / ``gen_ai.usage.*`` beside ``ai.model.provider``,
``ai.prompt.messages``, ``ai.response.text``, ``ai.response.toolCalls``, ``ai.usage.*``), and an
``ai.toolCall`` span per tool it ran (``ai.toolCall.name`` / ``args`` / ``result``). Provider ids
such as ``openai.chat`` or ``anthropic.messages`` are priced as ``openai`` / ``anthropic``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

MODEL_OPERATIONS = frozenset(
    {
        "ai.generateText.doGenerate",
        "ai.streamText.doStream",
        "ai.generateObject.doGenerate",
        "ai.streamObject.doStream",
        "ai.embed.doEmbed",
        "ai.embedMany.doEmbed",
    }
)
TOOL_OPERATION = "ai.toolCall"
# content on AI SDK spans: it goes to the model_io / tool_call events, not to span_started
CONTENT_KEYS = frozenset(
    {
        "ai.prompt",
        "ai.prompt.messages",
        "ai.prompt.tools",
        "ai.response.text",
        "ai.response.toolCalls",
        "ai.response.object",
        "ai.response.reasoning",
        "ai.toolCall.args",
        "ai.toolCall.result",
    }
)


def _json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


def operation(attrs: Mapping[str, Any]) -> str | None:
    """The AI SDK operation of a span (``ai.generateText.doGenerate`` ...), None for other spans."""
    found = attrs.get("ai.operationId")
    if isinstance(found, str) and found.startswith("ai."):
        return found
    name = attrs.get("operation.name")
    if isinstance(name, str) and name.startswith("ai."):
        return name.split(" ", 1)[0]
    return None


def role(attrs: Mapping[str, Any]) -> str | None:
    """``model``, ``tool`` or ``span`` for an AI SDK span; None when the span is not one."""
    found = operation(attrs)
    if found is None:
        return None
    if found in MODEL_OPERATIONS:
        return "model"
    if found == TOOL_OPERATION:
        return "tool"
    return "span"


def provider(attrs: Mapping[str, Any]) -> str | None:
    """``openai.chat`` -> ``openai`` (the AI SDK names a provider and its API)."""
    found = attrs.get("ai.model.provider") or attrs.get("gen_ai.system")
    return str(found).split(".", 1)[0] if found else None


def _part(part: Mapping[str, Any]) -> dict[str, Any] | None:
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "content": part.get("text", "")}
    if kind == "tool-call":
        return {
            "type": "tool_call",
            "id": part.get("toolCallId"),
            "name": part.get("toolName"),
            "arguments": _json(part.get("input", part.get("args"))),
        }
    if kind == "tool-result":
        output = part.get("output", part.get("result"))
        if isinstance(output, Mapping) and "value" in output:
            output = output["value"]
        return {"type": "tool_call_response", "id": part.get("toolCallId"), "response": output}
    return None


def input_messages(attrs: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """``ai.prompt.messages`` (the AI SDK's prompt) as 1.42 messages."""
    parsed = _json(attrs.get("ai.prompt.messages"))
    if not isinstance(parsed, list):
        return None
    out = []
    for message in parsed:
        if not isinstance(message, Mapping):
            continue
        content = message.get("content")
        if isinstance(content, str):
            parts = [{"type": "text", "content": content}]
        else:
            found = (_part(p) for p in content or () if isinstance(p, Mapping))
            parts = [p for p in found if p is not None]
        out.append({"role": str(message.get("role") or "user"), "parts": parts})
    return out


def output_messages(attrs: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """``ai.response.text`` / ``ai.response.object`` and ``ai.response.toolCalls`` as one message."""
    parts: list[dict[str, Any]] = []
    text = attrs.get("ai.response.text")
    if text is None and attrs.get("ai.response.object") is not None:
        text = attrs["ai.response.object"]
    if isinstance(text, str) and text:
        parts.append({"type": "text", "content": text})
    calls = _json(attrs.get("ai.response.toolCalls"))
    for call in calls if isinstance(calls, list) else ():
        if isinstance(call, Mapping) and call.get("toolName"):
            found = _part({"type": "tool-call", **call})
            if found is not None:
                parts.append(found)
    if not parts:
        return None
    message: dict[str, Any] = {"role": "assistant", "parts": parts}
    finish = attrs.get("ai.response.finishReason")
    if finish:
        message["finish_reason"] = finish
    return [message]


def usage_details(attrs: Mapping[str, Any]) -> tuple[int | None, int | None, int | None]:
    """(cache reads, reasoning tokens, cache writes) from ``ai.usage.*``."""

    def count(*keys: str) -> int | None:
        for key in keys:
            value = attrs.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
                return int(value)
        return None

    return (
        count("ai.usage.inputTokenDetails.cacheReadTokens", "ai.usage.cachedInputTokens"),
        count("ai.usage.outputTokenDetails.reasoningTokens", "ai.usage.reasoningTokens"),
        count("ai.usage.inputTokenDetails.cacheWriteTokens"),
    )


def usage_counts(attrs: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """(input, output) from ``ai.usage.*`` when the span has no ``gen_ai.usage.*``."""
    inp = attrs.get("ai.usage.inputTokens", attrs.get("ai.usage.promptTokens"))
    out = attrs.get("ai.usage.outputTokens", attrs.get("ai.usage.completionTokens"))
    return (
        int(inp) if isinstance(inp, int | float) and not isinstance(inp, bool) else None,
        int(out) if isinstance(out, int | float) and not isinstance(out, bool) else None,
    )


def tool(attrs: Mapping[str, Any]) -> tuple[str | None, Any, Any, bool]:
    """(name, args, result, has a result) of an ``ai.toolCall`` span."""
    has_result = "ai.toolCall.result" in attrs or "ai.toolCall.output" in attrs
    result = _json(attrs.get("ai.toolCall.result", attrs.get("ai.toolCall.output")))
    args = _json(attrs.get("ai.toolCall.args", attrs.get("ai.toolCall.input")))
    name = attrs.get("ai.toolCall.name")
    return (str(name) if name else None), args, result, has_result
