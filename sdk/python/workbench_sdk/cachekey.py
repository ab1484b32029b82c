"""The LLM cache key: the content address of one provider request (pure, httpx-free even).

A copy of the server's ``runs.protocol.cachekey`` (the server's test suite checks that both
give byte-identical keys), so a host asks the server's response cache by key alone.

Two recipes, both RFC 8785 canonical JSON hashed with SHA-256 and written as lowercase hex:
``v1`` ``{provider, model, messages, tools?, temperature?, topP?, topK?, responseFormat?}``
(seed 002's portable recipe) and ``v2`` (the default) ``{recipe:
"openwop-semantic-request-v2", provider, model, request: {..., maxOutputTokens?, seed?,
stop?, safetySettings?}, providerOptions?}``. A value of the wrong type raises
:class:`CacheKeyError` (code ``INVALID_INPUT`` and the JSON path), never hashed.

:func:`request_from_wire` turns a provider's wire body (an Anthropic Messages or OpenAI Chat
Completions request, as recorded in a ``model_io`` request event) into the input shape.
"""

from __future__ import annotations

import hashlib
from typing import Any

from workbench_sdk._canonical import CanonicalError, canonical_bytes

RECIPES = ("v1", "v2")
V2_RECIPE_NAME = "openwop-semantic-request-v2"

_V1_OPTIONAL = ("temperature", "topP", "topK", "responseFormat")
_NUMBER_FIELDS = ("temperature", "topP", "topK")


class CacheKeyError(ValueError):
    """The request cannot be keyed: ``code`` (``INVALID_INPUT``), ``message`` and ``path``."""

    code = "INVALID_INPUT"

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.message = message
        self.path = path


def _bad(path: str, message: str) -> CacheKeyError:
    return CacheKeyError(message, path)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _utf16(text: str) -> bytes:
    return text.encode("utf-16-be", "surrogatepass")


def _tools(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        raise _bad("tools", "tools must be a list of tool definitions")
    out = []
    for i, tool in enumerate(value):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not tool["name"]:
            raise _bad(f"tools[{i}]", "each tool needs a non-empty name")
        entry: dict[str, Any] = {"name": tool["name"]}
        if tool.get("description") is not None:
            if not isinstance(tool["description"], str):
                raise _bad(f"tools[{i}].description", "a tool description must be a string")
            entry["description"] = tool["description"]
        parameters = tool.get("parameters")
        if parameters is None:
            parameters = {}
        if not isinstance(parameters, dict):
            raise _bad(f"tools[{i}].parameters", "tool parameters must be a JSON Schema object")
        entry["parameters"] = parameters
        out.append(entry)
    return sorted(out, key=lambda t: _utf16(t["name"]))


def _messages(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise _bad("messages", "messages must be a list")
    for i, message in enumerate(value):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise _bad(f"messages[{i}]", "each message must be an object with a role")
        content = message.get("content")
        if not isinstance(content, str | list):
            raise _bad(f"messages[{i}].content", "message content must be a string or a list of blocks")
    return value


def _common(request: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(identity {provider, model}, semantic fields shared by both recipes)."""
    if not isinstance(request, dict):
        raise _bad("", "a cache key request must be a JSON object")
    provider = request.get("provider")
    if not isinstance(provider, str) or not provider.strip():
        raise _bad("provider", "provider must be a non-empty string")
    model = request.get("model")
    if not isinstance(model, str) or not model:
        raise _bad("model", "model must be a non-empty string")
    identity = {"provider": provider.strip().lower(), "model": model}
    fields: dict[str, Any] = {"messages": _messages(request.get("messages"))}
    if request.get("tools") is not None:
        fields["tools"] = _tools(request["tools"])
    for name in _NUMBER_FIELDS:
        value = request.get(name)
        if value is not None:
            if not _is_number(value):
                raise _bad(name, f"{name} must be a number")
            fields[name] = value
    if request.get("responseFormat") is not None:
        if not isinstance(request["responseFormat"], dict):
            raise _bad("responseFormat", "responseFormat must be an object")
        fields["responseFormat"] = request["responseFormat"]
    return identity, fields


def _v2_extras(request: dict[str, Any]) -> dict[str, Any]:
    extras: dict[str, Any] = {}
    max_tokens = request.get("maxOutputTokens")
    if max_tokens is not None:
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 0:
            raise _bad("maxOutputTokens", "maxOutputTokens must be a non-negative integer")
        extras["maxOutputTokens"] = max_tokens
    seed = request.get("seed")
    if seed is not None:
        if not _is_number(seed):
            raise _bad("seed", "seed must be a number")
        extras["seed"] = seed
    stop = request.get("stop")
    if stop is not None:
        stop = [stop] if isinstance(stop, str) else stop
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise _bad("stop", "stop must be a string or a list of strings")
        extras["stop"] = stop
    safety = request.get("safetySettings")
    if safety is not None:
        if not isinstance(safety, list) or not all(isinstance(s, dict) for s in safety):
            raise _bad("safetySettings", "safetySettings must be a list of objects")
        extras["safetySettings"] = safety
    return extras


def cache_key_input(request: dict[str, Any], *, recipe: str = "v2") -> dict[str, Any]:
    """The object that is canonicalized and hashed for ``recipe`` (useful to show and debug)."""
    identity, fields = _common(request)
    if recipe == "v1":
        return {**identity, **fields}
    if recipe != "v2":
        raise _bad("recipe", f"unknown cache key recipe {recipe!r}; choose from {', '.join(RECIPES)}")
    body: dict[str, Any] = {
        "recipe": V2_RECIPE_NAME,
        **identity,
        "request": {**fields, **_v2_extras(request)},
    }
    options = request.get("providerOptions")
    if options is not None:
        if not isinstance(options, dict):
            raise _bad("providerOptions", "providerOptions must be an object")
        body["providerOptions"] = options
    return body


def llm_cache_key(request: dict[str, Any], *, recipe: str = "v2") -> str:
    """Lowercase hex SHA-256 of the RFC 8785 form of :func:`cache_key_input`."""
    try:
        data = canonical_bytes(cache_key_input(request, recipe=recipe))
    except CanonicalError as exc:
        raise CacheKeyError(str(exc)) from None
    return hashlib.sha256(data).hexdigest()


def llm_cache_keys(request: dict[str, Any]) -> dict[str, str]:
    """Both keys of one request: ``{"v1": ..., "v2": ...}``."""
    return {recipe: llm_cache_key(request, recipe=recipe) for recipe in RECIPES}


# --------------------------------------------------------------------------------------------
# Provider wire bodies -> the recipe's input

# Keys of a wire body that never shape the answer (transport, tracing, accounting).
_TRANSPORT_KEYS = frozenset(
    {"stream", "stream_options", "metadata", "user", "service_tier", "store", "n", "logprobs", "top_logprobs"}
)
_WIRE_FIELDS = {
    "temperature": "temperature",
    "top_p": "topP",
    "top_k": "topK",
    "max_tokens": "maxOutputTokens",
    "max_completion_tokens": "maxOutputTokens",
    "max_output_tokens": "maxOutputTokens",
    "seed": "seed",
    "stop": "stop",
    "stop_sequences": "stop",
    "safety_settings": "safetySettings",
}


def _wire_tool(tool: Any) -> Any:
    if not isinstance(tool, dict):
        return tool
    if tool.get("type") == "function" and isinstance(tool.get("function"), dict):  # OpenAI
        fn = tool["function"]
        out = {"name": fn.get("name"), "parameters": fn.get("parameters") or {}}
        if fn.get("description") is not None:
            out["description"] = fn["description"]
        return out
    out = {"name": tool.get("name"), "parameters": tool.get("input_schema") or tool.get("parameters") or {}}
    if tool.get("description") is not None:
        out["description"] = tool["description"]
    return out


def _wire_response_format(body: dict[str, Any]) -> dict[str, Any] | None:
    fmt = body.get("response_format")
    if not isinstance(fmt, dict):
        return None
    kind = fmt.get("type")
    if kind == "json_schema" and isinstance(fmt.get("json_schema"), dict):
        return {"type": "json", "schema": fmt["json_schema"].get("schema") or {}}
    if kind == "json_object":
        return {"type": "json"}
    if kind == "text":
        return {"type": "text"}
    return fmt


def request_from_wire(provider: str, model: str | None, body: dict[str, Any]) -> dict[str, Any]:
    """The cache-key input of a provider wire body (Anthropic Messages or OpenAI Chat Completions).

    Anthropic's top-level ``system`` becomes a leading ``system`` message; tools become
    ``{name, description, parameters}``; sampling fields get the recipe's names; whatever
    else could shape the answer (``thinking``, ``tool_choice``, ...) goes to
    ``providerOptions`` (v2 only); transport fields (``stream``, ``metadata``, ``user``) are
    dropped.
    """
    if not isinstance(body, dict):
        raise _bad("", "a provider request body must be a JSON object")
    out: dict[str, Any] = {"provider": provider, "model": model or body.get("model")}
    messages = list(body.get("messages") or [])
    system = body.get("system")
    if system is not None:
        messages = [{"role": "system", "content": system}, *messages]
    out["messages"] = messages
    if body.get("tools") is not None:
        out["tools"] = (
            [_wire_tool(t) for t in body["tools"]] if isinstance(body["tools"], list) else body["tools"]
        )
    response_format = _wire_response_format(body)
    if response_format is not None:
        out["responseFormat"] = response_format
    options: dict[str, Any] = {}
    for key, value in body.items():
        if key in ("model", "messages", "system", "tools", "response_format") or key in _TRANSPORT_KEYS:
            continue
        if key in _WIRE_FIELDS:
            if value is not None:
                out[_WIRE_FIELDS[key]] = value
            continue
        options[key] = value
    if options:
        out["providerOptions"] = options
    return out
