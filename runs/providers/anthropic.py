"""Anthropic Messages through the official ``anthropic`` SDK, streaming."""

from __future__ import annotations

from typing import Any

import anthropic

from runs.providers import egress
from runs.providers.base import (
    DeltaSink,
    ProviderError,
    ProviderResult,
    ProviderSettings,
    Usage,
    code_for,
    error_details,
    sdk_arguments,
)
from runs.providers.isolation import sdk_client


def wire_request(request: dict) -> dict:
    """The body that goes over the wire for ``request`` (streaming switched on)."""
    return {**request, "stream": True}


def _block_json(block: Any) -> dict:
    data = block.model_dump(mode="json", exclude_none=True)
    # Keep only what the API accepts back in an assistant turn.
    kind = data.get("type")
    keep = {
        "text": ("type", "text", "citations"),
        "thinking": ("type", "thinking", "signature"),
        "redacted_thinking": ("type", "data"),
        "tool_use": ("type", "id", "name", "input"),
    }.get(kind)
    if keep is None:
        return data
    out = {k: data[k] for k in keep if k in data}
    if kind == "text" and not out.get("citations"):
        out.pop("citations", None)
    return out


def _error(exc: Exception) -> ProviderError:
    if isinstance(exc, anthropic.APIStatusError):
        kind, message = error_details(getattr(exc, "body", None))
        status = exc.status_code if exc.status_code != 200 else None  # 200: an error event mid-stream
        return ProviderError(
            code_for(status, kind),
            message or str(exc),
            status=status,
            provider_type=kind,
            retry_after=exc.response.headers.get("retry-after") if exc.response is not None else None,
        )
    if isinstance(exc, anthropic.APITimeoutError):
        return ProviderError("TIMEOUT", "the provider did not answer in time")
    refused = egress.refusal_in(exc)
    if refused is not None:
        return ProviderError(refused.code, refused.message)
    if isinstance(exc, anthropic.APIConnectionError):
        return ProviderError("CONNECTION_FAILED", f"could not reach the provider: {exc}")
    return ProviderError("PROVIDER_ERROR", str(exc))


def call(settings: ProviderSettings, request: dict, on_delta: DeltaSink) -> ProviderResult:
    client = sdk_client(anthropic.Anthropic, anthropic.DefaultHttpxClient, settings)
    try:
        with client.messages.stream(**sdk_arguments(client.messages.stream, request)) as stream:
            for event in stream:
                if event.type == "text":
                    on_delta("text", event.text)
                elif event.type == "thinking":
                    on_delta("thinking", event.thinking)
                elif event.type == "input_json":
                    on_delta("tool_input", event.partial_json)
            message = stream.get_final_message()
    except anthropic.APIError as exc:
        raise _error(exc) from exc
    finally:
        client.close()
    content = [_block_json(b) for b in message.content]
    u = message.usage
    read = u.cache_read_input_tokens or 0
    write = u.cache_creation_input_tokens or 0
    details = getattr(u, "output_tokens_details", None)
    usage = Usage(
        input_tokens=u.input_tokens + read + write,
        output_tokens=u.output_tokens,
        cache_read_tokens=read,
        cache_write_tokens=write,
        reasoning_tokens=details.thinking_tokens if details is not None else None,
    )
    return ProviderResult(
        content=content,
        text="".join(b.get("text", "") for b in content if b["type"] == "text"),
        thinking="\n\n".join(b.get("thinking", "") for b in content if b["type"] == "thinking"),
        citations=[c for b in content if b["type"] == "text" for c in b.get("citations") or []],
        tool_calls=[
            {"id": b["id"], "name": b["name"], "input": b.get("input")}
            for b in content
            if b["type"] == "tool_use"
        ],
        usage=usage,
        model=message.model,
        stop_reason=message.stop_reason,
        response_id=message.id,
        raw=message.model_dump(mode="json", exclude_none=True),
    )
