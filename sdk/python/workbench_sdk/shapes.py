"""What differs between the official SDKs: the response model, stream
accumulation and replaying a recorded answer as the SDK's own stream events.

Used by :mod:`workbench_sdk.traced`; the SDKs themselves are imported only when a call needs them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

from workbench_sdk.events import RecordedAnswer

Feed = Callable[[Any], None]
Final = Callable[[], tuple[Any, Any]]


def dump_model(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", exclude_none=True)
    return value


class Provider:
    name: str

    def response_type(self) -> Any:
        """The SDK's response model class (a pydantic model: ``model_validate`` reads a dict)."""
        raise NotImplementedError

    def accumulator(self, kwargs: dict[str, Any]) -> tuple[Feed, Final]:
        raise NotImplementedError

    def stream_events(self, answer: RecordedAnswer) -> list[Any]:
        """The SDK stream events of a recorded answer: its recorded stream, else rebuilt."""
        raise NotImplementedError

    def stream_helper(
        self, kwargs: dict[str, Any], is_async: bool
    ) -> tuple[dict[str, Any], Callable[[Any], Any]]:
        """For the SDK's ``stream()`` helper: the ``create(stream=True)`` arguments, and the
        SDK's own stream manager class bound to its options (it takes the request)."""
        raise NotImplementedError


class AnthropicProvider(Provider):
    name = "anthropic"

    def response_type(self) -> Any:
        from anthropic.types import Message

        return Message

    def accumulator(self, kwargs: dict[str, Any]) -> tuple[Feed, Final]:
        from anthropic.lib.streaming._messages import accumulate_event

        state: dict[str, Any] = {"snapshot": None, "bufs": {}}

        def feed(event: Any) -> None:
            state["snapshot"] = accumulate_event(
                event=event, current_snapshot=state["snapshot"], json_bufs=state["bufs"]
            )

        def final() -> tuple[Any, Any]:
            message = state["snapshot"]
            return message, getattr(message, "usage", None)

        return feed, final

    def stream_events(self, answer: RecordedAnswer) -> list[Any]:
        from anthropic.types import RawMessageStreamEvent
        from pydantic import TypeAdapter

        recorded = all_typed(answer.chunks, ANTHROPIC_STREAM_EVENTS)
        events = answer.chunks if recorded else anthropic_stream(answer.body)
        adapter = TypeAdapter(RawMessageStreamEvent)
        return [adapter.validate_python(event) for event in events]

    def stream_helper(
        self, kwargs: dict[str, Any], is_async: bool
    ) -> tuple[dict[str, Any], Callable[[Any], Any]]:
        from anthropic import NOT_GIVEN
        from anthropic.lib.streaming import AsyncMessageStreamManager, MessageStreamManager

        if kwargs.get("output_format") is not None:
            raise TypeError(
                "traced messages.stream(): pass output_config={'format': ...} instead of output_format"
            )
        body = {k: v for k, v in kwargs.items() if k != "output_format"}
        manager = AsyncMessageStreamManager if is_async else MessageStreamManager
        return {**body, "stream": True}, partial(manager, output_format=NOT_GIVEN)


class OpenAIProvider(Provider):
    name = "openai"

    def response_type(self) -> Any:
        from openai.types.chat import ChatCompletion

        return ChatCompletion

    def accumulator(self, kwargs: dict[str, Any]) -> tuple[Feed, Final]:
        from openai.lib.streaming.chat import ChatCompletionStreamState

        options: dict[str, Any] = {}
        if kwargs.get("tools"):
            options["input_tools"] = kwargs["tools"]
        if kwargs.get("response_format") is not None:
            options["response_format"] = kwargs["response_format"]
        state = ChatCompletionStreamState(**options)

        def feed(chunk: Any) -> None:
            state.handle_chunk(chunk)

        def final() -> tuple[Any, Any]:
            completion = state.get_final_completion()
            return completion, getattr(completion, "usage", None)

        return feed, final

    def stream_events(self, answer: RecordedAnswer) -> list[Any]:
        from openai.types.chat import ChatCompletionChunk

        recorded = all_typed(answer.chunks, OPENAI_STREAM_OBJECTS, key="object")
        events = answer.chunks if recorded else openai_stream(answer.body)
        return [ChatCompletionChunk.model_validate(event) for event in events]

    def stream_helper(
        self, kwargs: dict[str, Any], is_async: bool
    ) -> tuple[dict[str, Any], Callable[[Any], Any]]:
        from openai import omit
        from openai.lib._parsing import type_to_response_format_param
        from openai.lib.streaming.chat import AsyncChatCompletionStreamManager, ChatCompletionStreamManager

        body = {**kwargs, "stream": True}
        response_format = kwargs.get("response_format")
        if isinstance(response_format, type):  # a pydantic class: its JSON schema goes on the wire
            body["response_format"] = type_to_response_format_param(response_format)
        manager = AsyncChatCompletionStreamManager if is_async else ChatCompletionStreamManager
        options = {
            "response_format": omit if response_format is None else response_format,
            "input_tools": kwargs.get("tools", omit),
        }
        return body, partial(manager, **options)


ANTHROPIC_STREAM_EVENTS = frozenset(
    {
        "message_start",
        "message_delta",
        "message_stop",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
    }
)
OPENAI_STREAM_OBJECTS = frozenset({"chat.completion.chunk"})


def all_typed(chunks: list[dict[str, Any]], types: frozenset[str], *, key: str = "type") -> bool:
    return bool(chunks) and all(c.get(key) in types for c in chunks)


def anthropic_stream(message: dict[str, Any]) -> list[dict[str, Any]]:
    """Stream events that a Messages stream of ``message`` would have sent."""
    usage = dict(message.get("usage") or {})
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(message.get("content") or []):
        kind = block.get("type")
        deltas: list[dict[str, Any]] = []
        opening = dict(block)
        if kind == "text":
            opening["text"] = ""
            deltas.append({"type": "text_delta", "text": block.get("text", "")})
        elif kind == "thinking":
            opening.update(thinking="", signature="")
            deltas.append({"type": "thinking_delta", "thinking": block.get("thinking", "")})
            deltas.append({"type": "signature_delta", "signature": block.get("signature", "")})
        elif kind == "tool_use":
            opening["input"] = {}
            deltas.append({"type": "input_json_delta", "partial_json": json.dumps(block.get("input") or {})})
        events.append({"type": "content_block_start", "index": index, "content_block": opening})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    stop = {"stop_reason": message.get("stop_reason"), "stop_sequence": message.get("stop_sequence")}
    events.append(
        {"type": "message_delta", "delta": stop, "usage": {"output_tokens": usage.get("output_tokens", 0)}}
    )
    events.append({"type": "message_stop"})
    return events


def openai_stream(completion: dict[str, Any]) -> list[dict[str, Any]]:
    """Chunks that a Chat Completions stream of ``completion`` would have sent (usage last)."""
    kept = ("id", "created", "model", "system_fingerprint", "service_tier")
    base = {k: completion[k] for k in kept if k in completion}
    base["object"] = "chat.completion.chunk"
    chunks: list[dict[str, Any]] = []
    for choice in completion.get("choices") or []:
        message = choice.get("message") or {}
        delta = {k: message[k] for k in ("role", "content", "refusal") if message.get(k) is not None}
        calls = message.get("tool_calls") or []
        if calls:
            delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(calls)]
        index = choice.get("index", 0)
        end = {"index": index, "delta": {}, "finish_reason": choice.get("finish_reason")}
        chunks.append({**base, "choices": [{"index": index, "delta": delta, "finish_reason": None}]})
        chunks.append({**base, "choices": [end]})
    if completion.get("usage") is not None:
        chunks.append({**base, "choices": [], "usage": completion["usage"]})
    return chunks
