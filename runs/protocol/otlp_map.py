"""OTLP spans of any GenAI instrumentation -> protocol trace events (pure: no Django).

One code path for both conventions an instrumented application emits:

* **OTel GenAI semantic conventions**, current (1.42: ``gen_ai.operation.name``,
  ``gen_ai.provider.name``, ``gen_ai.usage.input_tokens`` / ``output_tokens`` /
  ``cache_read.input_tokens`` / ``reasoning.output_tokens``, ``gen_ai.input.messages`` /
  ``gen_ai.output.messages``, ``execute_tool`` with ``gen_ai.tool.*``) and the older names still
  emitted (``gen_ai.system``, ``gen_ai.usage.prompt_tokens`` / ``completion_tokens``, flattened
  ``gen_ai.prompt.N.*`` / ``gen_ai.completion.N.*``), with content also taken from span events
  (``gen_ai.system.message``, ``gen_ai.user.message``, ``gen_ai.assistant.message``,
  ``gen_ai.tool.message``, ``gen_ai.choice``, ``gen_ai.content.prompt`` / ``.completion``,
  ``gen_ai.client.inference.operation.details``) or from OTLP log records joined onto their span
  (:func:`join_content_logs`: the contrib ``openai-v2`` instrumentation's way);
* **OpenInference** (``openinference.span.kind`` LLM, EMBEDDING, TOOL, CHAIN, AGENT, RETRIEVER,
  ...): ``llm.model_name``, ``llm.provider`` / ``llm.system``, ``llm.token_count.*`` (with
  ``prompt_details.cache_read`` / ``cache_write`` and ``completion_details.reasoning``),
  flattened ``llm.input_messages.N.message.*`` / ``llm.output_messages.N.message.*``,
  ``input.value`` / ``output.value``, ``tool.name``, ``tool_call.*``.

Messages of every source are normalised to the 1.42 shape ``{role, parts: [{type: text,
content} | {type: tool_call, id, name, arguments} | {type: tool_call_response, id, response}],
finish_reason?}`` (the shape ``runs.protocol.otel_semconv`` writes on export).

What a span becomes (all events of a span share ``correlationId`` ``otel:<trace>:<span>``; ids
are ``otel_<trace>_<span>_<suffix>``, so a retried export maps to the same ids):

* every span: ``span_started`` (start time; kind, parent, its scalar attributes less the
  message content carried below) and ``span_ended`` (end time, duration, status, error), so
  model and tool calls keep their place in the span tree;
* a model span (GenAI ``chat`` / ``text_completion`` / ``generate_content`` / ``embeddings``,
  a span with ``gen_ai.request.model`` and no other operation, OpenInference ``LLM`` /
  ``EMBEDDING``): a ``model_io`` ``request`` at its start (payload ``inputMessages``,
  ``systemInstructions``) and a ``response`` at its end (usage, duration, payload
  ``outputMessages``, ``finishReasons``, ``cacheCreationInputTokens``); each tool call the
  model asked for in its output becomes a ``tool_call`` (name, args; no result) at the end;
* a tool span (GenAI ``execute_tool``, OpenInference ``TOOL``): a ``tool_call`` with args and
  result at its end.

Token counts follow the protocol: ``inputTokens`` is the whole prompt, ``cachedInputTokens`` a
part of it; ``outputTokens`` includes ``reasoningTokens``; ``totalTokens`` is the span's own
total when it has one, else input + output. Cache-write tokens have no protocol field and go to
``payload.cacheCreationInputTokens``.

Batches: :func:`route_spans` decides each span's run, :func:`map_spans` maps a batch with
per-span validation (a bad span is counted and skipped, never refuses the batch:
:func:`partial_success`), :func:`map_batch` does both with a caller's resolver for traces that
become their own run. :func:`load_otlp_json` refuses JSON bodies nested deeper than
``canonical.MAX_NESTING`` with a coded error.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple

import orjson

from runs.protocol.canonical import MAX_NESTING, load_json_exact, nesting_depth
from runs.protocol.errors import ErrorCode, ProtocolError
from runs.protocol.otel_semconv import input_messages as body_input_messages
from runs.protocol.otel_semconv import output_messages as body_output_messages
from runs.protocol.validate import validate_event
from runs.protocol.validate_shapes import MAX_SAFE_INTEGER

RUN_ATTRIBUTES = ("workbench.run.id", "lwb.run.id")
SESSION_ATTRIBUTES = ("session.id", "gen_ai.conversation.id")
KINDS = {1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}
TOOL_OPERATION = "execute_tool"
MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "embeddings"})
OI_MODEL_KINDS = frozenset({"LLM", "EMBEDDING"})
OI_TOOL_KIND = "TOOL"
STATUS_ERROR = 2
STATUS_OK = 1
TOO_DEEP = f"nested deeper than {MAX_NESTING} arrays and objects"

_HEX_DIGITS = "0123456789abcdef"
_MAX_NS = 253402300799 * 1_000_000_000  # 9999-12-31T23:59:59Z: what an ISO timestamp can hold

# Attributes that carry message content: they go to the model_io / tool_call events, not to
# the span_started attributes of a model or tool span (no content recorded twice).
_CONTENT_KEYS = frozenset(
    {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.system_instructions",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
        "input.value",
        "output.value",
        "tool_call.function.arguments",
    }
)
_CONTENT_PREFIXES = ("gen_ai.prompt.", "gen_ai.completion.", "llm.input_messages.", "llm.output_messages.")

# Span events (and log records) that carry one message of a model call.
_MESSAGE_EVENTS = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
CONTENT_EVENT_NAMES = frozenset(
    {
        *_MESSAGE_EVENTS,
        "gen_ai.choice",
        "gen_ai.content.prompt",
        "gen_ai.content.completion",
        "gen_ai.client.inference.operation.details",
    }
)


# --------------------------------------------------------------------------------------------
# Bounded JSON


def load_otlp_json(body: bytes | str) -> Any:
    """An OTLP/JSON body parsed, refusing what the bundle parser refuses.

    Not JSON: ``INVALID_JSON``. Nested deeper than ``canonical.MAX_NESTING`` (512) arrays and
    objects: ``INVALID_INPUT`` with message :data:`TOO_DEEP` (never a ``RecursionError``); a
    non-finite number or a lone surrogate: ``INVALID_JSON`` (they have no canonical form).
    Cost: one orjson parse plus one orjson write (the depth check is done in C for the usual
    body of at most 254 levels).
    """
    try:
        doc = load_json_exact(body)
    except ProtocolError as exc:
        if TOO_DEEP in exc.message:
            raise ProtocolError(ErrorCode.INVALID_INPUT, f"OTLP JSON body is {TOO_DEEP}") from None
        raise
    check_nesting(doc, "OTLP JSON body")
    return doc


def check_nesting(value: Any, what: str = "value") -> None:
    """Raise ``INVALID_INPUT`` if ``value`` nests deeper than ``MAX_NESTING`` (iterative)."""
    try:
        orjson.dumps(value)
        return  # orjson writes at most 254 levels: anything it writes is shallow enough
    except orjson.JSONEncodeError as exc:
        if "ecursion" not in str(exc):
            return  # not a depth problem (a big int, say): judged elsewhere
    if nesting_depth(value) > MAX_NESTING:
        raise ProtocolError(ErrorCode.INVALID_INPUT, f"{what} is {TOO_DEEP}")


def _json_attr(value: Any) -> Any:
    """A JSON object or array given as text, parsed (orjson: bounded depth); else the value as is."""
    if type(value) is not str:
        return value
    head = value[:1]
    if head.isspace():
        head = value.lstrip()[:1]
    if head == "{" or head == "[":
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return value
    return value


# --------------------------------------------------------------------------------------------
# Small helpers


_SECONDS: dict[int, str] = {}


def iso(nanos: int) -> str:
    """``YYYY-MM-DDTHH:MM:SS.mmmZ`` of a Unix time in nanoseconds (seconds' text cached)."""
    seconds, rest = divmod(nanos, 1_000_000_000)
    prefix = _SECONDS.get(seconds)
    if prefix is None:
        if len(_SECONDS) > 4096:
            _SECONDS.clear()
        prefix = _SECONDS[seconds] = datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%S.")
    return f"{prefix}{rest // 1_000_000:03d}Z"


def _count(value: Any) -> int | None:
    """A token count: a non-negative safe integer (what the protocol's usage holds), else None."""
    t = type(value)
    if t is int:
        return value if 0 <= value <= MAX_SAFE_INTEGER else None
    if t is float and math.isfinite(value) and 0 <= value <= MAX_SAFE_INTEGER:
        return int(value)
    if t is str and value.isdigit() and len(value) < 16:
        return _count(int(value))
    return None


def _first(attrs: Mapping[str, Any], keys: Iterable[str]) -> Any:
    for key in keys:
        value = attrs.get(key)
        if value is not None and value != "":
            return value
    return None


def _attribute(value: Any) -> Any:
    """A span attribute kept on span events: scalars (non-finite floats as text), scalar lists."""
    t = type(value)
    if t is str or t is bool or t is int:
        return value
    if t is float:
        return value if math.isfinite(value) else str(value)
    if t is list and all(type(v) in (str, bool, int) for v in value):
        return value
    return None


def event_id(span: Mapping[str, Any], suffix: str) -> str:
    return f"otel_{span['traceId']}_{span['spanId']}_{suffix}"


def _index_path(rest: str) -> tuple[int, str] | None:
    """``"3.message.role"`` -> ``(3, "message.role")``."""
    head, dot, tail = rest.partition(".")
    if not dot or not head.isdigit():
        return None
    return int(head), tail


# --------------------------------------------------------------------------------------------
# Messages from every source, in the 1.42 shape


def _text_part(content: Any) -> dict[str, Any]:
    return {"type": "text", "content": content}


def _tool_call_part(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "tool_call"}
    if call_id:
        part["id"] = call_id
    part["name"] = name
    if arguments is not None:
        part["arguments"] = _json_attr(arguments)
    return part


def _openai_style_message(body: Mapping[str, Any], role: str | None) -> dict[str, Any]:
    """``{role?, content?, tool_calls?, id?}`` (an OpenAI message, a GenAI event body)."""
    role = body.get("role") or role or "user"
    parts: list[dict[str, Any]] = []
    content = body.get("content")
    if role == "tool":
        parts.append(
            {
                "type": "tool_call_response",
                "id": body.get("id") or body.get("tool_call_id"),
                "response": _json_attr(content),
            }
        )
        return {"role": role, "parts": parts}
    if isinstance(content, str) and content:
        parts.append(_text_part(content))
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, Mapping) and isinstance(block.get("text"), str):
                parts.append(_text_part(block["text"]))
            elif isinstance(block, str):
                parts.append(_text_part(block))
    for call in body.get("tool_calls") or []:
        if not isinstance(call, Mapping):
            continue
        function = call.get("function") if isinstance(call.get("function"), Mapping) else call
        parts.append(_tool_call_part(call.get("id"), function.get("name"), function.get("arguments")))
    return {"role": role, "parts": parts}


def _flattened_messages(flat: dict[int, dict[str, Any]], oi: bool) -> list[dict[str, Any]]:
    """Messages from flattened attributes, grouped by index (``message.`` stripped for OI)."""
    out = []
    for index in sorted(flat):
        fields = flat[index]
        role = fields.get("role") or "user"
        parts: list[dict[str, Any]] = []
        calls: dict[int, dict[str, Any]] = {}
        texts: dict[int, Any] = {}
        for key, value in fields.items():
            if key.startswith("tool_calls."):
                found = _index_path(key[11:])
                if found is None:
                    continue
                m, sub = found
                if sub.startswith("tool_call."):
                    sub = sub[10:]
                calls.setdefault(m, {})[sub] = value
            elif key.startswith("contents."):
                found = _index_path(key[9:])
                if found and found[1] in ("message_content.text", "text"):
                    texts[found[0]] = value
        content = fields.get("content")
        if role == "tool":
            parts.append(
                {
                    "type": "tool_call_response",
                    "id": fields.get("tool_call_id"),
                    "response": _json_attr(content),
                }
            )
            out.append({"role": role, "parts": parts})
            continue
        if content not in (None, ""):
            parts.append(_text_part(content))
        for k in sorted(texts):
            parts.append(_text_part(texts[k]))
        for m in sorted(calls):
            call = calls[m]
            parts.append(
                _tool_call_part(
                    call.get("id"),
                    call.get("function.name") or call.get("name"),
                    call.get("function.arguments") if "function.arguments" in call else call.get("arguments"),
                )
            )
        message: dict[str, Any] = {"role": role, "parts": parts}
        finish = fields.get("finish_reason")
        if finish:
            message["finish_reason"] = finish
        out.append(message)
    return out


class _Content:
    """What one pass over a span's attributes and events found about its messages."""

    __slots__ = ("inputs", "outputs", "system", "flat_in", "flat_out", "oi_in", "oi_out", "finish")

    def __init__(self) -> None:
        self.inputs: list[dict[str, Any]] | None = None
        self.outputs: list[dict[str, Any]] | None = None
        self.system: Any = None
        self.flat_in: dict[int, dict[str, Any]] = {}
        self.flat_out: dict[int, dict[str, Any]] = {}
        self.oi_in: dict[int, dict[str, Any]] = {}
        self.oi_out: dict[int, dict[str, Any]] = {}
        self.finish: Any = None


def _collect_flattened(attrs: Mapping[str, Any], content: _Content) -> None:
    for key, value in attrs.items():
        if key[:4] == "llm.":
            if key.startswith("llm.input_messages."):
                target, rest = content.oi_in, key[19:]
            elif key.startswith("llm.output_messages."):
                target, rest = content.oi_out, key[20:]
            else:
                continue
            found = _index_path(rest)
            if found is None:
                continue
            index, sub = found
            if sub.startswith("message."):
                sub = sub[8:]
            target.setdefault(index, {})[sub] = value
        elif key[:7] == "gen_ai.":
            if key.startswith("gen_ai.prompt."):
                target, rest = content.flat_in, key[14:]
            elif key.startswith("gen_ai.completion."):
                target, rest = content.flat_out, key[18:]
            else:
                continue
            found = _index_path(rest)
            if found is not None:
                target.setdefault(found[0], {})[found[1]] = value


def _messages_from_events(events: Sequence[Mapping[str, Any]], content: _Content) -> None:
    """Content carried as span events or joined log records (body merged into attributes)."""
    inputs: list[dict[str, Any]] = []
    outputs: list[dict[str, Any]] = []
    for event in events:
        name = event.get("name")
        if name not in CONTENT_EVENT_NAMES:
            continue
        attrs = event.get("attributes") or {}
        body = event.get("body")
        data = {**attrs, **body} if isinstance(body, Mapping) else dict(attrs)
        if name in _MESSAGE_EVENTS:
            inputs.append(_openai_style_message(data, _MESSAGE_EVENTS[name]))
        elif name == "gen_ai.choice":
            message = data.get("message")
            message = _json_attr(message) if isinstance(message, str) else message
            entry = _openai_style_message(message if isinstance(message, Mapping) else data, "assistant")
            if data.get("finish_reason"):
                entry["finish_reason"] = data["finish_reason"]
            outputs.append(entry)
        elif name == "gen_ai.content.prompt":
            parsed = _json_attr(data.get("gen_ai.prompt"))
            if isinstance(parsed, list):
                inputs.extend(_openai_style_message(m, None) for m in parsed if isinstance(m, Mapping))
        elif name == "gen_ai.content.completion":
            parsed = _json_attr(data.get("gen_ai.completion"))
            if isinstance(parsed, list):
                outputs.extend(
                    _openai_style_message(m, "assistant") for m in parsed if isinstance(m, Mapping)
                )
        else:  # gen_ai.client.inference.operation.details: the 1.42 attributes on an event
            if content.inputs is None and data.get("gen_ai.input.messages") is not None:
                content.inputs = _as_messages(data["gen_ai.input.messages"])
            if content.outputs is None and data.get("gen_ai.output.messages") is not None:
                content.outputs = _as_messages(data["gen_ai.output.messages"])
            if content.system is None and data.get("gen_ai.system_instructions") is not None:
                content.system = _json_attr(data["gen_ai.system_instructions"])
    if inputs and content.inputs is None:
        content.inputs = inputs
    if outputs and content.outputs is None:
        content.outputs = outputs


def _as_messages(value: Any) -> list[dict[str, Any]] | None:
    parsed = _json_attr(value)
    return parsed if isinstance(parsed, list) else None


def _model_content(span: Mapping[str, Any]) -> _Content:
    attrs = span["attributes"]
    content = _Content()
    if attrs.get("gen_ai.input.messages") is not None:
        content.inputs = _as_messages(attrs["gen_ai.input.messages"])
    if attrs.get("gen_ai.output.messages") is not None:
        content.outputs = _as_messages(attrs["gen_ai.output.messages"])
    if attrs.get("gen_ai.system_instructions") is not None:
        content.system = _json_attr(attrs["gen_ai.system_instructions"])
    if content.inputs is None or content.outputs is None:
        _collect_flattened(attrs, content)
        if content.inputs is None and (content.oi_in or content.flat_in):
            content.inputs = _flattened_messages(content.oi_in or content.flat_in, bool(content.oi_in))
        if content.outputs is None and (content.oi_out or content.flat_out):
            content.outputs = _flattened_messages(content.oi_out or content.flat_out, bool(content.oi_out))
    if (content.inputs is None or content.outputs is None) and span.get("events"):
        _messages_from_events(span["events"], content)
    if content.inputs is None and "input.value" in attrs:
        body = _json_attr(attrs["input.value"])
        content.inputs = body_input_messages(body) or None
        if content.inputs is None:
            content.inputs = [{"role": "user", "parts": [_text_part(attrs["input.value"])]}]
    if content.outputs is None and "output.value" in attrs:
        body = _json_attr(attrs["output.value"])
        content.outputs = body_output_messages(body) or None
        if content.outputs is None:
            content.outputs = [{"role": "assistant", "parts": [_text_part(attrs["output.value"])]}]
    return content


def requested_tool_calls(messages: Iterable[Any] | None) -> list[tuple[Any, Any, Any]]:
    """``(call id, name, arguments)`` of each ``tool_call`` part in output messages."""
    out = []
    for message in messages or ():
        if not isinstance(message, Mapping):
            continue
        for part in message.get("parts") or ():
            if isinstance(part, Mapping) and part.get("type") == "tool_call" and part.get("name"):
                out.append((part.get("id"), part["name"], part.get("arguments")))
    return out


# --------------------------------------------------------------------------------------------
# One span -> events


def span_role(attrs: Mapping[str, Any]) -> str:
    """``model``, ``tool`` or ``span``: what a span's attributes say it records."""
    oi_kind = attrs.get("openinference.span.kind")
    if oi_kind is not None:
        oi_kind = str(oi_kind).upper()
        if oi_kind in OI_MODEL_KINDS:
            return "model"
        if oi_kind == OI_TOOL_KIND:
            return "tool"
        return "span"
    operation = attrs.get("gen_ai.operation.name")
    if operation == TOOL_OPERATION:
        return "tool"
    if operation in MODEL_OPERATIONS:
        return "model"
    if operation is None:
        if attrs.get("gen_ai.request.model") or attrs.get("llm.model_name"):
            return "model"
        if attrs.get("gen_ai.tool.name"):
            return "tool"
    return "span"


def _usage(attrs: Mapping[str, Any]) -> tuple[dict[str, int] | None, int | None]:
    get = attrs.get
    inp = _count(get("gen_ai.usage.input_tokens"))
    if inp is None:
        inp = _count(get("gen_ai.usage.prompt_tokens"))
        if inp is None:
            inp = _count(get("llm.token_count.prompt"))
    out = _count(get("gen_ai.usage.output_tokens"))
    if out is None:
        out = _count(get("gen_ai.usage.completion_tokens"))
        if out is None:
            out = _count(get("llm.token_count.completion"))
    total = _count(get("gen_ai.usage.total_tokens"))
    if total is None:
        total = _count(get("llm.token_count.total"))
    cache_write = _count(get("gen_ai.usage.cache_creation.input_tokens"))
    if cache_write is None:
        cache_write = _count(get("llm.token_count.prompt_details.cache_write"))
    if inp is None and out is None and total is None:
        return None, cache_write
    usage = {
        "inputTokens": inp or 0,
        "outputTokens": out or 0,
        "totalTokens": total if total is not None else (inp or 0) + (out or 0),
    }
    cached = _count(get("gen_ai.usage.cache_read.input_tokens"))
    if cached is None:
        cached = _count(get("llm.token_count.prompt_details.cache_read"))
    reasoning = _count(get("gen_ai.usage.reasoning.output_tokens"))
    if reasoning is None:
        reasoning = _count(get("llm.token_count.completion_details.reasoning"))
    if cached is not None:
        usage["cachedInputTokens"] = cached
    if reasoning is not None:
        usage["reasoningTokens"] = reasoning
    return usage, cache_write


def _span_attributes(attrs: Mapping[str, Any], strip_content: bool) -> dict[str, Any]:
    out = {}
    for key, value in attrs.items():
        if strip_content and (key in _CONTENT_KEYS or key.startswith(_CONTENT_PREFIXES)):
            continue
        kept = _attribute(value)
        if kept is not None:
            out[key] = kept
    return out


def _error_message(span: Mapping[str, Any]) -> str | None:
    if span.get("statusMessage"):
        return str(span["statusMessage"])
    for event in span.get("events") or ():
        if event.get("name") == "exception":
            attrs = event.get("attributes") or {}
            message = attrs.get("exception.message") or attrs.get("exception.type")
            if message:
                return str(message)
    return None


def span_events(span: Mapping[str, Any], run_id: str) -> list[tuple[int, dict[str, Any]]]:
    """``(time in ns, event)`` pairs for one decoded span, in the order they happened.

    ``span``: ``{traceId, spanId, parentSpanId?, name, kind (OTLP int), start, end (ns),
    status (OTLP code int), statusMessage?, attributes, events?: [{name, time?, attributes,
    body?}], resource?}`` (what ``runs.otlp_ingest`` decodes; ``events`` optional).
    """
    attrs = span["attributes"]
    trace_id, span_id = span["traceId"], span["spanId"]
    correlation = f"otel:{trace_id}:{span_id}"
    prefix = f"otel_{trace_id}_{span_id}_"
    start, end = span["start"] or span["end"], span["end"] or span["start"]
    if end < start:
        end = start
    duration = (end - start) / 1_000_000
    start_ts, end_ts = iso(start), iso(end)
    role = span_role(attrs)
    started: dict[str, Any] = {
        "id": prefix + "start",
        "runId": run_id,
        "ts": start_ts,
        "correlationId": correlation,
        "type": "span_started",
        "spanId": span_id,
        "name": span["name"] or "span",
        "kind": KINDS.get(span.get("kind"), "internal"),  # type: ignore[arg-type]
        "attributes": _span_attributes(attrs, role != "span"),
    }
    if span.get("parentSpanId"):
        started["parentSpanId"] = span["parentSpanId"]
    ended: dict[str, Any] = {
        "id": prefix + "end",
        "runId": run_id,
        "ts": end_ts,
        "correlationId": correlation,
        "type": "span_ended",
        "spanId": span_id,
        "durationMs": duration,
    }
    status = span.get("status")
    if status == STATUS_ERROR:
        ended["status"] = "error"
        message = _error_message(span)
        if message:
            ended["error"] = {"message": message}
    elif status == STATUS_OK:
        ended["status"] = "ok"
    out: list[tuple[int, dict[str, Any]]] = [(start, started)]
    if role == "model":
        out.extend(_model_events(span, attrs, run_id, correlation, prefix, start, end, duration))
    elif role == "tool":
        out.append((end, _tool_event(span, attrs, run_id, correlation, prefix + "tool", end_ts)))
    out.append((end, ended))
    return out


def _model_events(
    span: Mapping[str, Any],
    attrs: Mapping[str, Any],
    run_id: str,
    correlation: str,
    prefix: str,
    start: int,
    end: int,
    duration: float,
) -> list[tuple[int, dict[str, Any]]]:
    provider = _first(attrs, ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system"))
    request_model = _first(attrs, ("gen_ai.request.model", "llm.model_name", "embedding.model_name"))
    response_model = _first(attrs, ("gen_ai.response.model",)) or request_model
    content = _model_content(span)
    otel = {"traceId": span["traceId"], "spanId": span["spanId"], "name": span["name"]}
    request: dict[str, Any] = {
        "id": prefix + "request",
        "runId": run_id,
        "ts": iso(start),
        "correlationId": correlation,
        "type": "model_io",
        "direction": "request",
    }
    response: dict[str, Any] = {
        "id": prefix + "model",
        "runId": run_id,
        "ts": iso(end),
        "correlationId": correlation,
        "type": "model_io",
        "direction": "response",
    }
    if provider is not None:
        request["provider"] = response["provider"] = str(provider)
    if request_model is not None:
        request["model"] = str(request_model)
    if response_model is not None:
        response["model"] = str(response_model)
    usage, cache_write = _usage(attrs)
    if usage is not None:
        response["usage"] = usage
    response["durationMs"] = duration
    request_payload: dict[str, Any] = {"otel": otel}
    if content.inputs is not None:
        request_payload["inputMessages"] = content.inputs
    if content.system is not None:
        request_payload["systemInstructions"] = content.system
    request["payload"] = request_payload
    response_payload: dict[str, Any] = {"otel": otel}
    if content.outputs is not None:
        response_payload["outputMessages"] = content.outputs
    finish = attrs.get("gen_ai.response.finish_reasons")
    if finish is not None:
        response_payload["finishReasons"] = finish
    if attrs.get("gen_ai.response.id"):
        response_payload["responseId"] = attrs["gen_ai.response.id"]
    if cache_write is not None:
        response_payload["cacheCreationInputTokens"] = cache_write  # no protocol usage field
    response["payload"] = response_payload
    out = [(start, request), (end, response)]
    for n, (_call_id, name, arguments) in enumerate(requested_tool_calls(content.outputs)):
        call: dict[str, Any] = {
            "id": f"{prefix}call{n}",
            "runId": run_id,
            "ts": response["ts"],
            "correlationId": correlation,
            "type": "tool_call",
            "name": str(name),
        }
        if arguments is not None:
            call["args"] = arguments
        out.append((end, call))
    return out


def _tool_event(
    span: Mapping[str, Any], attrs: Mapping[str, Any], run_id: str, correlation: str, eid: str, ts: str
) -> dict[str, Any]:
    name = _first(attrs, ("gen_ai.tool.name", "tool.name", "tool_call.function.name")) or span["name"]
    event: dict[str, Any] = {
        "id": eid,
        "runId": run_id,
        "ts": ts,
        "correlationId": correlation,
        "type": "tool_call",
        "name": str(name or "tool"),
    }
    for key in ("gen_ai.tool.call.arguments", "tool_call.function.arguments", "input.value"):
        if key in attrs:
            event["args"] = _json_attr(attrs[key])
            break
    for key in ("gen_ai.tool.call.result", "output.value"):
        if key in attrs:
            event["result"] = _json_attr(attrs[key])
            break
    return event


# --------------------------------------------------------------------------------------------
# Content log records (OTLP /v1/logs) joined onto their spans


def content_log_name(record: Mapping[str, Any]) -> str | None:
    """The GenAI event a log record carries (``eventName``, else attribute ``event.name``)."""
    name = record.get("eventName") or (record.get("attributes") or {}).get("event.name")
    return name if name in CONTENT_EVENT_NAMES else None


def join_content_logs(
    spans: Sequence[Mapping[str, Any]], records: Iterable[Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], list[Mapping[str, Any]]]:
    """Spans with the GenAI content log records of their (trace id, span id) as span events.

    ``records``: decoded log records ``{traceId, spanId, time (ns), eventName?, attributes,
    body}``. Returns ``(spans, unmatched)``: new span dicts for the spans that got records (the
    others are returned as they are), records appended after the span's own events in
    timestamp order; ``unmatched`` are the content records whose span is not in ``spans``
    (to keep for a later batch). Records that carry no GenAI content are dropped.
    """
    by_span: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for record in records:
        name = content_log_name(record)
        if name is None or not record.get("traceId") or not record.get("spanId"):
            continue
        by_span.setdefault((str(record["traceId"]).lower(), str(record["spanId"]).lower()), []).append(record)
    out: list[dict[str, Any]] = []
    for span in spans:
        found = by_span.pop((span.get("traceId"), span.get("spanId")), None)  # type: ignore[arg-type]
        if not found:
            out.append(span)  # type: ignore[arg-type]
            continue
        found.sort(key=lambda r: r.get("time") or 0)
        joined = [
            {
                "name": content_log_name(r),
                "time": r.get("time") or 0,
                "attributes": r.get("attributes") or {},
                "body": r.get("body"),
            }
            for r in found
        ]
        out.append({**span, "events": [*(span.get("events") or ()), *joined]})
    unmatched = [r for group in by_span.values() for r in group]
    return out, unmatched


# --------------------------------------------------------------------------------------------
# Validation of one decoded span


def span_problem(span: Any) -> str | None:
    """Why a decoded span cannot be mapped (``None`` when it can)."""
    if not isinstance(span, Mapping):
        return "a span must be an object"
    trace_id, span_id = span.get("traceId"), span.get("spanId")
    if (
        type(trace_id) is not str
        or len(trace_id) != 32
        or trace_id.strip(_HEX_DIGITS)
        or not trace_id.strip("0")
    ):
        return "traceId must be 32 lowercase hex digits, not all zero"
    if type(span_id) is not str or len(span_id) != 16 or span_id.strip(_HEX_DIGITS) or not span_id.strip("0"):
        return "spanId must be 16 lowercase hex digits, not all zero"
    parent = span.get("parentSpanId")
    if parent is not None and (type(parent) is not str or parent.strip(_HEX_DIGITS)):
        return "parentSpanId must be hex"
    for key in ("start", "end"):
        value = span.get(key)
        if type(value) is not int or not 0 <= value <= _MAX_NS:
            return f"{key} time must be a Unix time in nanoseconds"
    if not span.get("start") and not span.get("end"):
        return "a span needs a start or an end time"
    if not isinstance(span.get("attributes"), Mapping):
        return "attributes must be an object"
    if type(span.get("name", "")) is not str:
        return "name must be text"
    events = span.get("events")
    if events is not None and not isinstance(events, list | tuple):
        return "events must be a list"
    return None


def _events_problem(events: list[dict[str, Any]], validate: bool) -> str | None:
    try:
        orjson.dumps(events)  # lone surrogates, ints beyond 64 bits, > 254 levels
    except (orjson.JSONEncodeError, TypeError) as exc:
        text = str(exc)
        if "ecursion" in text:
            try:
                check_nesting(events, "span content")
            except ProtocolError as too_deep:
                return too_deep.message
        else:
            return f"span content cannot be stored: {text}"
    if validate:
        for event in events:
            try:
                validate_event(event)
            except ProtocolError as exc:
                return exc.message
    return None


# --------------------------------------------------------------------------------------------
# Routing a batch


class Route(NamedTuple):
    """Where one span goes: an existing run (``run_id``) or its trace's own run (``run_id`` None)."""

    run_id: str | None
    source: str  # "span", "trace" (another span of its trace named the run), "resource", "header", "new"
    trace_id: str


@dataclass
class TraceInfo:
    """What a batch says about one trace (for the run it creates or tags)."""

    trace_id: str
    service_name: str | None = None
    session_id: str | None = None
    root_span_id: str | None = None  # set when the batch holds the trace's root span
    root_name: str | None = None
    root_end: int | None = None  # ns
    root_status: str | None = None  # "ok", "error" or None (unset)
    first_name: str | None = None  # the earliest span's name, when the root is not in the batch
    first_start: int | None = None
    span_count: int = 0
    run_id: str | None = None  # the run a span of this trace named (span attribute), if any

    @property
    def title(self) -> str:
        name = self.root_name or self.first_name or f"trace {self.trace_id[:8]}"
        return f"{name} ({self.service_name})" if self.service_name else name

    @property
    def tags(self) -> list[str]:
        tags = []
        if self.service_name:
            tags.append(f"service:{self.service_name}")
        if self.session_id:
            tags.append(f"session:{self.session_id}")
        return tags

    @property
    def metadata(self) -> dict[str, Any]:
        """For ``run.metadata`` of a run created for this trace."""
        meta: dict[str, Any] = {"otel": {"traceId": self.trace_id}}
        if self.service_name:
            meta["otel"]["serviceName"] = self.service_name
        if self.session_id:
            meta["otel"]["sessionId"] = self.session_id
        return meta


def _named_run(source: Mapping[str, Any] | None) -> str | None:
    if not source:
        return None
    for key in RUN_ATTRIBUTES:
        value = source.get(key)
        if type(value) is str and value:
            return value
    return None


def route_spans(
    spans: Sequence[Mapping[str, Any]], header_run_id: str | None = None
) -> tuple[list[Route | None], dict[str, TraceInfo]]:
    """Each span's run, and what the batch says about each trace.

    Order: the span's own attribute (``workbench.run.id`` / ``lwb.run.id``); else the run a span
    of the same trace names by attribute (its root's when the root names one), so a tagged
    root's untagged instrumentor children follow it; else the resource attribute; else the
    ``X-Workbench-Run`` header; else the trace's own run (``Route(None, "new", trace_id)``: the
    caller finds the run it created for the trace earlier, or creates one from
    :class:`TraceInfo`). A span that :func:`span_problem` refuses gets ``None``.
    """
    traces: dict[str, TraceInfo] = {}
    problems = [span_problem(span) for span in spans]
    for span, problem in zip(spans, problems, strict=True):
        if problem is not None:
            continue
        trace_id = span["traceId"]
        info = traces.get(trace_id)
        if info is None:
            info = traces[trace_id] = TraceInfo(trace_id)
        info.span_count += 1
        attrs = span["attributes"]
        resource = span.get("resource") or {}
        if info.service_name is None and isinstance(resource.get("service.name"), str):
            info.service_name = resource["service.name"]
        if info.session_id is None:
            session = _first(attrs, SESSION_ATTRIBUTES) or _first(resource, SESSION_ATTRIBUTES)
            if session is not None:
                info.session_id = str(session)
        named = _named_run(attrs)
        start = span["start"] or span["end"]
        if not span.get("parentSpanId"):
            info.root_span_id = span["spanId"]
            info.root_name = span.get("name") or None
            info.root_end = span["end"] or span["start"]
            status = span.get("status")
            info.root_status = "error" if status == STATUS_ERROR else "ok" if status == STATUS_OK else None
            if named:
                info.run_id = named
        elif named and info.run_id is None:
            info.run_id = named
        if info.first_start is None or start < info.first_start:
            info.first_start, info.first_name = start, span.get("name") or None
    routes: list[Route | None] = []
    for span, problem in zip(spans, problems, strict=True):
        if problem is not None:
            routes.append(None)
            continue
        trace_id = span["traceId"]
        own = _named_run(span["attributes"])
        if own:
            routes.append(Route(own, "span", trace_id))
            continue
        inherited = traces[trace_id].run_id
        if inherited:
            routes.append(Route(inherited, "trace", trace_id))
            continue
        resource_run = _named_run(span.get("resource"))
        if resource_run:
            routes.append(Route(resource_run, "resource", trace_id))
        elif header_run_id:
            routes.append(Route(header_run_id, "header", trace_id))
        else:
            routes.append(Route(None, "new", trace_id))
    return routes, traces


# --------------------------------------------------------------------------------------------
# Mapping a batch


@dataclass
class MappedBatch:
    """A batch mapped: events per run (time order), and what was refused."""

    events_by_run: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    accepted_spans: int = 0
    rejected_spans: int = 0
    message: str | None = None  # the first refusals, for the OTLP partial_success

    def reject(self, index: int, why: str) -> None:
        self.rejected_spans += 1
        if self.rejected_spans <= 3:
            note = f"span {index}: {why}"
            self.message = note if self.message is None else f"{self.message}; {note}"
        elif self.rejected_spans == 4:
            self.message = f"{self.message}; ..."


def map_spans(
    spans: Sequence[Mapping[str, Any]],
    run_ids: Sequence[str | None],
    *,
    validate: bool = True,
    checked: bool = False,
) -> MappedBatch:
    """Map a batch: span ``i`` goes to run ``run_ids[i]`` (``None``: refused, counted as such).

    Each span is checked on its own (:func:`span_problem`, then its events: storable JSON and,
    with ``validate``, the protocol's event schema); a span that fails is counted in
    ``rejected_spans`` and the others are kept. Events of each run are in time order (at equal
    times, batch order, then the span's own order).
    """
    batch = MappedBatch()
    grouped: dict[str, list[tuple[int, int, int, dict[str, Any]]]] = {}
    for index, (span, run_id) in enumerate(zip(spans, run_ids, strict=True)):
        if run_id is None:
            batch.reject(index, span_problem(span) or "the span names no run")
            continue
        problem = None if checked else span_problem(span)
        if problem is not None:
            batch.reject(index, problem)
            continue
        try:
            pairs = span_events(span, run_id)
        except (ValueError, TypeError, OverflowError, KeyError, AttributeError) as exc:
            batch.reject(index, f"cannot map the span: {exc}")
            continue
        events = [event for _when, event in pairs]
        problem = _events_problem(events, validate)
        if problem is not None:
            batch.reject(index, problem)
            continue
        batch.accepted_spans += 1
        bucket = grouped.setdefault(run_id, [])
        for order, (when, event) in enumerate(pairs):
            bucket.append((when, index, order, event))
    for run_id, items in grouped.items():
        items.sort(key=lambda t: (t[0], t[1], t[2]))
        batch.events_by_run[run_id] = [t[3] for t in items]
    return batch


def map_batch(
    spans: Sequence[Mapping[str, Any]],
    header_run_id: str | None,
    resolve: Callable[[TraceInfo], str | None],
    *,
    validate: bool = True,
) -> tuple[MappedBatch, list[Route | None], dict[str, TraceInfo]]:
    """Route and map a batch in one call.

    ``resolve(trace_info)`` is called once per trace that has spans routed ``new``: it returns
    the run id for the trace (the run created for it by an earlier batch, or a new one), or
    ``None`` to refuse those spans. Returns the mapped batch, the routes and the trace facts.
    """
    routes, traces = route_spans(spans, header_run_id)
    resolved: dict[str, str | None] = {}
    run_ids: list[str | None] = []
    for route in routes:
        if route is None:
            run_ids.append(None)
        elif route.run_id is not None:
            run_ids.append(route.run_id)
        else:
            if route.trace_id not in resolved:
                resolved[route.trace_id] = resolve(traces[route.trace_id])
            run_ids.append(resolved[route.trace_id])
    return map_spans(spans, run_ids, validate=validate, checked=True), routes, traces


def partial_success(batch: MappedBatch) -> dict[str, Any]:
    """The OTLP/JSON ``ExportTraceServiceResponse`` for a batch (``{}`` when all were accepted)."""
    if not batch.rejected_spans:
        return {}
    return {
        "partialSuccess": {
            "rejectedSpans": str(batch.rejected_spans),  # int64 is a string in OTLP/JSON
            "errorMessage": batch.message or "",
        }
    }
