"""OpenAI Chat Completions (and every OpenAI-compatible server): the session -> the exact
``chat.completions.create`` body.

The canonical (Anthropic-form) conversation is translated deterministically into Chat
Completions messages, so the prefix is identical from one turn to the next and the server's
automatic prefix cache hits."""

from __future__ import annotations

import json
from typing import Any

from playground.compose.blocks import (
    apply_sampling,
    check_common,
    message_flags,
    new_user_content,
    object_schema,
)
from playground.compose.session import PDF, Composition, ModelSpec, Session
from playground.compose.tokens import estimate_tokens, min_cacheable_tokens


def _openai_user_parts(content: Any) -> tuple[list[dict], Any]:
    """Canonical user content -> (tool messages, Chat Completions user content or None)."""
    if isinstance(content, str):
        return [], content
    tool_msgs: list[dict] = []
    parts: list[dict] = []
    for block in content:
        kind = block.get("type")
        if kind == "tool_result":
            result = block.get("content")
            if isinstance(result, list):
                result = "".join(b.get("text", "") for b in result if isinstance(b, dict))
            tool_msgs.append(
                {"role": "tool", "tool_call_id": block["tool_use_id"], "content": str(result or "")}
            )
        elif kind == "text":
            parts.append({"type": "text", "text": block["text"]})
        elif kind == "document":
            source = block["source"]
            if source.get("type") == "base64":
                parts.append(
                    {
                        "type": "file",
                        "file": {
                            "filename": block.get("title") or "document.pdf",
                            "file_data": f"data:{source.get('media_type', PDF)};base64,{source['data']}",
                        },
                    }
                )
            else:
                title = block.get("title") or "document"
                parts.append(
                    {"type": "text", "text": f'<document title="{title}">\n{source["data"]}\n</document>'}
                )
    if not parts:
        return tool_msgs, None
    if len(parts) == 1 and parts[0]["type"] == "text":
        return tool_msgs, parts[0]["text"]
    return tool_msgs, parts


def _openai_assistant(content: Any) -> dict:
    if isinstance(content, str):
        return {"role": "assistant", "content": content}
    text = "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    msg: dict = {"role": "assistant", "content": text or None}
    calls = [
        {
            "id": b["id"],
            "type": "function",
            "function": {
                "name": b["name"],
                "arguments": json.dumps(b.get("input", {}), separators=(",", ":")),
            },
        }
        for b in content
        if isinstance(b, dict) and b.get("type") == "tool_use"
    ]
    if calls:
        msg["tool_calls"] = calls
    if msg["content"] is None and not calls:
        msg["content"] = ""
    return msg


def to_openai_messages(history: list[dict] | tuple[dict, ...]) -> list[dict]:
    """Canonical conversation -> Chat Completions messages (deterministic, so prefixes repeat)."""
    out: list[dict] = []
    for msg in history:
        if msg["role"] == "assistant":
            out.append(_openai_assistant(msg["content"]))
            continue
        tool_msgs, content = _openai_user_parts(msg["content"])
        out.extend(tool_msgs)
        if content is not None:
            out.append({"role": "user", "content": content})
    return out


def reasoning_effort(budget: int) -> str:
    if budget < 4096:
        return "low"
    if budget < 16384:
        return "medium"
    return "high"


def compose_openai(session: Session, model: ModelSpec, schema: dict | None = None) -> Composition:
    """The exact ``chat.completions.create`` body for the session."""
    check_common(session, model)
    notes: list[str] = []
    adv = session.advanced
    thinking = session.thinking and model.supports_thinking
    if session.thinking and not thinking:
        notes.append(f"thinking: not sent ({model.model} is not marked as a reasoning model)")
    if session.create_cache:
        notes.append(
            "cache: no markers are sent (OpenAI-compatible servers cache repeated prefixes themselves)"
        )

    structured = session.operation_type != "generic" and schema is not None

    messages: list[dict] = []
    system_text = session.system_prompt.strip()
    system_sent = session.send_system_prompt and bool(system_text)
    if system_sent:
        messages.append({"role": "system", "content": session.system_prompt})
    if session.mode == "stateful":
        messages.extend(to_openai_messages(session.history))
    user_content, _ = new_user_content(session, model, anthropic=False, notes=notes)
    messages.extend(to_openai_messages([{"role": "user", "content": user_content}]))

    request: dict = {"model": model.model, "messages": messages, model.max_tokens_param: adv.max_tokens}
    if session.create_cache:
        prompt_tokens = estimate_tokens(messages)
        minimum = min_cacheable_tokens(model)
        if prompt_tokens < minimum:
            notes.append(
                f"cache: this prompt is about {prompt_tokens:,} tokens; {model.model} caches prompts "
                f"from {minimum:,} tokens, so nothing will be cached"
            )
    if thinking:
        effort = reasoning_effort(adv.thinking_budget)
        request["reasoning_effort"] = effort
        notes.append(f"thinking: budget {adv.thinking_budget:,} sent as reasoning_effort={effort}")
    apply_sampling(request, session, thinking, notes, top_k=False)
    if adv.stop_enabled and adv.stop_sequences:
        request["stop"] = list(adv.stop_sequences)
    if session.tool_use and session.tools:
        request["tools"] = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
            }
            for t in session.tools
        ]
    elif session.tool_use:
        notes.append("tools: tool use is on but no tool is defined")
    if structured:
        assert schema is not None
        request["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": f"playground_{session.operation_type}",
                "schema": object_schema(schema),
                "strict": False,
            },
        }
    return Composition(
        provider="openai",
        request=request,
        user_content=user_content,
        notes=tuple(notes),
        flags=message_flags(session, system_sent, thinking),
        cache_keys=(),
        output_tool=None,
    )
