"""Anthropic Messages: the session -> the exact ``messages.create`` body.

The conversation is kept in the Anthropic form already, so it is sent as it is (thinking blocks
dropped while thinking is off); cache markers go on the system prompt and the document, at most
four per request."""

from __future__ import annotations

import copy
from typing import Any

from playground.compose.blocks import (
    apply_sampling,
    check_common,
    fingerprint,
    message_flags,
    new_user_content,
    object_schema,
    output_tool_name,
)
from playground.compose.session import (
    EPHEMERAL,
    MAX_CACHE_BREAKPOINTS,
    Composition,
    ModelSpec,
    Session,
)
from playground.compose.tokens import estimate_tokens, min_cacheable_tokens


def compose_anthropic(session: Session, model: ModelSpec, schema: dict | None = None) -> Composition:
    """The exact ``messages.create`` body for the session (``schema``: the operation's output
    schema; structured answers come back through a forced tool call carrying that schema)."""
    check_common(session, model)
    notes: list[str] = []
    adv = session.advanced
    thinking = session.thinking and model.supports_thinking
    if session.thinking and not thinking:
        notes.append(f"thinking: not sent ({model.model} does not support extended thinking)")
    structured = session.operation_type != "generic" and schema is not None
    output_tool = output_tool_name(session.operation_type) if structured else None
    keys: list[str] = []

    system = _system(session, output_tool, thinking, keys)
    system_text = session.system_prompt.strip()

    messages = _history(session, thinking)
    user_content, doc_keys = new_user_content(session, model, anthropic=True, notes=notes)
    keys.extend(doc_keys)
    messages.append({"role": "user", "content": copy.deepcopy(user_content)})
    _limit_breakpoints(system, messages, notes)

    request: dict = {"model": model.model, "max_tokens": adv.max_tokens}
    if system is not None:
        request["system"] = system
    request["messages"] = messages
    if thinking:
        request["thinking"] = {"type": "enabled", "budget_tokens": adv.thinking_budget}
    apply_sampling(request, session, thinking, notes, top_k=True)
    if adv.stop_enabled and adv.stop_sequences:
        request["stop_sequences"] = list(adv.stop_sequences)
    _tools(request, session, output_tool, schema, thinking, notes)
    _cache_size_note(request, model, notes)
    return Composition(
        provider="anthropic",
        request=request,
        user_content=user_content,
        notes=tuple(notes),
        flags=message_flags(
            session, system is not None and session.send_system_prompt and bool(system_text), thinking
        ),
        cache_keys=tuple(keys),
        output_tool=output_tool,
    )


def _system(session: Session, output_tool: str | None, thinking: bool, keys: list[str]) -> Any:
    """The ``system`` value (None: none is sent): the prompt, as a marked block when it is cached
    (its fingerprint joins ``keys``), and the output-tool instruction when thinking forbids a
    forced tool choice."""
    system: Any = None
    system_text = session.system_prompt.strip()
    if session.send_system_prompt and system_text:
        block: dict[str, Any] = {"type": "text", "text": session.system_prompt}
        key = fingerprint(block)
        if session.create_cache or key in session.cached:
            block["cache_control"] = dict(EPHEMERAL)
            keys.append(key)
            system = [block]
        else:
            system = session.system_prompt
    if output_tool is not None and thinking:
        # Forced tool choice is refused together with thinking: ask for the tool instead.
        instruction = {
            "type": "text",
            "text": f"Give your final answer by calling the {output_tool} tool once.",
        }
        if system is None:
            system = [instruction]
        elif isinstance(system, str):
            system = [{"type": "text", "text": system}, instruction]
        else:
            system = [*system, instruction]
    return system


def _history(session: Session, thinking: bool) -> list[dict]:
    """The conversation so far as sent (stateful only; thinking blocks dropped without thinking)."""
    messages: list[dict] = []
    if session.mode == "stateful":
        for msg in session.history:
            content = copy.deepcopy(msg["content"])
            if msg["role"] == "assistant" and not thinking:
                content = _strip_thinking(content)
            messages.append({"role": msg["role"], "content": content})
    return messages


def _tools(
    request: dict,
    session: Session,
    output_tool: str | None,
    schema: dict | None,
    thinking: bool,
    notes: list[str],
) -> None:
    """The user's tools and the structured-output tool (with the tool choice that forces it)."""
    tools: list[dict] = []
    if session.tool_use:
        if not session.tools:
            notes.append("tools: tool use is on but no tool is defined")
        tools.extend(
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in session.tools
        )
    if output_tool is not None:
        assert schema is not None
        tools.append(
            {
                "name": output_tool,
                "description": f"Record the {session.operation_type} result. Call it exactly once with the answer.",
                "input_schema": object_schema(schema),
            }
        )
        request["tool_choice"] = {"type": "auto"} if thinking else {"type": "tool", "name": output_tool}
    if tools:
        request["tools"] = tools


def _limit_breakpoints(system: Any, messages: list[dict], notes: list[str]) -> None:
    """Anthropic accepts at most four cache breakpoints: drop the oldest markers in the history."""
    positions: list[dict] = []
    for msg in messages:
        if isinstance(msg["content"], list):
            positions.extend(b for b in msg["content"] if isinstance(b, dict) and "cache_control" in b)
    system_marks = sum(1 for b in system if "cache_control" in b) if isinstance(system, list) else 0
    excess = system_marks + len(positions) - MAX_CACHE_BREAKPOINTS
    if excess > 0:
        for block in positions[:excess]:
            del block["cache_control"]
        notes.append(
            f"cache: {excess} older cache marker(s) removed (at most {MAX_CACHE_BREAKPOINTS} per request)"
        )


def _strip_thinking(content: Any) -> Any:
    if not isinstance(content, list):
        return content
    kept = [
        b for b in content if not (isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking"))
    ]
    return kept if kept else ""


def _cache_size_note(request: dict, model: ModelSpec, notes: list[str]) -> None:
    """Warn when the longest prefix marked for caching is below the provider's minimum."""
    sequence: list[Any] = [*request.get("tools", [])]
    system = request.get("system")
    sequence.extend(system if isinstance(system, list) else [system] if system else [])
    for msg in request["messages"]:
        sequence.extend(msg["content"] if isinstance(msg["content"], list) else [msg["content"]])
    prefix = longest = 0
    for item in sequence:
        prefix += estimate_tokens(item)
        if isinstance(item, dict) and "cache_control" in item:
            longest = prefix
    minimum = min_cacheable_tokens(model)
    if longest and longest < minimum:
        notes.append(
            f"cache: the marked prefix is about {longest:,} tokens; {model.model} caches from "
            f"{minimum:,} tokens, so this request will not create or read a cache"
        )
