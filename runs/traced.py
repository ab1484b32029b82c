"""Traced provider clients for host code: the official ``anthropic`` and ``openai`` SDKs, recorded.

    from runs.traced import Tracer, SessionSink, traced_anthropic, traced_openai

    tracer = Tracer(SessionSink(run_session), step_id="parse", prices={("anthropic", "claude-haiku-4-5"): price})
    claude = traced_anthropic(anthropic.Anthropic(), tracer)
    message = claude.messages.create(model="claude-haiku-4-5", max_tokens=200, messages=[...])
    gpt = traced_openai(openai.AsyncOpenAI(), tracer)
    async for chunk in await gpt.chat.completions.create(model="gpt-5-mini", messages=[...], stream=True): ...

Each call gets one correlation id. Its ``model_io`` request event is recorded when the call
starts; its ``stream_chunk`` events (one per SDK stream event), the ``model_io`` response
(provider, model, usage with cached and reasoning tokens, cost from the price table, duration,
the response as payload) and a ``tool_call`` event per tool the model asked for are recorded
together when it ends (one append). A failed call records an ``error`` event. Sync, async and
streaming calls are covered; structured output (``response_format`` / ``output_format``) and
tools pass through untouched and are part of the recorded request.

Where events go: :class:`SessionSink` (a :class:`runs.session.RunSession`, in the Workbench
process, through runs.actions) or :class:`ClientSink` (a :class:`runs.client.WorkbenchClient`,
over REST). Usage follows the project's convention: ``inputTokens`` is the whole prompt (cache
reads and writes included) and ``cachedInputTokens`` a part of it; ``outputTokens`` includes
reasoning and ``reasoningTokens`` is a part of it.

Replays: a ``replay`` callable ``(provider, model, request) -> response body | None`` is asked
before each non-streaming call; an answer is returned as the SDK's own response type without
calling the provider, and recorded with summary ``replayed``. ``Tracer.for_session(session)``
sets it for a run that is a replay (``Workbench.replay``): the answers come from the response
cache (``runs.responsecache``), which the write path fills from every recorded call, the replay's
source's answers first.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, Protocol

from runs.client import make_event
from runs.engine.replay import REPLAYED_SUMMARY

ReplayFn = Callable[[str, str, dict], dict | None]


# --------------------------------------------------------------------------------------------
# Sinks


class Sink(Protocol):
    run_id: str

    def record(self, events: list[dict]) -> None: ...


class SessionSink:
    """Into a run of this process (``runs.session.RunSession``), through the actions."""

    def __init__(self, session) -> None:
        self.session = session
        self.run_id = session.run_id

    def record(self, events: list[dict]) -> None:
        self.session.append_events(events)


class ClientSink:
    """Into a run of a remote Workbench over REST (``runs.client.WorkbenchClient``)."""

    def __init__(self, client, run_id: str) -> None:
        self.client = client
        self.run_id = run_id

    def record(self, events: list[dict]) -> None:
        self.client.append_events(self.run_id, events)


# --------------------------------------------------------------------------------------------
# Usage and cost


def usage_of(provider: str, usage: Any) -> dict | None:
    """The protocol's ``model_io.usage`` from an SDK usage object (or dict)."""
    if usage is None:
        return None
    u = usage.model_dump() if hasattr(usage, "model_dump") else dict(usage)
    if provider == "anthropic":
        read = u.get("cache_read_input_tokens") or 0
        write = u.get("cache_creation_input_tokens") or 0
        inp = (u.get("input_tokens") or 0) + read + write
        out = u.get("output_tokens") or 0
        result = {
            "inputTokens": inp,
            "outputTokens": out,
            "totalTokens": inp + out,
            "cachedInputTokens": read,
        }
        return result
    inp = u.get("prompt_tokens") or 0
    out = u.get("completion_tokens") or 0
    cached = ((u.get("prompt_tokens_details") or {}).get("cached_tokens")) or 0
    reasoning = (u.get("completion_tokens_details") or {}).get("reasoning_tokens")
    result = {
        "inputTokens": inp,
        "outputTokens": out,
        "totalTokens": u.get("total_tokens") or inp + out,
        "cachedInputTokens": cached,
    }
    if reasoning is not None:
        result["reasoningTokens"] = reasoning
    return result


def _cache_write_tokens(provider: str, usage: Any) -> int:
    if provider != "anthropic" or usage is None:
        return 0
    u = usage.model_dump() if hasattr(usage, "model_dump") else dict(usage)
    return u.get("cache_creation_input_tokens") or 0


def cost_of(usage: dict | None, price, *, cache_write_tokens: int = 0) -> dict | None:
    """``model_io.cost`` from a usage and a price row (``playground.pricing.Price``); None if unknown."""
    if usage is None or price is None:
        return None
    from playground.pricing import cost, protocol_cost
    from playground.providers.base import Usage

    amount: Decimal | None = cost(
        Usage(
            input_tokens=usage["inputTokens"],
            output_tokens=usage["outputTokens"],
            cache_read_tokens=usage.get("cachedInputTokens", 0),
            cache_write_tokens=cache_write_tokens,
            reasoning_tokens=usage.get("reasoningTokens"),
        ),
        price,
    )
    return protocol_cost(amount, price.currency)


# --------------------------------------------------------------------------------------------
# Replays: answers from the response cache (runs.responsecache, filled by the write path)


def cache_replay(workspace, source_run=None) -> ReplayFn:
    """A ``replay`` answering from the workspace's response cache (``source_run``'s answers first)."""

    def replay(provider: str, model: str, request: dict) -> dict | None:
        from runs import responsecache

        keys = responsecache.request_keys(provider, model, request)
        if not keys:
            return None
        entry = responsecache.lookup(workspace, keys["v2"], prefer_run=source_run)
        if entry is None:
            return None
        payload = responsecache.response_fields(entry).get("payload")
        if not isinstance(payload, dict):
            return None  # recorded without the provider's response body: nothing to hand back
        responsecache.record_hit(entry)
        return payload

    return replay


def replay_for(session) -> ReplayFn | None:
    """For a run that is a replay (``Workbench.replay``): its source's cached answers; else None."""
    from runs.models import RunFork

    run = session.run
    fork = RunFork.objects.filter(run=run).select_related("source").first()
    if fork is None or fork.mode != "replay":
        return None
    return cache_replay(session.workbench.workspace, fork.source)


# --------------------------------------------------------------------------------------------
# The tracer and one call


def _dump(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", exclude_none=True)
    return value


def _request_payload(kwargs: Mapping[str, Any]) -> dict:
    out = {}
    for key, value in kwargs.items():
        if key in ("extra_headers", "timeout"):
            continue  # transport settings, possibly secrets
        if isinstance(value, type):  # a pydantic class given as response format
            value = {"pydantic": value.__name__}
        try:
            json.dumps(value, default=_dump)
            out[key] = json.loads(json.dumps(value, default=_dump))
        except (TypeError, ValueError):
            out[key] = repr(value)
    return out


class Tracer:
    def __init__(
        self,
        sink: Sink,
        *,
        step_id: str | None = None,
        prices: Mapping[tuple[str, str], Any] | None = None,
        replay: ReplayFn | None = None,
        record_chunks: bool = True,
    ) -> None:
        self.sink = sink
        self.step_id = step_id
        self.prices = dict(prices or {})
        self.replay = replay
        self.record_chunks = record_chunks

    @classmethod
    def for_session(cls, session, **kwargs: Any) -> Tracer:
        """A tracer into a run of this process; a replay run answers from its source's cache."""
        kwargs.setdefault("replay", replay_for(session))
        return cls(SessionSink(session), **kwargs)

    def event(self, type: str, **fields: Any) -> dict:
        if self.step_id is not None:
            fields.setdefault("stepId", self.step_id)
        return make_event(self.sink.run_id, type, **fields)

    def _begin(self, provider: str, model: str, request: Mapping[str, Any]) -> tuple[Call, list[dict]]:
        call = Call(self, provider, model)
        event = self.event(
            "model_io",
            correlationId=call.correlation_id,
            direction="request",
            provider=provider,
            model=model,
            payload=_request_payload(request),
        )
        return call, [event]

    def begin(self, provider: str, model: str, request: Mapping[str, Any]) -> Call:
        call, events = self._begin(provider, model, request)
        self.sink.record(events)
        return call

    async def abegin(self, provider: str, model: str, request: Mapping[str, Any]) -> Call:
        call, events = self._begin(provider, model, request)
        await arecord(self.sink, events)
        return call

    def tool(
        self, name: str, *, args: Any = None, result: Any = None, correlation_id: str | None = None
    ) -> None:
        """Record a tool the host ran (with its result)."""
        self.sink.record(
            [self.event("tool_call", name=name, args=args, result=result, correlationId=correlation_id)]
        )


async def arecord(sink: Sink, events: list[dict]) -> None:
    """Record from async code: the sink (database or blocking HTTP) runs in a worker thread."""
    from asgiref.sync import sync_to_async

    await sync_to_async(_record_in_thread, thread_sensitive=True)(sink, events)


def _record_in_thread(sink: Sink, events: list[dict]) -> None:
    sink.record(events)
    if isinstance(sink, SessionSink):  # the worker thread's database connection is not kept open
        from django.db import close_old_connections, connection

        if not connection.in_atomic_block:
            close_old_connections()


class Call:
    """One provider call: its correlation id, start time and the stream chunks not yet recorded."""

    def __init__(self, tracer: Tracer, provider: str, model: str) -> None:
        self.tracer = tracer
        self.provider = provider
        self.model = model
        self.correlation_id = f"call_{uuid.uuid4()}"
        self.started = time.monotonic()
        self.pending: list[dict] = []
        self.done = False

    def chunk(self, payload: Any) -> None:
        if self.tracer.record_chunks:
            self.pending.append(
                self.tracer.event(
                    "model_io",
                    correlationId=self.correlation_id,
                    direction="stream_chunk",
                    provider=self.provider,
                    model=self.model,
                    payload=_dump(payload),
                )
            )

    def finish(self, response: Any, **kw: Any) -> None:
        events = self._finish(response, **kw)
        if events:
            self.tracer.sink.record(events)

    async def afinish(self, response: Any, **kw: Any) -> None:
        events = self._finish(response, **kw)
        if events:
            await arecord(self.tracer.sink, events)

    def fail(self, exc: BaseException) -> None:
        events = self._fail(exc)
        if events:
            self.tracer.sink.record(events)

    async def afail(self, exc: BaseException) -> None:
        events = self._fail(exc)
        if events:
            await arecord(self.tracer.sink, events)

    def _finish(
        self, response: Any, *, usage: Any, tool_calls: list[tuple[str, Any]], summary: str | None = None
    ) -> list[dict]:
        if self.done:
            return []
        self.done = True
        usage_doc = usage_of(self.provider, usage)
        model = getattr(response, "model", None) or self.model
        price = self.tracer.prices.get((self.provider, model)) or self.tracer.prices.get(
            (self.provider, self.model)
        )
        cost = cost_of(usage_doc, price, cache_write_tokens=_cache_write_tokens(self.provider, usage))
        fields: dict[str, Any] = {
            "correlationId": self.correlation_id,
            "direction": "response",
            "provider": self.provider,
            "model": model,
            "durationMs": round((time.monotonic() - self.started) * 1000, 3),
            "payload": _dump(response),
        }
        if usage_doc is not None:
            fields["usage"] = usage_doc
        if cost is not None:
            fields["cost"] = cost
        if summary:
            fields["summary"] = summary
        events = [*self.pending, self.tracer.event("model_io", **fields)]
        events += [
            self.tracer.event("tool_call", correlationId=self.correlation_id, name=name, args=args)
            for name, args in tool_calls
        ]
        return events

    def _fail(self, exc: BaseException) -> list[dict]:
        if self.done:
            return []
        self.done = True
        message = f"{type(exc).__name__}: {exc}"[:2000]
        return [*self.pending, self.tracer.event("error", correlationId=self.correlation_id, message=message)]


# --------------------------------------------------------------------------------------------
# Provider specifics


def _anthropic_tools(message: Any) -> list[tuple[str, Any]]:
    return [
        (b.name, _dump(b.input)) for b in (getattr(message, "content", None) or []) if b.type == "tool_use"
    ]


def _openai_tools(completion: Any) -> list[tuple[str, Any]]:
    out = []
    for choice in getattr(completion, "choices", None) or []:
        for call in getattr(choice.message, "tool_calls", None) or []:
            function = getattr(call, "function", None)
            if function is None:
                continue
            try:
                args = json.loads(function.arguments) if function.arguments else None
            except ValueError:
                args = function.arguments
            out.append((function.name, args))
    return out


class _Provider:
    name: str

    def tools(self, response: Any) -> list[tuple[str, Any]]:
        raise NotImplementedError

    def response_type(self):
        raise NotImplementedError

    def accumulator(self, kwargs: dict):
        raise NotImplementedError


class _Anthropic(_Provider):
    name = "anthropic"

    def tools(self, response):
        return _anthropic_tools(response)

    def response_type(self):
        from anthropic.types import Message

        return Message

    def accumulator(self, kwargs):
        from anthropic.lib.streaming._messages import accumulate_event

        state: dict[str, Any] = {"snapshot": None, "bufs": {}}

        def feed(event):
            state["snapshot"] = accumulate_event(
                event=event, current_snapshot=state["snapshot"], json_bufs=state["bufs"]
            )

        def final():
            message = state["snapshot"]
            return message, getattr(message, "usage", None)

        return feed, final


class _OpenAI(_Provider):
    name = "openai"

    def tools(self, response):
        return _openai_tools(response)

    def response_type(self):
        from openai.types.chat import ChatCompletion

        return ChatCompletion

    def accumulator(self, kwargs):
        from openai.lib.streaming.chat import ChatCompletionStreamState

        options = {}
        if kwargs.get("tools"):
            options["input_tools"] = kwargs["tools"]
        if kwargs.get("response_format") is not None:
            options["response_format"] = kwargs["response_format"]
        state = ChatCompletionStreamState(**options)

        def feed(chunk):
            state.handle_chunk(chunk)

        def final():
            completion = state.get_final_completion()
            return completion, getattr(completion, "usage", None)

        return feed, final


class _TracedStream:
    """Wraps an SDK stream (sync): yields its events unchanged while recording them."""

    def __init__(self, stream, call: Call, feed, final, provider: _Provider) -> None:
        self._stream = stream
        self._call = call
        self._feed = feed
        self._final = final
        self._provider = provider

    def __iter__(self):
        try:
            for event in self._stream:
                self._call.chunk(event)
                self._feed(event)
                yield event
        except BaseException as exc:
            self._call.fail(exc)
            raise
        self._end()

    def _end(self):
        response, usage = self._final()
        self._call.finish(response, usage=usage, tool_calls=self._provider.tools(response))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if not self._call.done:
            self._call.fail(RuntimeError("stream closed before it ended"))
        self._stream.close()

    def __getattr__(self, name):
        return getattr(self._stream, name)


class _AsyncTracedStream(_TracedStream):
    async def __aiter__(self):
        try:
            async for event in self._stream:
                self._call.chunk(event)
                self._feed(event)
                yield event
        except BaseException as exc:
            await self._call.afail(exc)
            raise
        response, usage = self._final()
        await self._call.afinish(response, usage=usage, tool_calls=self._provider.tools(response))

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.aclose()

    async def aclose(self):
        if not self._call.done:
            await self._call.afail(RuntimeError("stream closed before it ended"))
        await self._stream.close()


class _Endpoint:
    """``messages`` (Anthropic) or ``chat.completions`` (OpenAI), with ``create`` recorded."""

    def __init__(self, target, tracer: Tracer, provider: _Provider, is_async: bool) -> None:
        self._target = target
        self._tracer = tracer
        self._provider = provider
        self._is_async = is_async

    def __getattr__(self, name):
        return getattr(self._target, name)

    def _replayed(self, model: str, kwargs: dict):
        if self._tracer.replay is None or kwargs.get("stream"):
            return None
        body = self._tracer.replay(self._provider.name, model, _request_payload(kwargs))
        if body is None:
            return None
        return self._provider.response_type().model_validate(body)

    def create(self, **kwargs):
        if self._is_async:
            return self._acreate(**kwargs)
        model = kwargs.get("model", "")
        call = self._tracer.begin(self._provider.name, model, kwargs)
        replayed = self._replayed(model, kwargs)
        if replayed is not None:
            call.finish(
                replayed,
                usage=replayed.usage,
                tool_calls=self._provider.tools(replayed),
                summary=REPLAYED_SUMMARY,
            )
            return replayed
        kwargs = self._stream_options(kwargs)
        try:
            result = self._target.create(**kwargs)
        except BaseException as exc:
            call.fail(exc)
            raise
        if kwargs.get("stream"):
            feed, final = self._provider.accumulator(kwargs)
            return _TracedStream(result, call, feed, final, self._provider)
        call.finish(result, usage=getattr(result, "usage", None), tool_calls=self._provider.tools(result))
        return result

    async def _acreate(self, **kwargs):
        model = kwargs.get("model", "")
        call = await self._tracer.abegin(self._provider.name, model, kwargs)
        replayed = self._replayed(model, kwargs)
        if replayed is not None:
            tools = self._provider.tools(replayed)
            await call.afinish(replayed, usage=replayed.usage, tool_calls=tools, summary=REPLAYED_SUMMARY)
            return replayed
        kwargs = self._stream_options(kwargs)
        try:
            result = await self._target.create(**kwargs)
        except BaseException as exc:
            await call.afail(exc)
            raise
        if kwargs.get("stream"):
            feed, final = self._provider.accumulator(kwargs)
            return _AsyncTracedStream(result, call, feed, final, self._provider)
        await call.afinish(
            result, usage=getattr(result, "usage", None), tool_calls=self._provider.tools(result)
        )
        return result

    def _stream_options(self, kwargs: dict) -> dict:
        # OpenAI sends usage in a stream only when asked; ask, so the ledger has it.
        if self._provider.name == "openai" and kwargs.get("stream") and "stream_options" not in kwargs:
            return {**kwargs, "stream_options": {"include_usage": True}}
        return kwargs


class _Proxy:
    def __init__(self, client, overrides: dict[str, Any]) -> None:
        self._client = client
        self._overrides = overrides

    def __getattr__(self, name):
        if name in self._overrides:
            return self._overrides[name]
        return getattr(self._client, name)


def _is_async(client) -> bool:
    return type(client).__name__.startswith("Async")


def traced_anthropic(client, tracer: Tracer):
    """An ``anthropic.Anthropic`` / ``AsyncAnthropic`` whose ``messages.create`` is recorded."""
    messages = _Endpoint(client.messages, tracer, _Anthropic(), _is_async(client))
    return _Proxy(client, {"messages": messages})


def traced_openai(client, tracer: Tracer):
    """An ``openai.OpenAI`` / ``AsyncOpenAI`` whose ``chat.completions.create`` is recorded."""
    completions = _Endpoint(client.chat.completions, tracer, _OpenAI(), _is_async(client))
    chat = _Proxy(client.chat, {"completions": completions})
    return _Proxy(client, {"chat": chat})
