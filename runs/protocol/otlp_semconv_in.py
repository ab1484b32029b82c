"""Per-convention readers of OTLP spans (pure: no Django): one decoded span -> trace events.

The conventions an instrumented application emits, read into one shape (see
:mod:`runs.protocol.otlp_map` for the batch, routing and validation around it):

* **OTel GenAI semantic conventions**, current (1.42) and the older names still emitted, with
  content from attributes, span events or joined OTLP log records;
* **OpenInference** (``openinference.span.kind`` LLM, EMBEDDING, TOOL, CHAIN, AGENT,
  RETRIEVER, ...): ``llm.*`` attributes, flattened messages, ``input.value`` / ``output.value``;
* the **Vercel AI SDK**'s own telemetry (``ai.*`` attributes: :mod:`runs.protocol.otlp_aisdk_in`).

Messages of every source are normalised to the 1.42 shape ``{role, parts: [{type: text,
content} | {type: tool_call, id, name, arguments} | {type: tool_call_response, id, response}],
finish_reason?}`` (the shape ``runs.protocol.otel_semconv`` writes on export).
:func:`span_events` gives the ``(time, event)`` pairs of one span; :func:`span_role` says
whether a span records a model call, a tool call or neither. A ``tool_call`` event is a tool
the application ran (a tool span, with its arguments and result); the calls a model asks for
stay in its response's ``outputMessages`` (a requested call and its tool span are one tool run:
counting both made every tool run two, issue 54).
"""

from __future__ import annotations

import math
from base64 import urlsafe_b64decode, urlsafe_b64encode
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import orjson

from runs.protocol import otlp_aisdk_in as aisdk
from runs.protocol.otel_semconv import input_messages as body_input_messages
from runs.protocol.otel_semconv import output_messages as body_output_messages
from runs.protocol.otlp_derived import split_derivable
from runs.protocol.validate_shapes import MAX_SAFE_INTEGER

KINDS = {1: "internal", 2: "server", 3: "client", 4: "producer", 5: "consumer"}
TOOL_OPERATION = "execute_tool"
MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "embeddings"})
OI_MODEL_KINDS = frozenset({"LLM", "EMBEDDING"})
OI_TOOL_KIND = "TOOL"
STATUS_ERROR = 2
STATUS_OK = 1

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


def json_attr(value: Any) -> Any:
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


def first_attr(attrs: Mapping[str, Any], keys: Iterable[str]) -> Any:
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


_HEX = frozenset("0123456789abcdef")


def span_key(trace_id: str, span_id: str) -> str:
    """What names a span in its events' ``id`` and ``correlationId``: its trace and span ids, 24
    bytes, in base64url (32 characters; 48 in hex). A chat span's four events hold it in their
    id and correlation columns, their bodies and two indexes, so the hex spelling cost 716 B a
    span on SQLite and 595 on PostgreSQL (issue 53). Ids that are not lowercase hex of the OTLP
    lengths (the receivers refuse them; kept for other callers) are joined with ``:``, which
    base64url never holds, so the two spellings cannot meet."""
    if len(trace_id) == 32 and len(span_id) == 16 and _HEX.issuperset(trace_id) and _HEX.issuperset(span_id):
        return urlsafe_b64encode(bytes.fromhex(trace_id + span_id)).decode("ascii")
    return f"{trace_id}:{span_id}"


def _ids_of_key(key: str) -> str | None:
    """The trace and span ids (48 hex characters) a ``span_key`` of lowercase hex ids names."""
    if len(key) != 32:
        return None
    try:
        return urlsafe_b64decode(key.encode("ascii")).hex()
    except ValueError:  # binascii.Error is a ValueError; so is a non-ASCII key
        return None


def span_of_key(key: str) -> str | None:
    """The span id (hex) a ``span_key`` of lowercase hex ids names, else None."""
    both = _ids_of_key(key)
    return both[32:] if both else None


def legacy_event_id(event_id: str) -> str | None:
    """The id an event ``o<span_key>_<suffix>`` had before issue 53 (``otel_<trace>_<span>_<suffix>``
    in hex), looked up beside it so that a span an older version stored and an exporter sends
    again after an upgrade is still known as stored."""
    both = _ids_of_key(event_id[1:33]) if event_id[:1] == "o" and event_id[33:34] == "_" else None
    return f"otel_{both[:32]}_{both[32:]}_{event_id[34:]}" if both else None


def event_id(span: Mapping[str, Any], suffix: str) -> str:
    return f"o{span_key(span['traceId'], span['spanId'])}_{suffix}"


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
        part["arguments"] = json_attr(arguments)
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
                "response": json_attr(content),
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
        function = found if isinstance(found := call.get("function"), Mapping) else call
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
                    "response": json_attr(content),
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
            message = json_attr(message) if isinstance(message, str) else message
            entry = _openai_style_message(message if isinstance(message, Mapping) else data, "assistant")
            if data.get("finish_reason"):
                entry["finish_reason"] = data["finish_reason"]
            outputs.append(entry)
        elif name == "gen_ai.content.prompt":
            parsed = json_attr(data.get("gen_ai.prompt"))
            if isinstance(parsed, list):
                inputs.extend(_openai_style_message(m, None) for m in parsed if isinstance(m, Mapping))
        elif name == "gen_ai.content.completion":
            parsed = json_attr(data.get("gen_ai.completion"))
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
                content.system = json_attr(data["gen_ai.system_instructions"])
    if inputs and content.inputs is None:
        content.inputs = inputs
    if outputs and content.outputs is None:
        content.outputs = outputs


def _as_messages(value: Any) -> list[dict[str, Any]] | None:
    parsed = json_attr(value)
    return parsed if isinstance(parsed, list) else None


def _model_content(span: Mapping[str, Any]) -> _Content:
    attrs = span["attributes"]
    content = _Content()
    if attrs.get("gen_ai.input.messages") is not None:
        content.inputs = _as_messages(attrs["gen_ai.input.messages"])
    if attrs.get("gen_ai.output.messages") is not None:
        content.outputs = _as_messages(attrs["gen_ai.output.messages"])
    if attrs.get("gen_ai.system_instructions") is not None:
        content.system = json_attr(attrs["gen_ai.system_instructions"])
    if content.inputs is None or content.outputs is None:
        _collect_flattened(attrs, content)
        if content.inputs is None and (content.oi_in or content.flat_in):
            content.inputs = _flattened_messages(content.oi_in or content.flat_in, bool(content.oi_in))
        if content.outputs is None and (content.oi_out or content.flat_out):
            content.outputs = _flattened_messages(content.oi_out or content.flat_out, bool(content.oi_out))
    if (content.inputs is None or content.outputs is None) and span.get("events"):
        _messages_from_events(span["events"], content)
    if content.inputs is None and "ai.prompt.messages" in attrs:
        content.inputs = aisdk.input_messages(attrs)
    if content.outputs is None and aisdk.operation(attrs) is not None:
        content.outputs = aisdk.output_messages(attrs)
    if content.inputs is None and "input.value" in attrs:
        body = json_attr(attrs["input.value"])
        content.inputs = body_input_messages(body) or None
        if content.inputs is None:
            content.inputs = [{"role": "user", "parts": [_text_part(attrs["input.value"])]}]
    if content.outputs is None and "output.value" in attrs:
        body = json_attr(attrs["output.value"])
        content.outputs = body_output_messages(body) or None
        if content.outputs is None:
            content.outputs = [{"role": "assistant", "parts": [_text_part(attrs["output.value"])]}]
    return content


# --------------------------------------------------------------------------------------------
# One span -> events


def span_role(attrs: Mapping[str, Any]) -> str:
    """``model``, ``tool`` or ``span``: what a span's attributes say it records."""
    ai_sdk = aisdk.role(attrs)
    if ai_sdk is not None:
        return ai_sdk
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
    ai_cached, ai_reasoning, ai_cache_write = aisdk.usage_details(attrs)
    if inp is None and out is None:
        inp, out = aisdk.usage_counts(attrs)
    if cache_write is None:
        cache_write = ai_cache_write
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
    if cached is None:
        cached = ai_cached
    if reasoning is None:
        reasoning = ai_reasoning
    if cached is not None:
        usage["cachedInputTokens"] = cached
    if reasoning is not None:
        usage["reasoningTokens"] = reasoning
    return usage, cache_write


def _span_attributes(attrs: Mapping[str, Any], strip_content: bool, strip_ai_sdk: bool) -> dict[str, Any]:
    """The span's attributes as stored. A tool span's content goes to its tool_call event; an AI
    SDK model span's ``ai.*`` content (prompt, text, tool calls: the AI SDK's own shapes, fully
    read into the model_io events) is not kept again; other model spans keep what the mapped
    events cannot rebuild exactly (:func:`split_derivable`)."""
    out = {}
    for key, value in attrs.items():
        if strip_content and (
            key in _CONTENT_KEYS or key in aisdk.CONTENT_KEYS or key.startswith(_CONTENT_PREFIXES)
        ):
            continue
        if strip_ai_sdk and key in aisdk.CONTENT_KEYS:
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
    key = span_key(trace_id, span_id)
    correlation = f"o:{key}"  # short: a chat span's four events hold both three times (issue 53)
    prefix = f"o{key}_"
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
        "attributes": _span_attributes(
            attrs, role == "tool", role == "model" and aisdk.operation(attrs) is not None
        ),
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
        model = _model_events(span, attrs, run_id, correlation, prefix, start, end, duration)
        # what the request and response hold is not kept again beside them (issue 53)
        split_derivable(started["attributes"], model[0][1], model[1][1])
        out.extend(model)
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
    provider = aisdk.provider(attrs) if aisdk.operation(attrs) else None
    if provider is None:
        provider = first_attr(attrs, ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system"))
    request_model = first_attr(
        attrs, ("gen_ai.request.model", "llm.model_name", "embedding.model_name", "ai.model.id")
    )
    response_model = first_attr(attrs, ("gen_ai.response.model",)) or request_model
    content = _model_content(span)
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
    # the span's trace and span ids are in correlationId, its name on span_started
    request_payload: dict[str, Any] = {}
    if content.inputs is not None:
        request_payload["inputMessages"] = content.inputs
    if content.system is not None:
        request_payload["systemInstructions"] = content.system
    request["payload"] = request_payload
    response_payload: dict[str, Any] = {}
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
    return [(start, request), (end, response)]


def _tool_event(
    span: Mapping[str, Any], attrs: Mapping[str, Any], run_id: str, correlation: str, eid: str, ts: str
) -> dict[str, Any]:
    ai_name, ai_args, ai_result, ai_has_result = aisdk.tool(attrs)
    name = (
        ai_name
        or first_attr(attrs, ("gen_ai.tool.name", "tool.name", "tool_call.function.name"))
        or span["name"]
    )
    event: dict[str, Any] = {
        "id": eid,
        "runId": run_id,
        "ts": ts,
        "correlationId": correlation,
        "type": "tool_call",
        "name": str(name or "tool"),
    }
    if ai_args is not None:
        event["args"] = ai_args
    if ai_has_result:
        event["result"] = ai_result
    for key in ("gen_ai.tool.call.arguments", "tool_call.function.arguments", "input.value"):
        if key in attrs and "args" not in event:
            event["args"] = json_attr(attrs[key])
            break
    for key in ("gen_ai.tool.call.result", "output.value"):
        if key in attrs and "result" not in event:
            event["result"] = json_attr(attrs[key])
            break
    return event
