"""Model calls through the response cache: the provider layer's door for step code and replays.

:func:`call` sends a composed request through the provider's SDK, or, when the workspace's
response cache (:mod:`runs.responsecache`) holds an answer to the same request (same LLM cache
key), answers from it without any network request and records the hit on the cache entry.
It returns what a run should record (the ``model_io`` request and response fields) beside
the :class:`ProviderResult`, so a cached answer is recorded exactly as the original was.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import orjson

from playground import providers
from playground.providers.base import DeltaSink, ProviderResult, ProviderSettings, Usage


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


def usage_from_protocol(usage: dict | None) -> Usage:
    usage = usage or {}
    return Usage(
        input_tokens=int(usage.get("inputTokens") or 0),
        output_tokens=int(usage.get("outputTokens") or 0),
        cache_read_tokens=int(usage.get("cachedInputTokens") or 0),
        reasoning_tokens=usage.get("reasoningTokens"),
    )


def result_from_recorded(kind: str, response: dict[str, Any]) -> ProviderResult:
    """Rebuild a ProviderResult from a recorded ``model_io`` response (its ``payload`` is the
    provider's final response object, as the adapters record it)."""
    raw = response.get("payload") if isinstance(response.get("payload"), dict) else {}
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
            except orjson.JSONDecodeError:
                arguments = fn.get("arguments")
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
    from playground.execute import redact

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


def call(
    settings: ProviderSettings,
    request: dict,
    *,
    workspace: Any,
    on_delta: DeltaSink | None = None,
    use_cache: bool = True,
    prefer_run: Any = None,
    summary: str | None = None,
    price_per_million: tuple[Decimal, Decimal] | None = None,
    currency: str = "USD",
) -> CallRecord:
    """One model call: from the workspace's cache on a hit (no provider request), else the provider."""
    from runs import responsecache

    recorded = request_fields(settings, request, summary=summary)
    keys = responsecache.request_keys(settings.kind, recorded.get("model"), recorded["payload"])
    if use_cache and keys is not None:
        entry = responsecache.lookup(workspace, keys["v2"], prefer_run=prefer_run)
        if entry is not None:
            responsecache.record_hit(entry)
            response = responsecache.response_fields(entry)
            result = result_from_recorded(settings.kind, response)
            if on_delta is not None and result.text:
                on_delta("text", result.text)
            return CallRecord(
                result=result,
                hit=True,
                request=recorded,
                response=response,
                chunks=responsecache.chunk_fields(entry),
                keys=keys,
            )
    started = time.monotonic()
    result = providers.call(settings, request, on_delta or _noop)
    response: dict[str, Any] = {
        "direction": "response",
        "provider": settings.kind,
        "model": result.model or recorded.get("model"),
        "usage": result.usage.to_protocol(),
        "durationMs": int((time.monotonic() - started) * 1000),
        "payload": result.raw,
    }
    if result.text:
        response["summary"] = result.text[:200]
    if price_per_million is not None:
        per_in, per_out = price_per_million
        amount = (
            Decimal(result.usage.input_tokens) * per_in + Decimal(result.usage.output_tokens) * per_out
        ) / Decimal(1_000_000)
        response["cost"] = {"amount": float(amount), "currency": currency}
    return CallRecord(result=result, hit=False, request=recorded, response=response, keys=keys)
