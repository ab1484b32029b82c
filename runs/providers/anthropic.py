"""Anthropic Messages through the official ``anthropic`` SDK, streaming."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2

from runs.providers import egress
from runs.providers.base import (
    DeltaSink,
    ProviderError,
    ProviderResult,
    ProviderSettings,
    Usage,
    code_for,
    cut,
    error_details,
    not_a_stream,
    sdk_arguments,
    status_message,
    timed_out,
    unreachable,
    unreadable,
)
from runs.providers.isolation import sdk_client
from runs.providers.watch import BodyTap, Stop


def wire_request(request: dict[str, Any]) -> dict[str, Any]:
    """The body that goes over the wire for ``request`` (streaming switched on)."""
    return {**request, "stream": True}


def _block_json(block: Any) -> dict[str, Any]:
    data: dict[str, Any] = block.model_dump(mode="json", exclude_none=True)
    # Keep only what the API accepts back in an assistant turn.
    kind = data.get("type", "")  # "" (no such block kind) when absent
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
    """A failure before the answer began (or an error event of the stream), in our words."""
    if isinstance(exc, anthropic.APIStatusError):
        kind, message = error_details(getattr(exc, "body", None))
        status = exc.status_code if exc.status_code != 200 else None  # 200: an error event mid-stream
        return ProviderError(
            code_for(status, kind),
            message or status_message(exc.status_code, getattr(exc, "body", None)),
            status=status,
            provider_type=kind,
            retry_after=exc.response.headers.get("retry-after") if exc.response is not None else None,
        )
    if isinstance(exc, anthropic.APITimeoutError):
        return timed_out()
    refused = egress.refusal_in(exc)
    if refused is not None:
        return ProviderError(refused.code, refused.message)
    if isinstance(exc, anthropic.APIConnectionError):
        return unreachable()
    return ProviderError("PROVIDER_ERROR", "the provider call failed")


def _broken(exc: Exception, partial: ProviderResult, tap: BodyTap) -> ProviderError:
    """A failure while the answer streamed: a cut connection, a timeout, or an unreadable event."""
    if isinstance(exc, anthropic.APIStatusError):  # an error event: the provider's own words
        return _error(exc)
    if isinstance(exc, anthropic.APITimeoutError | httpx2.TimeoutException):
        return cut("the provider stopped sending before the end of the answer", partial)
    if isinstance(exc, anthropic.APIConnectionError | httpx2.TransportError):
        return cut("the connection closed before the end of the answer", partial)
    return unreadable(tap.tail_excerpt(), partial)


def _partial(stream: Any) -> ProviderResult:
    """What arrived of a cut stream: its text (and thinking, shown but never sent back)."""
    try:
        snapshot = stream.current_message_snapshot
    except (AssertionError, AttributeError):  # no message_start yet
        snapshot = None
    blocks = [b.model_dump(mode="json", exclude_none=True) for b in snapshot.content] if snapshot else []
    text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
    return ProviderResult(
        content=[{"type": "text", "text": text}] if text else [],
        text=text,
        thinking="\n\n".join(b.get("thinking", "") for b in blocks if b.get("type") == "thinking"),
        usage=None,  # the final usage comes with message_delta, which never came
        model=snapshot.model if snapshot else "",
        response_id=snapshot.id if snapshot else None,
        raw=snapshot.model_dump(mode="json", exclude_none=True) if snapshot else {},
    )


def call(
    settings: ProviderSettings, request: dict[str, Any], on_delta: DeltaSink, *, stop: Stop | None = None
) -> ProviderResult:
    tap = BodyTap()
    client = sdk_client(anthropic.Anthropic, anthropic.DefaultHttpxClient, settings, stop=stop, tap=tap)
    started = ended = False
    try:
        manager = client.messages.stream(**sdk_arguments(client.messages.stream, request))
        try:
            stream = manager.__enter__()
        except anthropic.APIError as exc:
            raise _error(exc) from None
        try:
            events = iter(stream)
            while True:
                # Only the SDK's own failures are judged here: on_delta's (a Stop) pass through.
                try:
                    event = next(events)
                except StopIteration:
                    break
                except Exception as exc:
                    raise _broken(exc, _partial(stream), tap) from None
                if event.type == "message_start":
                    started = True
                elif event.type == "message_stop":
                    ended = True
                elif event.type == "text":
                    on_delta("text", event.text)
                elif event.type == "thinking":
                    on_delta("thinking", event.thinking)
                elif event.type == "input_json":
                    on_delta("tool_input", event.partial_json)
        finally:
            manager.__exit__(None, None, None)
        if not started:
            raise not_a_stream(tap.status, tap.content_type, tap.head_excerpt())
        if not ended:
            raise cut("the stream closed without message_stop", _partial(stream))
        message = stream.get_final_message()
    finally:
        client.close()
    content = [_block_json(b) for b in message.content]
    u = message.usage
    read = u.cache_read_input_tokens or 0
    write = u.cache_creation_input_tokens or 0
    details = getattr(u, "output_tokens_details", None)
    split = getattr(u, "cache_creation", None)  # 5 min / 1 h writes, when the API says
    usage = Usage(
        input_tokens=u.input_tokens + read + write,
        output_tokens=u.output_tokens,
        cache_read_tokens=read,
        cache_write_tokens=write,
        reasoning_tokens=details.thinking_tokens if details is not None else None,
        cache_write_1h_tokens=getattr(split, "ephemeral_1h_input_tokens", 0) or 0,
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
