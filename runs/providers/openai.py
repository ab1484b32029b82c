"""OpenAI Chat Completions through the official ``openai`` SDK, streaming.

The same code path serves OpenAI itself and every OpenAI-compatible server (Ollama, vLLM,
llama.cpp server, LM Studio): only ``base_url`` (and maybe the key) differ. Reasoning text
that compatible servers stream as ``reasoning_content`` (or ``reasoning``) is collected too.
"""

from __future__ import annotations

import json

import httpx2
import openai

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


def wire_request(request: dict) -> dict:
    return {**request, "stream": True, "stream_options": {"include_usage": True}}


def _error(exc: Exception) -> ProviderError:
    """A failure before the answer began (or an error object in the stream), in our words."""
    if isinstance(exc, openai.APIStatusError):
        kind, message = error_details(getattr(exc, "body", None))
        if kind is None and isinstance(exc.body, dict):
            kind, message = exc.body.get("code") or exc.body.get("type"), exc.body.get("message", message)
        return ProviderError(
            code_for(exc.status_code, kind),
            message or status_message(exc.status_code, getattr(exc, "body", None)),
            status=exc.status_code,
            provider_type=kind,
            retry_after=exc.response.headers.get("retry-after") if exc.response is not None else None,
        )
    if isinstance(exc, openai.APITimeoutError):
        return timed_out()
    refused = egress.refusal_in(exc)
    if refused is not None:
        return ProviderError(refused.code, refused.message)
    if isinstance(exc, openai.APIConnectionError):
        return unreachable()
    if isinstance(exc, openai.APIError):  # an error object inside the stream: the provider's words
        kind, message = error_details({"error": exc.body} if isinstance(exc.body, dict) else None)
        return ProviderError(code_for(None, kind), message or exc.message, provider_type=kind)
    return ProviderError("PROVIDER_ERROR", "the provider call failed")


def _broken(exc: Exception, partial: ProviderResult, tap: BodyTap) -> ProviderError:
    """A failure while the answer streamed: the SDK reports a cut connection as a connection
    error, but the provider was reached and answered in part: the answer is incomplete."""
    if isinstance(exc, openai.APITimeoutError | httpx2.TimeoutException):
        return cut("the provider stopped sending before the end of the answer", partial)
    if isinstance(exc, openai.APIConnectionError | httpx2.TransportError):
        return cut("the connection closed before the end of the answer", partial)
    if isinstance(exc, openai.APIError):
        return _error(exc)
    return unreadable(tap.tail_excerpt(), partial)


def _extra(delta: object, *names: str) -> str | None:
    extra = getattr(delta, "model_extra", None) or {}
    for name in names:
        value = getattr(delta, name, None) if hasattr(type(delta), name) else extra.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def call(
    settings: ProviderSettings, request: dict, on_delta: DeltaSink, *, stop: Stop | None = None
) -> ProviderResult:
    tap = BodyTap()
    client = sdk_client(openai.OpenAI, openai.DefaultHttpxClient, settings, stop=stop, tap=tap)
    text: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict] = {}
    usage_obj = None
    finish = None
    model = request.get("model", "")
    response_id = None
    chunks = 0

    def partial() -> ProviderResult:
        joined = "".join(text)
        return ProviderResult(
            content=[{"type": "text", "text": joined}] if joined else [],
            text=joined,
            thinking="".join(reasoning),
            usage=None,
            model=model,
            response_id=response_id,
        )

    try:
        body = {**request, "stream": True, "stream_options": {"include_usage": True}}
        try:
            stream = client.chat.completions.create(**sdk_arguments(client.chat.completions.create, body))
        except openai.APIError as exc:
            raise _error(exc) from None
        try:
            iterator = iter(stream)
            while True:
                # Only the SDK's own failures are judged here: on_delta's (a Stop) pass through.
                try:
                    chunk = next(iterator)
                except StopIteration:
                    break
                except Exception as exc:
                    raise _broken(exc, partial(), tap) from None
                chunks += 1
                response_id = response_id or chunk.id
                model = chunk.model or model
                if chunk.usage is not None:
                    usage_obj = chunk.usage
                for choice in chunk.choices or []:
                    delta = choice.delta
                    if choice.finish_reason:
                        finish = choice.finish_reason
                    if delta is None:
                        continue
                    think = _extra(delta, "reasoning_content", "reasoning")
                    if think:
                        reasoning.append(think)
                        on_delta("thinking", think)
                    if delta.content:
                        text.append(delta.content)
                        on_delta("text", delta.content)
                    for tc in delta.tool_calls or []:
                        slot = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                        if tc.id:
                            slot["id"] = tc.id
                        if tc.function is not None:
                            if tc.function.name:
                                slot["name"] += tc.function.name
                            if tc.function.arguments:
                                slot["arguments"] += tc.function.arguments
                                on_delta("tool_input", tc.function.arguments)
        finally:
            stream.close()
    finally:
        client.close()
    if not chunks:
        raise not_a_stream(tap.status, tap.content_type, tap.head_excerpt())
    if finish is None:
        raise cut("the stream closed without a finish_reason", partial())
    if tap.ended_with_done() is False:
        raise cut("the stream closed without data: [DONE], so its usage is unknown", partial())
    full_text = "".join(text)
    content: list[dict] = []
    if full_text:
        content.append({"type": "text", "text": full_text})
    tool_calls = []
    for index in sorted(calls):
        slot = calls[index]
        try:
            args = json.loads(slot["arguments"] or "{}")
        except ValueError:
            args = {"_unparsed": slot["arguments"]}
        call_id = slot["id"] or f"call_{index}"
        tool_calls.append({"id": call_id, "name": slot["name"], "input": args})
        content.append({"type": "tool_use", "id": call_id, "name": slot["name"], "input": args})
    usage = None  # not reported (include_usage unsupported, or cut): unknown, never zero
    if usage_obj is not None:
        cached = (
            getattr(usage_obj.prompt_tokens_details, "cached_tokens", None)
            if usage_obj.prompt_tokens_details
            else None
        )
        reasoning_tokens = (
            getattr(usage_obj.completion_tokens_details, "reasoning_tokens", None)
            if usage_obj.completion_tokens_details
            else None
        )
        usage = Usage(
            input_tokens=usage_obj.prompt_tokens or 0,
            output_tokens=usage_obj.completion_tokens or 0,
            cache_read_tokens=cached or 0,
            reasoning_tokens=reasoning_tokens,
        )
    raw = {
        "id": response_id,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": full_text or None,
                    **({"reasoning_content": "".join(reasoning)} if reasoning else {}),
                    **(
                        {
                            "tool_calls": [
                                {
                                    "id": c["id"],
                                    "type": "function",
                                    "function": {"name": c["name"], "arguments": calls[i]["arguments"]},
                                }
                                for i, c in zip(sorted(calls), tool_calls, strict=True)
                            ]
                        }
                        if tool_calls
                        else {}
                    ),
                },
                "finish_reason": finish,
            }
        ],
        "usage": usage_obj.model_dump(mode="json", exclude_none=True) if usage_obj is not None else None,
    }
    return ProviderResult(
        content=content or [{"type": "text", "text": ""}],
        text=full_text,
        thinking="".join(reasoning),
        tool_calls=tool_calls,
        usage=usage,
        model=model,
        stop_reason=finish,
        response_id=response_id,
        raw=raw,
    )
