"""Span attributes a model span's events already hold, stored once (pure: no Django; issue 53).

An instrumented application often sends one model call in two conventions at once: OTel GenAI
(``gen_ai.*``, 1.42 messages) and OpenInference (``llm.*``, flattened messages,
``input.value`` / ``output.value``). The mapping (:mod:`runs.protocol.otlp_semconv_in`) reads
them into the ``model_io`` request and response (provider, model, usage, messages, finish
reasons, response id). Kept beside that mapped form, the raw attributes would store every
message three or four times.

:func:`split_derivable` takes out of a model span's ``span_started`` attributes each one that
the mapped events reproduce exactly (:func:`derived_attributes` rebuilds it from them), and
names the ones it took in :data:`DERIVED`: an integer, bit ``i`` set for the ``i``-th key of
:data:`DERIVABLE` (a flattened message group is one entry, named by its prefix, e.g.
``llm.input_messages``; the table is append-only: a bit's meaning never changes). An attribute is taken out only when its
rebuilt value equals the original (scalars: same type and value; JSON text such as
``gen_ai.input.messages``: the same JSON value, its whitespace aside); anything else stays in
``attributes`` as sent. So :func:`span_attributes` gives back every attribute of the span:
nothing is lost, and the content is stored once, in the ``model_io`` events.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import orjson

DERIVED = "workbench.derived"  # span_started attribute: the keys left out (rebuilt from model_io)
_INPUT_VALUE_MESSAGES = "input.value"  # {"messages": [{role, content}]} (OpenAI's request shape)
_OI_IN, _OI_OUT = "llm.input_messages", "llm.output_messages"
_PROMPT, _COMPLETION = "gen_ai.prompt", "gen_ai.completion"  # GenAI's older flattened messages
_GROUPS = (_OI_IN, _OI_OUT, _PROMPT, _COMPLETION)

Events = tuple[Mapping[str, Any], Mapping[str, Any]]  # (request, response) model_io events


def _payload(event: Mapping[str, Any]) -> Mapping[str, Any]:
    payload = event.get("payload")
    return payload if isinstance(payload, Mapping) else {}


def _usage(field: str) -> Callable[[Events], Any]:
    def get(events: Events) -> Any:
        usage = events[1].get("usage")
        return usage.get(field) if isinstance(usage, Mapping) else None

    return get


def _text_of(message: Any) -> str | None:
    """The text of a message made of exactly one text part (else None)."""
    if not isinstance(message, Mapping):
        return None
    parts = message.get("parts")
    if not isinstance(parts, list) or len(parts) != 1:
        return None
    part = parts[0]
    if not isinstance(part, Mapping) or part.get("type") != "text" or set(part) != {"type", "content"}:
        return None
    content = part["content"]
    return content if isinstance(content, str) else None


def _simple(messages: Any) -> list[tuple[str, str]] | None:
    """``(role, text)`` of each message when every one is a single text part with a role."""
    if not isinstance(messages, list) or not messages:
        return None
    out = []
    for message in messages:
        text = _text_of(message)
        role = message.get("role") if isinstance(message, Mapping) else None
        if text is None or not isinstance(role, str):
            return None
        out.append((role, text))
    return out


def _json_text(value: Any) -> str | None:
    if value is None:
        return None
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError:  # nested too deep to write: the mapping refuses the span anyway
        return None


def _input_value(events: Events) -> str | None:
    simple = _simple(_payload(events[0]).get("inputMessages"))
    if simple is None:
        return None
    return _json_text({"messages": [{"role": role, "content": text} for role, text in simple]})


def _output_value(events: Events) -> str | None:
    messages = _payload(events[1]).get("outputMessages")
    return _text_of(messages[0]) if isinstance(messages, list) and len(messages) == 1 else None


# One attribute -> how the mapped events rebuild it.
_SCALARS: dict[str, Callable[[Events], Any]] = {
    "gen_ai.provider.name": lambda e: e[0].get("provider"),
    "gen_ai.system": lambda e: e[0].get("provider"),
    "llm.provider": lambda e: e[0].get("provider"),
    "llm.system": lambda e: e[0].get("provider"),
    "gen_ai.request.model": lambda e: e[0].get("model"),
    "llm.model_name": lambda e: e[0].get("model"),
    "gen_ai.response.model": lambda e: e[1].get("model"),
    "gen_ai.usage.input_tokens": _usage("inputTokens"),
    "gen_ai.usage.prompt_tokens": _usage("inputTokens"),
    "llm.token_count.prompt": _usage("inputTokens"),
    "gen_ai.usage.output_tokens": _usage("outputTokens"),
    "gen_ai.usage.completion_tokens": _usage("outputTokens"),
    "llm.token_count.completion": _usage("outputTokens"),
    "gen_ai.usage.total_tokens": _usage("totalTokens"),
    "llm.token_count.total": _usage("totalTokens"),
    "gen_ai.usage.cache_read.input_tokens": _usage("cachedInputTokens"),
    "llm.token_count.prompt_details.cache_read": _usage("cachedInputTokens"),
    "gen_ai.usage.reasoning.output_tokens": _usage("reasoningTokens"),
    "llm.token_count.completion_details.reasoning": _usage("reasoningTokens"),
    "gen_ai.response.id": lambda e: _payload(e[1]).get("responseId"),
    "gen_ai.response.finish_reasons": lambda e: _payload(e[1]).get("finishReasons"),
    "output.value": _output_value,
}
_JSON_TEXTS: dict[str, Callable[[Events], Any]] = {
    "gen_ai.input.messages": lambda e: _json_text(_payload(e[0]).get("inputMessages")),
    "gen_ai.output.messages": lambda e: _json_text(_payload(e[1]).get("outputMessages")),
    "gen_ai.system_instructions": lambda e: _json_text(_payload(e[0]).get("systemInstructions")),
    _INPUT_VALUE_MESSAGES: _input_value,
}


# OpenInference's MIME types of ``input.value`` / ``output.value``, as its instrumentations set
# them for the values the mapped events rebuild: JSON messages in, the answer's text out.
_MIME_TYPES: dict[str, Callable[[Events], Any]] = {
    "input.mime_type": lambda e: "application/json" if _input_value(e) is not None else None,
    "output.mime_type": lambda e: "text/plain" if _output_value(e) is not None else None,
}
_SCALARS.update(_MIME_TYPES)

# The keys a span can leave out, in a fixed order: bit i of DERIVED names DERIVABLE[i].
# APPEND ONLY (stored spans name their keys by position): the MIME types came last (issue 53).
DERIVABLE: tuple[str, ...] = (
    *(key for key in _SCALARS if key not in _MIME_TYPES),
    *_JSON_TEXTS,
    *_GROUPS,
    *_MIME_TYPES,
)
_BIT = {key: 1 << i for i, key in enumerate(DERIVABLE)}


def _flattened(prefix: str, messages: Any, infix: str = ".message") -> dict[str, str] | None:
    """Flattened messages: OpenInference's ``<prefix>.N.message.role`` / ``.content``, GenAI's
    older ``<prefix>.N.role`` / ``.content`` (``infix`` ""), with ``.finish_reason`` for GenAI."""
    simple = _simple(messages)
    if simple is None:
        return None
    out: dict[str, str] = {}
    for n, (role, text) in enumerate(simple):
        out[f"{prefix}.{n}{infix}.role"] = role
        out[f"{prefix}.{n}{infix}.content"] = text
        finish = messages[n].get("finish_reason")
        if not infix and isinstance(finish, str):
            out[f"{prefix}.{n}.finish_reason"] = finish
    return out


def _groups(events: Events) -> dict[str, dict[str, str] | None]:
    inputs, outputs = _payload(events[0]).get("inputMessages"), _payload(events[1]).get("outputMessages")
    return {
        _OI_IN: _flattened(_OI_IN, inputs),
        _OI_OUT: _flattened(_OI_OUT, outputs),
        _PROMPT: _flattened(_PROMPT, inputs, ""),
        _COMPLETION: _flattened(_COMPLETION, outputs, ""),
    }


def _same_json(text: Any, rebuilt: str | None) -> bool:
    if type(text) is not str or rebuilt is None:
        return False
    try:
        return bool(orjson.loads(text) == orjson.loads(rebuilt))
    except (orjson.JSONDecodeError, RecursionError):
        return False


def _same(value: Any, rebuilt: Any) -> bool:
    if type(value) is not type(rebuilt):
        return False
    if type(value) is list:
        return len(value) == len(rebuilt) and all(
            type(a) is type(b) and a == b for a, b in zip(value, rebuilt, strict=True)
        )
    return bool(value == rebuilt)


_DOTTED = tuple((prefix + ".", prefix) for prefix in _GROUPS)
_FLATTEN: dict[str, tuple[int, str]] = {_OI_IN: (0, ".message"), _OI_OUT: (1, ".message"), _PROMPT: (0, ""),
                                        _COMPLETION: (1, "")}  # fmt: skip
_MESSAGES = ("inputMessages", "outputMessages")


def split_derivable(attrs: dict[str, Any], request: Mapping[str, Any], response: Mapping[str, Any]) -> None:
    """Take out of ``attrs`` (a model span's ``span_started`` attributes, in place) what the
    ``request`` and ``response`` events rebuild exactly; name what was taken in ``attrs[DERIVED]``.
    One pass over the attributes (a flattened group is rebuilt only when the span has one)."""
    events = (request, response)
    taken: list[str] = []
    present: dict[str, dict[str, Any]] = {}  # flattened group prefix -> its attributes
    for key, value in attrs.items():
        scalar = _SCALARS.get(key)
        if scalar is not None:
            if value is not None and _same(value, scalar(events)):
                taken.append(key)
            continue
        text = _JSON_TEXTS.get(key)
        if text is not None:
            if _same_json(value, text(events)):
                taken.append(key)
            continue
        for dotted, prefix in _DOTTED:
            if key.startswith(dotted):
                present.setdefault(prefix, {})[key] = value
                break
    for prefix, group in present.items():
        side, infix = _FLATTEN[prefix]
        rebuilt = _flattened(prefix, _payload(events[side]).get(_MESSAGES[side]), infix)
        if rebuilt is not None and group == rebuilt and all(type(v) is str for v in group.values()):
            taken.extend(group)
            taken.append(prefix)
    if not taken:
        return
    mask = 0
    for key in taken:
        attrs.pop(key, None)
        mask |= _BIT.get(key, 0)
    attrs[DERIVED] = mask


def derived_attributes(mask: Any, request: Mapping[str, Any], response: Mapping[str, Any]) -> dict[str, Any]:
    """The attributes ``mask`` (a span's ``attributes[DERIVED]``) names, rebuilt from its events."""
    if type(mask) is not int or mask < 0:
        return {}
    events = (request, response)
    out: dict[str, Any] = {}
    groups = _groups(events)
    for name in (key for key in DERIVABLE if mask & _BIT[key]):
        if name in _SCALARS:
            out[name] = _SCALARS[name](events)
        elif name in _JSON_TEXTS:
            out[name] = _JSON_TEXTS[name](events)
        elif groups.get(name):
            out.update(groups[name] or {})
    return out


def span_attributes(
    started: Mapping[str, Any], request: Mapping[str, Any] | None, response: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Every attribute a span was sent with: those its ``span_started`` keeps, and those it names
    in :data:`DERIVED`, rebuilt from its ``model_io`` request and response (JSON text rebuilt
    compactly: the same JSON value)."""
    attrs = dict(started.get("attributes") or {})
    mask = attrs.pop(DERIVED, None)
    if mask is not None and request is not None and response is not None:
        attrs.update(derived_attributes(mask, request, response))
    return attrs
