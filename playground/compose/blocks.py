"""Building blocks both providers' requests are made of: the new user message in canonical form
(document, cache marker, tool results, prompt), the checks every request passes, the sampling
parameters, the structured-output schema and the per-message flags."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from playground.compose.session import (
    EPHEMERAL,
    MAX_STOP_SEQUENCES,
    MAX_TOKENS_LIMIT,
    MIN_THINKING_BUDGET,
    OPERATION_TYPES,
    PDF,
    ComposeError,
    Document,
    ModelSpec,
    Session,
)


def fingerprint(block: Any) -> str:
    """Identity of a block's content for caching purposes (the cache marker itself excluded)."""
    if isinstance(block, dict):
        block = {k: v for k, v in block.items() if k != "cache_control"}
    text = json.dumps(block, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def document_block(doc: Document, *, citations: bool) -> dict:
    if doc.is_pdf:
        source = {"type": "base64", "media_type": PDF, "data": doc.data}
    else:
        source = {"type": "text", "media_type": "text/plain", "data": doc.data}
    block: dict = {"type": "document", "source": source, "title": doc.name}
    if citations:
        block["citations"] = {"enabled": True}
    return block


def output_tool_name(operation_type: str) -> str:
    return f"record_{operation_type}"


def pending_tool_uses(history: tuple[dict, ...]) -> list[dict]:
    """tool_use blocks of the last assistant message (each needs a tool_result next)."""
    if not history or history[-1]["role"] != "assistant" or not isinstance(history[-1]["content"], list):
        return []
    return [b for b in history[-1]["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]


def _tool_result_blocks(session: Session, output_tool: str | None) -> list[dict]:
    blocks = []
    for use in pending_tool_uses(session.history):
        if use["name"].startswith("record_") and use["name"][len("record_") :] in OPERATION_TYPES:
            content = "Recorded."  # the structured answer of a previous turn
        elif use["id"] in session.tool_results:
            content = session.tool_results[use["id"]]
        else:
            raise ComposeError(
                "tool_results", f"the tool call {use['name']} ({use['id']}) is waiting for a result"
            )
        blocks.append({"type": "tool_result", "tool_use_id": use["id"], "content": content})
    return blocks


def check_common(session: Session, model: ModelSpec) -> None:
    if session.mode == "stateless" and session.history:
        raise ComposeError(
            "history", "stateless mode sends no history: clear the conversation or switch to stateful"
        )
    if session.history and session.history[-1]["role"] != "assistant":
        raise ComposeError(
            "history", "the conversation must end with an assistant message before a new user turn"
        )
    adv = session.advanced
    if not 1 <= adv.max_tokens <= MAX_TOKENS_LIMIT:
        raise ComposeError("max_tokens", f"max tokens must be between 1 and {MAX_TOKENS_LIMIT:,}")
    if session.thinking and model.supports_thinking:
        if adv.thinking_budget < MIN_THINKING_BUDGET:
            raise ComposeError(
                "thinking_budget", f"the thinking budget must be at least {MIN_THINKING_BUDGET:,}"
            )
        if adv.thinking_budget >= adv.max_tokens:
            raise ComposeError("thinking_budget", "the thinking budget must be below max tokens")
    if adv.stop_enabled and len(adv.stop_sequences) > MAX_STOP_SEQUENCES:
        raise ComposeError("stop_sequences", f"at most {MAX_STOP_SEQUENCES} stop sequences")
    if session.document and session.send_file and session.document.is_pdf and not model.supports_pdf:
        raise ComposeError(
            "file", f"{model.model} does not read PDF files: send a text file or pick another model"
        )


def new_user_content(
    session: Session, model: ModelSpec, *, anthropic: bool, notes: list[str]
) -> tuple[Any, list]:
    """The new user message (canonical blocks) and the fingerprints it marks for caching."""
    blocks: list[dict] = list(_tool_result_blocks(session, None))
    keys: list[str] = []
    if session.document is not None and session.send_file:
        citations = session.citations and anthropic and model.supports_citations
        if session.citations and not citations:
            notes.append("citations: not sent (only Anthropic document blocks support them)")
        block = document_block(session.document, citations=citations)
        key = fingerprint(block)
        if anthropic and (session.create_cache or key in session.cached):
            block["cache_control"] = dict(EPHEMERAL)
            keys.append(key)
        blocks.append(block)
    elif session.citations:
        notes.append("citations: not sent (no file is sent with this message)")
    if session.prompt.strip():
        blocks.append({"type": "text", "text": session.prompt})
    elif not blocks or all(b["type"] == "document" for b in blocks):
        raise ComposeError("prompt", "write a prompt")
    if len(blocks) == 1 and blocks[0]["type"] == "text":
        return session.prompt, keys
    return blocks, keys


def object_schema(schema: dict) -> dict:
    out = {k: v for k, v in schema.items() if k not in ("$schema", "title")}
    out.setdefault("type", "object")
    return out


def apply_sampling(request: dict, session: Session, thinking: bool, notes: list[str], *, top_k: bool) -> None:
    adv = session.advanced
    if adv.temperature.enabled:
        if thinking:
            notes.append("temperature: not sent (not allowed together with thinking)")
        else:
            request["temperature"] = adv.temperature.value
    if adv.top_p.enabled:
        if thinking and adv.top_p.value < 0.95:
            notes.append("top_p: not sent (with thinking it must be between 0.95 and 1)")
        else:
            request["top_p"] = adv.top_p.value
    if adv.top_k.enabled:
        if not top_k:
            notes.append("top_k: not sent (Chat Completions has no top_k)")
        elif thinking:
            notes.append("top_k: not sent (not allowed together with thinking)")
        else:
            request["top_k"] = int(adv.top_k.value)


def message_flags(session: Session, system_sent: bool, thinking: bool) -> dict:
    return {
        "mode": session.mode,
        "operation_type": session.operation_type,
        "system_prompt": system_sent,
        "file": bool(session.document is not None and session.send_file),
        "create_cache": session.create_cache,
        "thinking": thinking,
        "citations": session.citations,
        "tool_use": session.tool_use and bool(session.tools),
    }
