"""OpenAI Chat Completions through the official ``openai`` SDK, streaming.

The same code path serves OpenAI itself and every OpenAI-compatible server (Ollama, vLLM,
llama.cpp server, LM Studio): only ``base_url`` (and maybe the key) differ. Reasoning text
that compatible servers stream as ``reasoning_content`` (or ``reasoning``) is collected too.
"""

from __future__ import annotations

import json

import openai

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
    return {**request, "stream": True, "stream_options": {"include_usage": True}}


def _error(exc: Exception) -> ProviderError:
    if isinstance(exc, openai.APIStatusError):
        kind, message = error_details(getattr(exc, "body", None))
        if kind is None and isinstance(exc.body, dict):
            kind, message = exc.body.get("code") or exc.body.get("type"), exc.body.get("message", message)
        return ProviderError(
            code_for(exc.status_code, kind),
            message or str(exc),
            status=exc.status_code,
            provider_type=kind,
            retry_after=exc.response.headers.get("retry-after") if exc.response is not None else None,
        )
    if isinstance(exc, openai.APITimeoutError):
        return ProviderError("TIMEOUT", "the provider did not answer in time")
    refused = egress.refusal_in(exc)
    if refused is not None:
        return ProviderError(refused.code, refused.message)
    if isinstance(exc, openai.APIConnectionError):
        return ProviderError("CONNECTION_FAILED", f"could not reach the provider: {exc}")
    return ProviderError("PROVIDER_ERROR", str(exc))


def _extra(delta: object, *names: str) -> str | None:
    extra = getattr(delta, "model_extra", None) or {}
    for name in names:
        value = getattr(delta, name, None) if hasattr(type(delta), name) else extra.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def call(settings: ProviderSettings, request: dict, on_delta: DeltaSink) -> ProviderResult:
    client = sdk_client(openai.OpenAI, openai.DefaultHttpxClient, settings)
    text: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict] = {}
    usage_obj = None
    finish = None
    model = request.get("model", "")
    response_id = None
    try:
        body = {**request, "stream": True, "stream_options": {"include_usage": True}}
        stream = client.chat.completions.create(**sdk_arguments(client.chat.completions.create, body))
        for chunk in stream:
            response_id = response_id or chunk.id
            model = chunk.model or model
            if chunk.usage is not None:
                usage_obj = chunk.usage
            for choice in chunk.choices:
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
    except openai.APIError as exc:
        raise _error(exc) from exc
    finally:
        client.close()
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
    usage = Usage()
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
