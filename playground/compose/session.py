"""The playground session as the page holds it, the composition it becomes, and both as JSON.

Pure data (no Django, no SDK): the limits and defaults of the advanced settings, ``ComposeError``
(which names the setting to fix), the frozen dataclasses, and the parser the page's JSON goes
through (``session_from_json``; ``as_int``/``as_number`` check single values for the setting
changes too).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
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


def as_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or int(value) != value:
        raise ComposeError(name, f"{name} must be an integer")
    return int(value)


def as_number(value: Any, name: str) -> float:
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
    value: float = as_int(raw, name) if integer else as_number(raw, name)
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
        max_tokens=as_int(data.get("max_tokens", base.max_tokens), "max_tokens"),
        thinking_budget=as_int(data.get("thinking_budget", base.thinking_budget), "thinking_budget"),
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
