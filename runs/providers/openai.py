"""OpenAI Chat Completions through the official ``openai`` SDK, streaming.

The same code path serves OpenAI itself and every OpenAI-compatible server (Ollama, vLLM,
llama.cpp server, LM Studio): only ``base_url`` (and maybe the key) differ. Reasoning text
that compatible servers stream as ``reasoning_content`` (or ``reasoning``) is collected too.
"""

from __future__ import annotations

import json
from typing import Any

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


def wire_request(request: dict[str, Any]) -> dict[str, Any]:
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


class _Answer:
    """What the stream has said so far: text, reasoning, tool calls, usage, the finish reason."""

    def __init__(self, model: str) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.usage_obj: Any = None
        self.finish: str | None = None
        self.model = model
        self.response_id: str | None = None
        self.chunks = 0

    def partial(self) -> ProviderResult:
        joined = "".join(self.text)
        return ProviderResult(
            content=[{"type": "text", "text": joined}] if joined else [],
            text=joined,
            thinking="".join(self.reasoning),
            usage=None,
            model=self.model,
            response_id=self.response_id,
        )

    def take(self, chunk: Any, on_delta: DeltaSink) -> None:
        self.chunks += 1
        self.response_id = self.response_id or chunk.id
        self.model = chunk.model or self.model
        if chunk.usage is not None:
            self.usage_obj = chunk.usage
        for choice in chunk.choices or []:
            if choice.finish_reason:
                self.finish = choice.finish_reason
            if choice.delta is not None:
                self._delta(choice.delta, on_delta)

    def _delta(self, delta: Any, on_delta: DeltaSink) -> None:
        think = _extra(delta, "reasoning_content", "reasoning")
        if think:
            self.reasoning.append(think)
            on_delta("thinking", think)
        if delta.content:
            self.text.append(delta.content)
            on_delta("text", delta.content)
        for tc in delta.tool_calls or []:
            slot = self.calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
            if tc.id:
                slot["id"] = tc.id
            if tc.function is None:
                continue
            if tc.function.name:
                slot["name"] += tc.function.name
            if tc.function.arguments:
                slot["arguments"] += tc.function.arguments
                on_delta("tool_input", tc.function.arguments)

    def tool_calls(self) -> list[dict[str, Any]]:
        out = []
        for index in sorted(self.calls):
            slot = self.calls[index]
            try:
                args = json.loads(slot["arguments"] or "{}")
            except ValueError:
                args = {"_unparsed": slot["arguments"]}
            out.append({"id": slot["id"] or f"call_{index}", "name": slot["name"], "input": args})
        return out

    def usage(self) -> Usage | None:
        """None when not reported (include_usage unsupported, or cut): unknown, never zero."""
        u = self.usage_obj
        if u is None:
            return None
        cached = getattr(u.prompt_tokens_details, "cached_tokens", None) if u.prompt_tokens_details else None
        reasoning_tokens = (
            getattr(u.completion_tokens_details, "reasoning_tokens", None)
            if u.completion_tokens_details
            else None
        )
        return Usage(
            input_tokens=u.prompt_tokens or 0,
            output_tokens=u.completion_tokens or 0,
            cache_read_tokens=cached or 0,
            reasoning_tokens=reasoning_tokens,
        )

    def raw(self, full_text: str, tool_calls: list[dict[str, Any]]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": full_text or None}
        if self.reasoning:
            message["reasoning_content"] = "".join(self.reasoning)
        if tool_calls:
            message["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": self.calls[i]["arguments"]},
                }
                for i, c in zip(sorted(self.calls), tool_calls, strict=True)
            ]
        return {
            "id": self.response_id,
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish}],
            "usage": self.usage_obj.model_dump(mode="json", exclude_none=True)
            if self.usage_obj is not None
            else None,
        }


def _stream(client: Any, request: dict[str, Any], answer: _Answer, on_delta: DeltaSink, tap: BodyTap) -> None:
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
                return
            except Exception as exc:
                raise _broken(exc, answer.partial(), tap) from None
            answer.take(chunk, on_delta)
    finally:
        stream.close()


def call(
    settings: ProviderSettings, request: dict[str, Any], on_delta: DeltaSink, *, stop: Stop | None = None
) -> ProviderResult:
    tap = BodyTap()
    client = sdk_client(openai.OpenAI, openai.DefaultHttpxClient, settings, stop=stop, tap=tap)
    answer = _Answer(request.get("model", ""))
    try:
        _stream(client, request, answer, on_delta, tap)
    finally:
        client.close()
    if not answer.chunks:
        raise not_a_stream(tap.status, tap.content_type, tap.head_excerpt())
    if answer.finish is None:
        raise cut("the stream closed without a finish_reason", answer.partial())
    if tap.ended_with_done() is False:
        raise cut("the stream closed without data: [DONE], so its usage is unknown", answer.partial())
    full_text = "".join(answer.text)
    tool_calls = answer.tool_calls()
    content: list[dict[str, Any]] = [{"type": "text", "text": full_text}] if full_text else []
    content += [
        {"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["input"]} for c in tool_calls
    ]
    return ProviderResult(
        content=content or [{"type": "text", "text": ""}],
        text=full_text,
        thinking="".join(answer.reasoning),
        tool_calls=tool_calls,
        usage=answer.usage(),
        model=answer.model,
        stop_reason=answer.finish,
        response_id=answer.response_id,
        raw=answer.raw(full_text, tool_calls),
    )
