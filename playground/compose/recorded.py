"""Restoring a recorded request ("open in playground"): a provider request body -> the session
that recomposes to it, as far as the toggles can express it.

(Which configured model the restored session runs on is ``playground.restore``'s business.)"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import replace
from typing import Any

from playground.compose.session import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_THINKING_BUDGET,
    OPERATION_TYPES,
    PDF,
    Advanced,
    ComposeError,
    Document,
    Override,
    Session,
    Tool,
)


def _split_system(system: Any) -> tuple[str, bool]:
    if system is None:
        return "", False
    if isinstance(system, str):
        return system, False
    texts = [b.get("text", "") for b in system if isinstance(b, dict) and b.get("type") == "text"]
    instruction = [t for t in texts if t.startswith("Give your final answer by calling the record_")]
    texts = [t for t in texts if t not in instruction]
    cached = any("cache_control" in b for b in system if isinstance(b, dict))
    return "\n\n".join(texts), cached


def session_from_anthropic_request(request: dict) -> tuple[Session, dict]:
    """A session that recomposes to the recorded request (as far as the toggles can express
    it): history = all messages but the last, the last user message gives prompt and file."""
    messages = list(request.get("messages") or [])
    if not messages or messages[-1].get("role") != "user":
        raise ComposeError("messages", "the recorded request does not end with a user message")
    last = messages[-1]["content"]
    prompt = ""
    document = None
    citations = False
    cache = False
    tool_results: dict[str, str] = {}
    if isinstance(last, str):
        prompt = last
    else:
        for block in last:
            kind = block.get("type")
            if kind == "text":
                prompt = block.get("text", "")
            elif kind == "document":
                src = block.get("source", {})
                media = PDF if src.get("type") == "base64" else src.get("media_type", "text/plain")
                document = Document(block.get("title") or "document", media, src.get("data", ""))
                citations = bool((block.get("citations") or {}).get("enabled"))
                cache = cache or "cache_control" in block
            elif kind == "tool_result":
                content = block.get("content")
                tool_results[block["tool_use_id"]] = (
                    content if isinstance(content, str) else json.dumps(content)
                )
    system_text, system_cached = _split_system(request.get("system"))
    thinking = request.get("thinking") or {}
    tools = request.get("tools") or []
    output_tools = [t for t in tools if t.get("name", "").startswith("record_")]
    op = "generic"
    if output_tools and output_tools[0]["name"][len("record_") :] in OPERATION_TYPES:
        op = output_tools[0]["name"][len("record_") :]
    user_tools = tuple(
        Tool(t["name"], t.get("description", ""), t.get("input_schema", {"type": "object"}))
        for t in tools
        if t not in output_tools
    )
    adv = Advanced(
        max_tokens=int(request.get("max_tokens", DEFAULT_MAX_TOKENS)),
        thinking_budget=int(thinking.get("budget_tokens", DEFAULT_THINKING_BUDGET)),
        temperature=Override("temperature" in request, float(request.get("temperature", 1.0))),
        top_p=Override("top_p" in request, float(request.get("top_p", 1.0))),
        top_k=Override("top_k" in request, int(request.get("top_k", 40))),
        stop_enabled="stop_sequences" in request,
        stop_sequences=tuple(request.get("stop_sequences") or ()),
    )
    session = Session(
        prompt=prompt,
        mode="stateful" if len(messages) > 1 else "stateless",
        system_prompt=system_text,
        send_system_prompt=bool(system_text),
        document=document,
        send_file=document is not None,
        create_cache=cache or system_cached,
        thinking=thinking.get("type") == "enabled",
        citations=citations,
        tool_use=bool(user_tools),
        tools=user_tools,
        operation_type=op,
        advanced=adv,
        history=tuple(copy.deepcopy(messages[:-1])),
        tool_results=tool_results,
    )
    return session, {"model": request.get("model", "")}


_DOC_TEXT = re.compile(r'<document title="(?P<title>[^"]*)">\n(?P<data>.*)\n</document>', re.DOTALL)


def _text_or_document(text: str) -> dict:
    """A text part that carries a text document (as compose_openai writes it) becomes the document again."""
    match = _DOC_TEXT.fullmatch(text)
    if match is None:
        return {"type": "text", "text": text}
    return {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": match["data"]},
        "title": match["title"],
    }


def session_from_openai_request(request: dict) -> tuple[Session, dict]:
    """Chat Completions request -> session; the history stays in canonical (Anthropic) form."""
    messages = list(request.get("messages") or [])
    system_text = ""
    if messages and messages[0].get("role") in ("system", "developer"):
        system_text = str(messages.pop(0).get("content") or "")
    anthropic_like = _anthropic_like(request, system_text, _canonical_messages(messages))
    session, extra = session_from_anthropic_request(anthropic_like)
    fmt = (request.get("response_format") or {}).get("json_schema") or {}
    name = str(fmt.get("name", ""))
    if name.startswith("playground_") and name[len("playground_") :] in OPERATION_TYPES:
        session = replace(session, operation_type=name[len("playground_") :])
    effort = request.get("reasoning_effort")
    if effort:
        budget = {"low": 2048, "medium": 8192}.get(effort, 16384)
        session = replace(session, thinking=True, advanced=replace(session.advanced, thinking_budget=budget))
    return session, extra


def _canonical_messages(messages: list[dict]) -> list[dict]:
    """Chat Completions messages (system prompt taken off) -> the canonical conversation."""
    canonical: list[dict] = []
    for msg in messages:
        role = msg.get("role")
        content = msg.get("content")
        if role == "assistant":
            canonical.append(_assistant_message(msg))
        elif role == "tool":
            block = {"type": "tool_result", "tool_use_id": msg.get("tool_call_id"), "content": content or ""}
            _add_user_content(canonical, [block])
        elif role == "user":
            _add_user_content(canonical, _user_parts(content) if isinstance(content, list) else content)
    return canonical


def _assistant_message(msg: dict) -> dict:
    """An assistant message: its text and its tool calls as tool_use blocks."""
    content = msg.get("content")
    blocks: list[dict] = []
    if content:
        blocks.append({"type": "text", "text": content if isinstance(content, str) else json.dumps(content)})
    for call in msg.get("tool_calls") or []:
        fn = call.get("function", {})
        try:
            args = json.loads(fn.get("arguments") or "{}")
        except ValueError:
            args = {"raw": fn.get("arguments")}
        blocks.append({"type": "tool_use", "id": call.get("id"), "name": fn.get("name"), "input": args})
    return {"role": "assistant", "content": blocks if msg.get("tool_calls") else (content or "")}


def _add_user_content(canonical: list[dict], content: Any) -> None:
    """Tool results and the user message after them are one canonical user message."""
    if canonical and canonical[-1]["role"] == "user" and isinstance(canonical[-1]["content"], list):
        extra = content if isinstance(content, list) else [{"type": "text", "text": content}]
        canonical[-1]["content"].extend(extra)
    else:
        canonical.append({"role": "user", "content": content})


def _user_parts(content: list) -> list[dict]:
    """User content parts -> canonical blocks (text, text documents, PDF files)."""
    parts = []
    for p in content:
        if p.get("type") == "text":
            parts.append(_text_or_document(p.get("text", "")))
        elif p.get("type") == "file":
            data = str(p.get("file", {}).get("file_data", ""))
            parts.append(
                {
                    "type": "document",
                    "source": {"type": "base64", "media_type": PDF, "data": data.split(",", 1)[-1]},
                    "title": p.get("file", {}).get("filename") or "document.pdf",
                }
            )
    return parts


def _anthropic_like(request: dict, system_text: str, canonical: list[dict]) -> dict:
    """The Messages request the Chat Completions one stands for (settings, tools, conversation)."""
    anthropic_like: dict = {"model": request.get("model", ""), "messages": canonical}
    if system_text:
        anthropic_like["system"] = system_text
    max_tokens = request.get("max_completion_tokens", request.get("max_tokens", DEFAULT_MAX_TOKENS))
    anthropic_like["max_tokens"] = max_tokens
    for key in ("temperature", "top_p"):
        if key in request:
            anthropic_like[key] = request[key]
    if request.get("stop"):
        anthropic_like["stop_sequences"] = (
            request["stop"] if isinstance(request["stop"], list) else [request["stop"]]
        )
    if request.get("tools"):
        anthropic_like["tools"] = [
            {
                "name": t["function"]["name"],
                "description": t["function"].get("description", ""),
                "input_schema": t["function"].get("parameters", {"type": "object"}),
            }
            for t in request["tools"]
        ]
    return anthropic_like
