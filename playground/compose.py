"""Prompt composition: a playground session's toggles -> the exact provider request.

Pure functions over plain data (no Django, no SDK, no network). The session is what the page
holds: mode, prompts, the file, the toggles, the advanced settings and the conversation so far.
The conversation is kept in one canonical form, the Anthropic Messages content blocks exactly as
they were sent (documents, cache markers, tool results), so replaying it reproduces the same
prefix and the provider's cache hits. ``compose_anthropic`` sends that form as it is;
``compose_openai`` translates it deterministically into Chat Completions messages, so the prefix
is identical from one turn to the next there too.

Smart behaviours of the advanced settings (raise max tokens when thinking needs room, keep the
budget below max tokens, minimum budget, temperature locked while thinking, at most four stop
sequences, stateless mode clears the history, "create cache" turns itself off after a send) are
``apply_change`` and ``after_send``: the page asks the server to apply each change, so the rules
live here once.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

OPERATION_TYPES = ("generic", "validation", "extraction", "rating", "classification", "analysis")
MODES = ("stateful", "stateless")
PROVIDER_KINDS = ("anthropic", "openai")
EPHEMERAL = {"type": "ephemeral"}

MAX_CACHE_BREAKPOINTS = 4
MIN_THINKING_BUDGET = 1024
THINKING_HEADROOM = 1000
THINKING_MAX_TOKENS = 16000
MAX_STOP_SEQUENCES = 4
MAX_TOKENS_LIMIT = 200_000
DEFAULT_MAX_TOKENS = 4096
DEFAULT_THINKING_BUDGET = 10_000
TEXT_MEDIA_TYPES = ("text/plain", "text/markdown", "text/csv", "text/html", "application/json")
PDF = "application/pdf"


class ComposeError(ValueError):
    """The session cannot be turned into a request; ``field`` names the setting to fix."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


# --------------------------------------------------------------------------------------------
# Session


@dataclass(frozen=True)
class Override:
    """An optional parameter: sent only while ``enabled``."""

    enabled: bool = False
    value: float = 0.0


@dataclass(frozen=True)
class Advanced:
    max_tokens: int = DEFAULT_MAX_TOKENS
    thinking_budget: int = DEFAULT_THINKING_BUDGET
    temperature: Override = Override(False, 1.0)
    top_p: Override = Override(False, 1.0)
    top_k: Override = Override(False, 40)
    stop_enabled: bool = False
    stop_sequences: tuple[str, ...] = ()


@dataclass(frozen=True)
class Document:
    """An uploaded file: text as it is, PDF as base64."""

    name: str
    media_type: str
    data: str

    @property
    def is_pdf(self) -> bool:
        return self.media_type == PDF


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict


@dataclass(frozen=True)
class ModelSpec:
    """What composition needs to know about the selected model."""

    provider: str  # "anthropic" | "openai" (also every OpenAI-compatible server)
    model: str
    context_window: int | None = None
    supports_thinking: bool = True
    supports_citations: bool = True
    supports_pdf: bool = True
    max_tokens_param: str = "max_tokens"  # OpenAI's own models want "max_completion_tokens"


@dataclass(frozen=True)
class Session:
    prompt: str = ""
    mode: str = "stateful"
    system_prompt: str = ""
    send_system_prompt: bool = True
    document: Document | None = None
    send_file: bool = True
    create_cache: bool = False
    thinking: bool = False
    citations: bool = False
    tool_use: bool = False
    tools: tuple[Tool, ...] = ()
    operation_type: str = "generic"
    advanced: Advanced = field(default_factory=Advanced)
    history: tuple[dict, ...] = ()
    # Fingerprints of blocks a previous send marked for caching: sending them again keeps the
    # marker, so the request reads the cache instead of writing a new one.
    cached: frozenset[str] = frozenset()
    # Results for tool calls the last assistant message is waiting on: tool_use id -> text.
    tool_results: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Composition:
    provider: str
    request: dict  # the exact request body (without the streaming switch the provider adds)
    user_content: Any  # the new user message in canonical form, as it goes into the history
    notes: tuple[str, ...]  # what was not sent, and why
    flags: dict  # per-message metadata: mode and which toggles took effect
    cache_keys: tuple[str, ...] = ()  # fingerprints marked for caching in this request
    output_tool: str | None = None  # the tool that carries a structured answer (Anthropic)


# --------------------------------------------------------------------------------------------
# Session <-> JSON (what the page sends)


def _bool(data: dict, key: str, default: bool) -> bool:
    value = data.get(key, default)
    if not isinstance(value, bool):
        raise ComposeError(key, f"{key} must be true or false")
    return value


def _int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
        raise ComposeError(name, f"{name} must be an integer")
    return int(value)


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ComposeError(name, f"{name} must be a number")
    return float(value)


def _override(data: Any, name: str, default: Override, *, integer: bool = False) -> Override:
    if data is None:
        return default
    if not isinstance(data, dict):
        raise ComposeError(name, f"{name} must be an object {{enabled, value}}")
    enabled = _bool(data, "enabled", default.enabled)
    raw = data.get("value", default.value)
    value: float = _int(raw, name) if integer else _number(raw, name)
    return Override(enabled, value)


def advanced_from_json(data: Any) -> Advanced:
    if data is None:
        return Advanced()
    if not isinstance(data, dict):
        raise ComposeError("advanced", "advanced settings must be an object")
    base = Advanced()
    stops = data.get("stop_sequences", [])
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise ComposeError("stop_sequences", "stop sequences must be a list of strings")
    if len(stops) > MAX_STOP_SEQUENCES:
        raise ComposeError("stop_sequences", f"at most {MAX_STOP_SEQUENCES} stop sequences")
    return Advanced(
        max_tokens=_int(data.get("max_tokens", base.max_tokens), "max_tokens"),
        thinking_budget=_int(data.get("thinking_budget", base.thinking_budget), "thinking_budget"),
        temperature=_override(data.get("temperature"), "temperature", base.temperature),
        top_p=_override(data.get("top_p"), "top_p", base.top_p),
        top_k=_override(data.get("top_k"), "top_k", base.top_k, integer=True),
        stop_enabled=_bool(data, "stop_enabled", False),
        stop_sequences=tuple(stops),
    )


def advanced_to_json(adv: Advanced) -> dict:
    def o(x: Override) -> dict:
        return {"enabled": x.enabled, "value": x.value}

    return {
        "max_tokens": adv.max_tokens,
        "thinking_budget": adv.thinking_budget,
        "temperature": o(adv.temperature),
        "top_p": o(adv.top_p),
        "top_k": {"enabled": adv.top_k.enabled, "value": int(adv.top_k.value)},
        "stop_enabled": adv.stop_enabled,
        "stop_sequences": list(adv.stop_sequences),
    }


def _document_from_json(data: Any) -> Document | None:
    if data is None:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("data"), str):
        raise ComposeError("file", "the file must be an object {name, media_type, data}")
    media_type = str(data.get("media_type") or "text/plain")
    if media_type != PDF and not (media_type.startswith("text/") or media_type in TEXT_MEDIA_TYPES):
        raise ComposeError("file", f"only text files and PDFs can be sent (got {media_type})")
    return Document(name=str(data.get("name") or "document"), media_type=media_type, data=data["data"])


def _tools_from_json(data: Any) -> tuple[Tool, ...]:
    if not data:
        return ()
    if not isinstance(data, list):
        raise ComposeError("tools", "tools must be a list")
    tools = []
    names = set()
    for i, item in enumerate(data):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"].strip():
            raise ComposeError("tools", f"tool {i + 1} needs a name")
        schema = item.get("input_schema", {"type": "object", "properties": {}})
        if not isinstance(schema, dict) or schema.get("type") != "object":
            raise ComposeError(
                "tools", f"tool {item['name']}: input_schema must be a JSON Schema of type object"
            )
        if item["name"] in names:
            raise ComposeError("tools", f"tool {item['name']} is defined twice")
        names.add(item["name"])
        tools.append(Tool(item["name"].strip(), str(item.get("description") or ""), schema))
    return tuple(tools)


def _history_from_json(data: Any) -> tuple[dict, ...]:
    if not data:
        return ()
    if not isinstance(data, list):
        raise ComposeError("history", "history must be a list of messages")
    out = []
    for i, msg in enumerate(data):
        if not isinstance(msg, dict) or msg.get("role") not in ("user", "assistant"):
            raise ComposeError("history", f"history[{i}] needs role user or assistant")
        content = msg.get("content")
        if not isinstance(content, str | list):
            raise ComposeError("history", f"history[{i}].content must be text or a list of content blocks")
        out.append({"role": msg["role"], "content": copy.deepcopy(content)})
    return tuple(out)


def session_from_json(data: dict) -> Session:
    """Parse (and check) the session the page sends; errors name the field to fix."""
    if not isinstance(data, dict):
        raise ComposeError("session", "the session must be a JSON object")
    mode = data.get("mode", "stateful")
    if mode not in MODES:
        raise ComposeError("mode", "mode is stateful or stateless")
    op = data.get("operation_type", "generic")
    if op not in OPERATION_TYPES:
        raise ComposeError("operation_type", f"unknown operation type {op!r}")
    cached = data.get("cached") or []
    results = data.get("tool_results") or {}
    if not isinstance(results, dict) or not all(isinstance(v, str) for v in results.values()):
        raise ComposeError("tool_results", "tool results map a tool call id to text")
    return Session(
        prompt=str(data.get("prompt") or ""),
        mode=mode,
        system_prompt=str(data.get("system_prompt") or ""),
        send_system_prompt=_bool(data, "send_system_prompt", True),
        document=_document_from_json(data.get("file")),
        send_file=_bool(data, "send_file", True),
        create_cache=_bool(data, "create_cache", False),
        thinking=_bool(data, "thinking", False),
        citations=_bool(data, "citations", False),
        tool_use=_bool(data, "tool_use", False),
        tools=_tools_from_json(data.get("tools")),
        operation_type=op,
        advanced=advanced_from_json(data.get("advanced")),
        history=_history_from_json(data.get("history")),
        cached=frozenset(str(c) for c in cached),
        tool_results={str(k): v for k, v in results.items()},
    )


def session_to_json(session: Session) -> dict:
    doc = session.document
    return {
        "prompt": session.prompt,
        "mode": session.mode,
        "system_prompt": session.system_prompt,
        "send_system_prompt": session.send_system_prompt,
        "file": None if doc is None else {"name": doc.name, "media_type": doc.media_type, "data": doc.data},
        "send_file": session.send_file,
        "create_cache": session.create_cache,
        "thinking": session.thinking,
        "citations": session.citations,
        "tool_use": session.tool_use,
        "tools": [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in session.tools
        ],
        "operation_type": session.operation_type,
        "advanced": advanced_to_json(session.advanced),
        "history": copy.deepcopy(list(session.history)),
        "cached": sorted(session.cached),
        "tool_results": dict(session.tool_results),
    }


# --------------------------------------------------------------------------------------------
# Smart behaviours


def clamp_budget(budget: int, max_tokens: int) -> int:
    """A thinking budget of at least 1,024 tokens that stays below max tokens when it can."""
    return max(MIN_THINKING_BUDGET, min(budget, max_tokens - 1))


def set_thinking(session: Session, on: bool) -> Session:
    """Thinking on: make room (max tokens >= budget + headroom, at least 16,000) and drop the
    temperature override, which providers refuse together with thinking."""
    if not on:
        return replace(session, thinking=False)
    adv = session.advanced
    budget = max(adv.thinking_budget, MIN_THINKING_BUDGET)
    max_tokens = adv.max_tokens
    if max_tokens < budget + THINKING_HEADROOM:
        max_tokens = min(MAX_TOKENS_LIMIT, max(THINKING_MAX_TOKENS, budget + THINKING_HEADROOM))
    budget = clamp_budget(budget, max_tokens)
    adv = replace(
        adv,
        max_tokens=max_tokens,
        thinking_budget=budget,
        temperature=replace(adv.temperature, enabled=False),
    )
    return replace(session, thinking=True, advanced=adv)


def set_max_tokens(adv: Advanced, value: int) -> Advanced:
    """Max tokens within 1..200,000; a budget that no longer fits shrinks to max tokens - 1,000."""
    value = max(1, min(MAX_TOKENS_LIMIT, int(value)))
    budget = adv.thinking_budget
    if budget >= value:
        budget = max(MIN_THINKING_BUDGET, value - THINKING_HEADROOM)
    return replace(adv, max_tokens=value, thinking_budget=budget)


def set_thinking_budget(adv: Advanced, value: int) -> Advanced:
    return replace(adv, thinking_budget=clamp_budget(int(value), adv.max_tokens))


def add_stop_sequence(adv: Advanced, value: str) -> Advanced:
    if not value or value in adv.stop_sequences or len(adv.stop_sequences) >= MAX_STOP_SEQUENCES:
        return adv
    return replace(adv, stop_sequences=(*adv.stop_sequences, value))


def remove_stop_sequence(adv: Advanced, index: int) -> Advanced:
    seqs = list(adv.stop_sequences)
    if 0 <= index < len(seqs):
        del seqs[index]
    return replace(adv, stop_sequences=tuple(seqs))


def set_mode(session: Session, mode: str) -> Session:
    """Stateless clears the conversation (and pending tool results); stateful just switches."""
    if mode not in MODES:
        raise ComposeError("mode", "mode is stateful or stateless")
    if mode == "stateless":
        return replace(session, mode=mode, history=(), tool_results={})
    return replace(session, mode=mode)


def apply_change(session: Session, name: str, value: Any) -> Session:
    """One edit made on the page, with the behaviours that go with it."""
    adv = session.advanced
    match name:
        case "mode":
            return set_mode(session, value)
        case "thinking":
            return set_thinking(session, bool(value))
        case "max_tokens":
            return replace(session, advanced=set_max_tokens(adv, _int(value, name)))
        case "thinking_budget":
            return replace(session, advanced=set_thinking_budget(adv, _int(value, name)))
        case "temperature_enabled":
            if session.thinking:  # locked while thinking is on
                return session
            return replace(
                session, advanced=replace(adv, temperature=replace(adv.temperature, enabled=bool(value)))
            )
        case "temperature":
            v = min(1.0, max(0.0, _number(value, name)))
            return replace(session, advanced=replace(adv, temperature=replace(adv.temperature, value=v)))
        case "top_p_enabled":
            return replace(session, advanced=replace(adv, top_p=replace(adv.top_p, enabled=bool(value))))
        case "top_p":
            v = min(1.0, max(0.0, _number(value, name)))
            return replace(session, advanced=replace(adv, top_p=replace(adv.top_p, value=v)))
        case "top_k_enabled":
            return replace(session, advanced=replace(adv, top_k=replace(adv.top_k, enabled=bool(value))))
        case "top_k":
            return replace(
                session, advanced=replace(adv, top_k=replace(adv.top_k, value=max(0, _int(value, name))))
            )
        case "stop_enabled":
            return replace(session, advanced=replace(adv, stop_enabled=bool(value)))
        case "add_stop_sequence":
            return replace(session, advanced=add_stop_sequence(adv, str(value)))
        case "remove_stop_sequence":
            return replace(session, advanced=remove_stop_sequence(adv, _int(value, name)))
        case "reset_advanced":
            return replace(session, advanced=Advanced())
        case "clear":
            return replace(session, history=(), tool_results={})
        case _:
            raise ComposeError(name, f"unknown setting {name!r}")


MAX_COMPARE_COLUMNS = 5
COLUMN_FIELDS = ("system_prompt", "prompt", "temperature", "top_p", "top_k", "max_tokens", "thinking")


def with_overrides(session: Session, column: Any) -> Session:
    """One compare column: the session with the column's own prompt, system prompt or sampling
    parameters. Absent (or null) fields keep the session's value; a value given is sent (a
    sampling value turns its override on), after the same smart behaviours as the page's."""
    if not isinstance(column, dict):
        raise ComposeError("compare", "each compare column must be an object")
    unknown = sorted(set(column) - {*COLUMN_FIELDS, "model", "label"})
    if unknown:
        raise ComposeError("compare", f"unknown compare setting {unknown[0]!r}")
    given = {k: column[k] for k in COLUMN_FIELDS if column.get(k) is not None}
    if "system_prompt" in given:
        text = given["system_prompt"]
        if not isinstance(text, str):
            raise ComposeError("compare", "a column's system prompt must be text")
        session = replace(session, system_prompt=text, send_system_prompt=bool(text.strip()))
    if "prompt" in given:
        if not isinstance(given["prompt"], str):
            raise ComposeError("compare", "a column's prompt must be text")
        session = replace(session, prompt=given["prompt"])
    if "thinking" in given:
        if not isinstance(given["thinking"], bool):
            raise ComposeError("compare", "a column's thinking must be true or false")
        session = set_thinking(session, given["thinking"])
    if "max_tokens" in given:
        value = _int(given["max_tokens"], "max_tokens")
        if not 1 <= value <= MAX_TOKENS_LIMIT:
            raise ComposeError("compare", f"max tokens must be between 1 and {MAX_TOKENS_LIMIT:,}")
        session = replace(session, advanced=set_max_tokens(session.advanced, value))
    for name, low, high in (("temperature", 0.0, 1.0), ("top_p", 0.0, 1.0)):
        if name in given:
            value = _number(given[name], name)
            if not low <= value <= high:
                raise ComposeError("compare", f"{name} must be between {low:g} and {high:g}")
            session = replace(session, advanced=replace(session.advanced, **{name: Override(True, value)}))
    if "top_k" in given:
        value = _int(given["top_k"], "top_k")
        if value < 0:
            raise ComposeError("compare", "top_k must be 0 or more")
        session = replace(session, advanced=replace(session.advanced, top_k=Override(True, value)))
    return session


def after_send(session: Session, composition: Composition, assistant_content: Any) -> Session:
    """The session after a successful send: the exact messages join the history (stateful
    only), "create cache" turns itself off, and the blocks it marked stay marked from now on."""
    history = session.history
    if session.mode == "stateful":
        history = (
            *history,
            {"role": "user", "content": copy.deepcopy(composition.user_content)},
            {"role": "assistant", "content": copy.deepcopy(assistant_content)},
        )
    return replace(
        session,
        history=history,
        create_cache=False,
        cached=session.cached | frozenset(composition.cache_keys),
        tool_results={},
    )


# --------------------------------------------------------------------------------------------
# Building blocks


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


def _check_common(session: Session, model: ModelSpec) -> None:
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


def _new_user_content(
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


# --------------------------------------------------------------------------------------------
# Anthropic Messages


def compose_anthropic(session: Session, model: ModelSpec, schema: dict | None = None) -> Composition:
    """The exact ``messages.create`` body for the session (``schema``: the operation's output
    schema; structured answers come back through a forced tool call carrying that schema)."""
    _check_common(session, model)
    notes: list[str] = []
    adv = session.advanced
    thinking = session.thinking and model.supports_thinking
    if session.thinking and not thinking:
        notes.append(f"thinking: not sent ({model.model} does not support extended thinking)")
    structured = session.operation_type != "generic" and schema is not None
    output_tool = output_tool_name(session.operation_type) if structured else None
    keys: list[str] = []

    system: Any = None
    system_text = session.system_prompt.strip()
    if session.send_system_prompt and system_text:
        block = {"type": "text", "text": session.system_prompt}
        key = fingerprint(block)
        if session.create_cache or key in session.cached:
            block["cache_control"] = dict(EPHEMERAL)
            keys.append(key)
            system = [block]
        else:
            system = session.system_prompt
    if structured and thinking:
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

    messages: list[dict] = []
    if session.mode == "stateful":
        for msg in session.history:
            content = copy.deepcopy(msg["content"])
            if msg["role"] == "assistant" and not thinking:
                content = _strip_thinking(content)
            messages.append({"role": msg["role"], "content": content})
    user_content, doc_keys = _new_user_content(session, model, anthropic=True, notes=notes)
    keys.extend(doc_keys)
    messages.append({"role": "user", "content": copy.deepcopy(user_content)})
    _limit_breakpoints(system, messages, notes)

    request: dict = {"model": model.model, "max_tokens": adv.max_tokens}
    if system is not None:
        request["system"] = system
    request["messages"] = messages
    if thinking:
        request["thinking"] = {"type": "enabled", "budget_tokens": adv.thinking_budget}
    _sampling(request, session, thinking, notes, top_k=True)
    if adv.stop_enabled and adv.stop_sequences:
        request["stop_sequences"] = list(adv.stop_sequences)

    tools: list[dict] = []
    if session.tool_use:
        if not session.tools:
            notes.append("tools: tool use is on but no tool is defined")
        tools.extend(
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in session.tools
        )
    if structured:
        assert output_tool is not None and schema is not None
        tools.append(
            {
                "name": output_tool,
                "description": f"Record the {session.operation_type} result. Call it exactly once with the answer.",
                "input_schema": _object_schema(schema),
            }
        )
        request["tool_choice"] = {"type": "auto"} if thinking else {"type": "tool", "name": output_tool}
    if tools:
        request["tools"] = tools
    _cache_size_note(request, model, notes)
    return Composition(
        provider="anthropic",
        request=request,
        user_content=user_content,
        notes=tuple(notes),
        flags=_flags(
            session, system is not None and session.send_system_prompt and bool(system_text), thinking
        ),
        cache_keys=tuple(keys),
        output_tool=output_tool,
    )


CACHE_TTL_SECONDS = 300  # an ephemeral marker lives 5 minutes, refreshed by every hit


def min_cacheable_tokens(model: ModelSpec) -> int:
    """The smallest prefix the provider caches (shorter marked prefixes are silently not
    cached): 2,048 tokens for Anthropic's Haiku models, 1,024 for the others and for OpenAI."""
    if model.provider == "anthropic" and "haiku" in model.model.lower():
        return 2048
    return 1024


def estimate_tokens(value: Any) -> int:
    """A rough count (about four characters per token) of the text in ``value``, enough to warn
    that a prefix is too short to cache; the usage of the answer has the real counts."""
    if isinstance(value, str):
        return len(value) // 4
    if isinstance(value, dict):
        return sum(estimate_tokens(v) for k, v in value.items() if k not in ("cache_control", "type"))
    if isinstance(value, list):
        return sum(estimate_tokens(v) for v in value)
    return 0


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


def _object_schema(schema: dict) -> dict:
    out = {k: v for k, v in schema.items() if k not in ("$schema", "title")}
    out.setdefault("type", "object")
    return out


def _sampling(request: dict, session: Session, thinking: bool, notes: list[str], *, top_k: bool) -> None:
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


def _flags(session: Session, system_sent: bool, thinking: bool) -> dict:
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


# --------------------------------------------------------------------------------------------
# OpenAI Chat Completions (and every OpenAI-compatible server)


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
    _check_common(session, model)
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
    user_content, _ = _new_user_content(session, model, anthropic=False, notes=notes)
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
    _sampling(request, session, thinking, notes, top_k=False)
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
                "schema": _object_schema(schema),
                "strict": False,
            },
        }
    return Composition(
        provider="openai",
        request=request,
        user_content=user_content,
        notes=tuple(notes),
        flags=_flags(session, system_sent, thinking),
        cache_keys=(),
        output_tool=None,
    )


def compose(session: Session, model: ModelSpec, schema: dict | None = None) -> Composition:
    if model.provider == "anthropic":
        return compose_anthropic(session, model, schema)
    if model.provider == "openai":
        return compose_openai(session, model, schema)
    raise ComposeError("model", f"unknown provider kind {model.provider!r}")


# --------------------------------------------------------------------------------------------
# Restoring a recorded request ("open in playground")


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
    canonical: list[dict] = []
    for msg in messages:
        role = msg.get("role")
        content = msg.get("content")
        if role == "assistant":
            blocks: list[dict] = []
            if content:
                blocks.append(
                    {"type": "text", "text": content if isinstance(content, str) else json.dumps(content)}
                )
            for call in msg.get("tool_calls") or []:
                fn = call.get("function", {})
                try:
                    args = json.loads(fn.get("arguments") or "{}")
                except ValueError:
                    args = {"raw": fn.get("arguments")}
                blocks.append(
                    {"type": "tool_use", "id": call.get("id"), "name": fn.get("name"), "input": args}
                )
            canonical.append(
                {"role": "assistant", "content": blocks if msg.get("tool_calls") else (content or "")}
            )
        elif role == "tool":
            block = {"type": "tool_result", "tool_use_id": msg.get("tool_call_id"), "content": content or ""}
            if canonical and canonical[-1]["role"] == "user" and isinstance(canonical[-1]["content"], list):
                canonical[-1]["content"].append(block)
            else:
                canonical.append({"role": "user", "content": [block]})
        elif role == "user":
            if isinstance(content, list):
                parts = []
                for p in content:
                    if p.get("type") == "text":
                        parts.append(_text_or_document(p.get("text", "")))
                    elif p.get("type") == "file":
                        data = str(p.get("file", {}).get("file_data", ""))
                        parts.append(
                            {
                                "type": "document",
                                "source": {
                                    "type": "base64",
                                    "media_type": PDF,
                                    "data": data.split(",", 1)[-1],
                                },
                                "title": p.get("file", {}).get("filename") or "document.pdf",
                            }
                        )
                content = parts
            if canonical and canonical[-1]["role"] == "user" and isinstance(canonical[-1]["content"], list):
                extra = content if isinstance(content, list) else [{"type": "text", "text": content}]
                canonical[-1]["content"].extend(extra)
            else:
                canonical.append({"role": "user", "content": content})
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


def context_window_use(input_tokens: int, output_tokens: int, window: int | None) -> dict | None:
    """How full the model's context is after the last call (its whole input plus its output:
    the next stateful turn starts from there). None when the window is unknown."""
    if not window:
        return None
    used = max(0, input_tokens) + max(0, output_tokens)
    return {
        "used": used,
        "window": window,
        "percent": round(100 * used / window, 1),
        "remaining": max(0, window - used),
    }
