"""Model calls through the response cache: the provider layer's door for step code and replays.

:func:`call` sends a composed request through the provider's SDK, or, when the workspace's
response cache (:mod:`runs.actions.responsecache`) holds an answer to the same request (same LLM cache
key), answers from it without any network request and records the hit on the cache entry.
It returns what a run should record (the ``model_io`` request and response fields) beside
the :class:`ProviderResult`, so a cached answer is recorded exactly as the original was.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import orjson

from runs import providers
from runs.actions import budgets, responsecache
from runs.providers.base import DeltaSink, ProviderResult, ProviderSettings, Usage
from runs.providers.pricing import Price, cost, protocol_cost
from runs.providers.redact import redact
from runs.providers.watch import Stop

DELTA_KINDS = ("text", "thinking", "tool_input")


@dataclass
class CallRecord:
    result: ProviderResult
    hit: bool
    request: dict[str, Any]  # model_io fields of the request event
    response: dict[str, Any]  # model_io fields of the response event
    chunks: list[dict[str, Any]] = field(default_factory=list)
    keys: dict[str, str] | None = None


def _noop(kind: str, text: str) -> None:
    pass


def usage_from_protocol(usage: dict | None) -> Usage | None:
    """The recorded usage; None when none was recorded (the provider did not report it)."""
    if not usage:
        return None
    return Usage(
        input_tokens=int(usage.get("inputTokens") or 0),
        output_tokens=int(usage.get("outputTokens") or 0),
        cache_read_tokens=int(usage.get("cachedInputTokens") or 0),
        reasoning_tokens=usage.get("reasoningTokens"),
    )


def result_from_recorded(kind: str, response: dict[str, Any]) -> ProviderResult:
    """Rebuild a ProviderResult from a recorded ``model_io`` response (its ``payload`` is the
    provider's final response object, as the adapters record it)."""
    raw = response.get("payload")
    raw = raw if isinstance(raw, dict) else {}
    usage = usage_from_protocol(response.get("usage"))
    model = response.get("model") or raw.get("model") or ""
    if kind == "openai":
        choice = (raw.get("choices") or [{}])[0]
        message = choice.get("message") or {}
        text = message.get("content") or ""
        calls = []
        for call in message.get("tool_calls") or []:
            fn = call.get("function") or {}
            try:
                arguments = orjson.loads(fn.get("arguments") or "{}")
            except orjson.JSONDecodeError:  # as the live adapter keeps unparseable arguments
                arguments = {"_unparsed": fn.get("arguments")}
            calls.append({"id": call.get("id"), "name": fn.get("name"), "input": arguments})
        return ProviderResult(
            content=[{"type": "text", "text": text}],
            text=text,
            thinking=message.get("reasoning_content") or "",
            tool_calls=calls,
            usage=usage,
            model=model,
            stop_reason=choice.get("finish_reason"),
            response_id=raw.get("id"),
            raw=raw,
        )
    content = [b for b in raw.get("content") or [] if isinstance(b, dict)]
    return ProviderResult(
        content=content,
        text="".join(b.get("text", "") for b in content if b.get("type") == "text"),
        thinking="\n\n".join(b.get("thinking", "") for b in content if b.get("type") == "thinking"),
        citations=[c for b in content if b.get("type") == "text" for c in b.get("citations") or []],
        tool_calls=[
            {"id": b.get("id"), "name": b.get("name"), "input": b.get("input")}
            for b in content
            if b.get("type") == "tool_use"
        ],
        usage=usage,
        model=model,
        stop_reason=raw.get("stop_reason"),
        response_id=raw.get("id"),
        raw=raw,
    )


def request_fields(
    settings: ProviderSettings, request: dict, *, summary: str | None = None
) -> dict[str, Any]:
    """The ``model_io`` request fields for ``request`` (the wire body, secrets redacted)."""
    secrets = tuple(s for s in (settings.api_key,) if s)
    fields: dict[str, Any] = {
        "direction": "request",
        "provider": settings.kind,
        "model": request.get("model"),
        "payload": redact(providers.wire_request(settings.kind, request), secrets),
    }
    if summary:
        fields["summary"] = summary
    return {k: v for k, v in fields.items() if v is not None}


def stream_deltas(chunks: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The ``(kind, text)`` deltas recorded ``stream_chunk`` events carry, whoever recorded them:
    the playground's ``{kind, offset, text}`` pieces, Anthropic SDK stream events or OpenAI
    chunks (the traced clients)."""
    out: list[tuple[str, str]] = []
    for chunk in chunks:
        payload = chunk.get("payload")
        if not isinstance(payload, dict):
            continue
        if payload.get("kind") in DELTA_KINDS and isinstance(payload.get("text"), str):
            out.append((payload["kind"], payload["text"]))
        elif payload.get("type") == "content_block_delta" and isinstance(payload.get("delta"), dict):
            delta = payload["delta"]
            for kind, field_name in (
                ("text", "text"),
                ("thinking", "thinking"),
                ("tool_input", "partial_json"),
            ):
                if isinstance(delta.get(field_name), str):
                    out.append((kind, delta[field_name]))
        elif payload.get("object") == "chat.completion.chunk":
            for choice in payload.get("choices") or []:
                delta = choice.get("delta") or {}
                think = delta.get("reasoning_content") or delta.get("reasoning")
                if isinstance(think, str) and think:
                    out.append(("thinking", think))
                if isinstance(delta.get("content"), str) and delta["content"]:
                    out.append(("text", delta["content"]))
                for call in delta.get("tool_calls") or []:
                    arguments = (call.get("function") or {}).get("arguments")
                    if isinstance(arguments, str) and arguments:
                        out.append(("tool_input", arguments))
    return [(kind, text) for kind, text in out if text]


def result_deltas(result: ProviderResult) -> list[tuple[str, str]]:
    """Deltas that rebuild ``result`` when no stream was recorded (the answer came whole)."""
    out = [("thinking", result.thinking), ("text", result.text)]
    out += [("tool_input", orjson.dumps(c.get("input") or {}).decode()) for c in result.tool_calls]
    return [(kind, text) for kind, text in out if text]


class DeltaPieces:
    """An ``on_delta`` that forwards every delta and keeps them as the playground records them:
    ``{kind, offset, text}`` pieces, one per run of deltas of the same kind."""

    def __init__(self, forward: DeltaSink) -> None:
        self.forward = forward
        self.pieces: list[dict[str, Any]] = []
        self.offsets: dict[str, int] = {}

    def __call__(self, kind: str, text: str) -> None:
        self.forward(kind, text)
        if not text:
            return
        if self.pieces and self.pieces[-1]["kind"] == kind:
            self.pieces[-1]["text"] += text
        else:
            self.pieces.append({"kind": kind, "offset": self.offsets.get(kind, 0), "text": text})
        self.offsets[kind] = self.offsets.get(kind, 0) + len(text)


def call(
    settings: ProviderSettings,
    request: dict,
    *,
    workspace: Any,
    on_delta: DeltaSink | None = None,
    use_cache: bool = True,
    prefer_run: Any = None,
    summary: str | None = None,
    price: Price | None = None,
    record_chunks: bool = False,
    stop: Stop | None = None,
) -> CallRecord:
    """One model call: from the workspace's cache on a hit (no provider request), else the provider.

    On a hit the recorded stream is played to ``on_delta`` again (the recorded deltas, or the
    answer's thinking, text and tool input when it was recorded whole). ``price`` (a row of the
    price table) gives a new answer its ``cost``; ``record_chunks`` keeps a new answer's deltas
    as ``stream_chunk`` fields, the way the playground records them. ``stop`` stops the
    provider call (see :func:`runs.providers.call`). A usage the provider did not report is
    left out of the response (unknown, never zero), and so is its cost."""
    sink = on_delta or _noop
    recorded = request_fields(settings, request, summary=summary)
    keys = responsecache.request_keys(settings.kind, recorded.get("model"), recorded["payload"])
    if use_cache and keys is not None:
        entry = responsecache.lookup(workspace, keys["v2"], prefer_run=prefer_run)
        if entry is not None:
            responsecache.record_hit(entry)
            recorded_response = responsecache.response_fields(entry)
            recorded_chunks = responsecache.chunk_fields(entry)
            replayed = result_from_recorded(settings.kind, recorded_response)
            for kind, text in stream_deltas(recorded_chunks) or result_deltas(replayed):
                sink(kind, text)
            return CallRecord(
                result=replayed,
                hit=True,
                request=recorded,
                response=recorded_response,
                chunks=recorded_chunks,
                keys=keys,
            )
    # past the workspace's monthly cap, a call Workbench would make (an experiment's, a judge's) is
    # refused with BUDGET_EXCEEDED before the provider is asked (answers from the cache cost nothing)
    budgets.refuse_past_cap(workspace, what="this model call (an experiment's or a judge's)")
    started = time.monotonic()
    pieces = DeltaPieces(sink)
    result = providers.call(settings, request, pieces, stop=stop)
    response: dict[str, Any] = {
        "direction": "response",
        "provider": settings.kind,
        "model": result.model or recorded.get("model"),
        "durationMs": int((time.monotonic() - started) * 1000),
        "payload": result.raw,
    }
    if result.usage is not None:
        response["usage"] = result.usage.to_protocol()
    if result.text:
        response["summary"] = result.text[:200]
    if price is not None and result.usage is not None:
        amount = protocol_cost(cost(result.usage, price), price.currency)
        if amount is not None:
            response["cost"] = amount
    chunks = []
    if record_chunks:
        base = {"direction": "stream_chunk", "provider": settings.kind, "model": recorded.get("model")}
        chunks = [{**base, "payload": piece} for piece in pieces.pieces]
    return CallRecord(result=result, hit=False, request=recorded, response=response, chunks=chunks, keys=keys)
