"""Traced provider clients for host code: the official ``anthropic`` and ``openai`` SDKs, recorded.

    from workbench_sdk import ClientSink, Tracer, WorkbenchClient, traced_anthropic, traced_openai

    wb = WorkbenchClient()  # WORKBENCH_URL, WORKBENCH_TOKEN
    prices = {"claude-haiku-4-5": {"input": 1, "output": 5, "cache_read": 0.1, "cache_write": 1.25}}
    tracer = Tracer(ClientSink(wb, run_id), step_id="parse", prices=prices)
    claude = traced_anthropic(anthropic.Anthropic(), tracer)
    message = claude.messages.create(model="claude-haiku-4-5", max_tokens=200, messages=[...])
    gpt = traced_openai(openai.AsyncOpenAI(), tracer)
    async for chunk in await gpt.chat.completions.create(model="gpt-5-mini", messages=[...], stream=True): ...

Each call gets one correlation id. Its ``model_io`` request event is recorded when the call
starts; its ``stream_chunk`` events (one per SDK stream event), the ``model_io`` response
(provider, model, usage with cached and reasoning tokens, cost from the price table, duration,
the response as payload) are recorded together when it ends (one append). A failed call records
an ``error`` event. The tool calls the model asked for are part of that response (its payload),
not events of their own: a ``tool_call`` event is a tool the host ran, recorded by
:meth:`Tracer.tool_run` / :meth:`Tracer.tool` (name, arguments, result or error, duration, and
the model's tool call id as correlation id; :mod:`workbench_sdk.tools`). Sync, async and
streaming calls are covered; structured output (``response_format`` / ``output_format``) and
tools pass through untouched and are part of the recorded request.

Where events go: any :class:`Sink` (``run_id`` and ``record(events)``). :class:`ClientSink`
sends them to a remote Workbench over REST (:class:`workbench_sdk.client.WorkbenchClient`);
the server has its own sink into a run of its process. From async code a sink's blocking
``record`` runs in a worker thread: through the sink's ``run_blocking`` coroutine function
when it has one (a sink into a database picks the thread its connections live in), else
``asyncio.to_thread``. Usage follows the project's convention: ``inputTokens`` is the whole
prompt (cache reads and writes included) and ``cachedInputTokens`` a part of it;
``outputTokens`` includes reasoning and ``reasoningTokens`` is a part of it. Costs come from a
price table of plain data (:mod:`workbench_sdk.pricing`).

Replays: a ``replay`` callable ``(provider, model, request) -> RecordedAnswer | response body |
None`` is asked before each call; an answer is returned as the SDK's own response type without
calling the provider, and recorded with summary ``replayed``. A streaming call gets a stream of
the SDK's own event types: the recorded stream events when the answer was streamed (recorded
again as they were), else events rebuilt from the recorded response.
``WorkbenchClient.replay_fn()`` answers from the server's response cache.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import Any, Protocol

from workbench_sdk.client import WorkbenchAPIError, WorkbenchClient
from workbench_sdk.events import REPLAYED_SUMMARY, RecordedAnswer, make_event
from workbench_sdk.pricing import PriceTable, price_for
from workbench_sdk.pricing import cost_of as _cost_of
from workbench_sdk.prompt_context import PAYLOAD_KEY as PROMPT_KEY
from workbench_sdk.prompt_context import active_prompt
from workbench_sdk.shapes import AnthropicProvider, Feed, Final, OpenAIProvider, Provider, dump_model
from workbench_sdk.tools import ToolRun, tool_run_events

__all__ = [
    "BudgetExceeded",
    "Call",
    "ClientSink",
    "RecordedAnswer",
    "ReplayFn",
    "Sink",
    "ToolRun",
    "Tracer",
    "arecord",
    "cost_of",
    "in_thread",
    "traced_anthropic",
    "traced_openai",
    "usage_of",
]


ReplayFn = Callable[[str, str, dict[str, Any]], "RecordedAnswer | dict[str, Any] | None"]
# A stream accumulator: feed it the SDK's stream events, then final() -> (response, usage).


# --------------------------------------------------------------------------------------------
# Sinks


class Sink(Protocol):
    run_id: str

    def record(self, events: list[dict[str, Any]]) -> None: ...


class BudgetExceeded(Exception):
    """The run's budget stopped a model call: a person stopped the run at its ``budget`` gate, or
    the server refused the call (the message says why, in words). The provider was not called."""


class ClientSink:
    """Into a run of a remote Workbench over REST (:class:`workbench_sdk.client.WorkbenchClient`)."""

    def __init__(self, client: WorkbenchClient, run_id: str) -> None:
        self.client = client
        self.run_id = run_id

    def record(self, events: list[dict[str, Any]]) -> None:
        self.client.append_events(self.run_id, events)

    def budget_check(self, step_id: str | None) -> None:
        """Before a model call: return when the run's budget allows it; while the run waits at its
        ``budget`` gate, wait (long polls) for a person's decision, calling nothing; raise
        :class:`BudgetExceeded` when they stop it. A server without budgets allows every call."""
        while True:
            try:
                answer = self.client.check_budget(self.run_id, step_id)
            except WorkbenchAPIError as exc:
                if exc.code in ("HTTP_404", "HTTP_405"):
                    return  # an older server: no budgets
                raise
            if answer.get("allowed"):
                return
            gate = answer.get("gate")
            if not gate:
                raise BudgetExceeded(answer.get("message") or "the run's budget refused the call")
            decided = self._wait(gate)
            if decided.get("status") == "closed" or decided.get("decision") not in ("approved", "edited"):
                why = decided.get("note") or answer.get("message") or "stopped at the run's budget"
                raise BudgetExceeded(why)
            # a person allowed more (the decision names the new limit): ask again

    def _wait(self, gate: dict[str, Any]) -> dict[str, Any]:
        while True:
            answer = self.client.wait_for_gate(
                self.run_id,
                step_id=gate["stepId"],
                gate=gate["gate"],
                checkpoint=gate.get("checkpoint"),
                after_seq=int(gate["afterSeq"]),
            )
            if answer.get("status") != "pending":
                return answer


# --------------------------------------------------------------------------------------------
# Usage and cost


def _plain(usage: Any) -> dict[str, Any]:
    return usage.model_dump() if hasattr(usage, "model_dump") else dict(usage)


def usage_of(provider: str, usage: Any) -> dict[str, Any] | None:
    """The protocol's ``model_io.usage`` from an SDK usage object (or dict), under the OTel GenAI
    conventions: ``inputTokens`` is the whole prompt (cache reads and writes are parts of it),
    ``outputTokens`` includes the reasoning (``reasoningTokens`` a part of it). Reads Anthropic
    Messages (``input_tokens`` there excludes the cache), OpenAI Chat Completions
    (``prompt_tokens``) and OpenAI Responses (``input_tokens`` with ``input_tokens_details``)."""
    if usage is None:
        return None
    u = _plain(usage)
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
    if "prompt_tokens" not in u and "input_tokens" in u:  # the Responses API's usage
        inp = u.get("input_tokens") or 0
        out = u.get("output_tokens") or 0
        cached = (u.get("input_tokens_details") or {}).get("cached_tokens") or 0
        reasoning = (u.get("output_tokens_details") or {}).get("reasoning_tokens")
    else:
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


def _cache_write_tokens(provider: str, usage: Any) -> tuple[int, int]:
    """(cache writes, of which 1 h) of an Anthropic usage (``cache_creation`` splits 5 min / 1 h)."""
    if provider != "anthropic" or usage is None:
        return 0, 0
    u = _plain(usage)
    split = u.get("cache_creation") or {}
    return u.get("cache_creation_input_tokens") or 0, split.get("ephemeral_1h_input_tokens") or 0


def cost_of(
    usage: dict[str, Any] | None, price: Any, *, cache_write_tokens: int = 0, cache_write_1h_tokens: int = 0
) -> dict[str, Any] | None:
    """``model_io.cost`` from a usage and a price row (a dict or an object with ``input``,
    ``output``, ``cache_read``, ``cache_write``, ``cache_write_1h``, ``currency``); None if unknown."""
    return _cost_of(
        usage, price, cache_write_tokens=cache_write_tokens, cache_write_1h_tokens=cache_write_1h_tokens
    )


# --------------------------------------------------------------------------------------------
# The tracer and one call


def _request_payload(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in kwargs.items():
        if key in ("extra_headers", "timeout"):
            continue  # transport settings, possibly secrets
        if isinstance(value, type):  # a pydantic class given as response format
            value = {"pydantic": value.__name__}
        try:
            json.dumps(value, default=dump_model)
            out[key] = json.loads(json.dumps(value, default=dump_model))
        except (TypeError, ValueError):
            out[key] = repr(value)
    return out


class Tracer:
    def __init__(
        self,
        sink: Sink,
        *,
        step_id: str | None = None,
        prices: PriceTable | None = None,
        replay: ReplayFn | None = None,
        record_chunks: bool = True,
        budget: bool = True,
    ) -> None:
        """``prices``: ``{model or (provider, model): price row}`` (see :mod:`workbench_sdk.pricing`).
        Without it, a tracer recording through a :class:`ClientSink` prices calls from the server's
        effective table (``WorkbenchClient.prices()``: the workspace's own prices, else
        genai-prices), read when a call first needs it and cached by the client."""
        self.sink = sink
        self.step_id = step_id
        # a plain dict is copied; another mapping (a table that looks prices up) is kept as it is
        self.prices = dict(prices or {}) if prices is None or type(prices) is dict else prices
        self.server_prices = prices is None and isinstance(getattr(sink, "client", None), WorkbenchClient)
        self.replay = replay
        self.record_chunks = record_chunks
        # before each call, a sink that knows budgets (ClientSink) asks the server: a run that
        # would pass its budget waits at its ``budget`` gate and nothing is called meanwhile
        self.budget = budget

    def price(self, provider: str, *models: str | None) -> Any:
        """The price row of the first of ``models`` the table knows (None: the cost is unknown)."""
        for model in models:
            row = price_for(self.prices, provider, model)
            if row is not None:
                return row
        if self.server_prices:
            for model in models:
                if not model:
                    continue
                try:
                    table = self.sink.client.prices([f"{provider}:{model}"])  # type: ignore[attr-defined]
                except WorkbenchAPIError:
                    return None  # the cost stays unknown; the call is still recorded
                if model in table:
                    return table[model]
        return None

    async def run_blocking(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Blocking work (the sink, the replay lookup) from async code, in a worker thread."""
        return await in_thread(self.sink, fn, *args)

    def event(self, type: str, **fields: Any) -> dict[str, Any]:
        if self.step_id is not None:
            fields.setdefault("stepId", self.step_id)
        return make_event(self.sink.run_id, type, **fields)

    def _begin(
        self, provider: str, model: str, request: Mapping[str, Any]
    ) -> tuple[Call, list[dict[str, Any]]]:
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

    def check_budget(self) -> None:
        """Before a model call: the run's budget allows it, or this waits for a person at the run's
        ``budget`` gate (raises :class:`BudgetExceeded` when they stop the run there)."""
        check = getattr(self.sink, "budget_check", None) if self.budget else None
        if check is not None:
            check(self.step_id)

    def begin(self, provider: str, model: str, request: Mapping[str, Any]) -> Call:
        self.check_budget()
        call, events = self._begin(provider, model, request)
        self.sink.record(events)
        return call

    async def abegin(self, provider: str, model: str, request: Mapping[str, Any]) -> Call:
        if self.budget and getattr(self.sink, "budget_check", None) is not None:
            await self.run_blocking(self.check_budget)
        call, events = self._begin(provider, model, request)
        await arecord(self.sink, events)
        return call

    def tool(
        self,
        name: str,
        *,
        args: Any = None,
        result: Any = None,
        error: BaseException | str | Mapping[str, Any] | None = None,
        call_id: str | None = None,
        duration_ms: float | None = None,
        correlation_id: str | None = None,
    ) -> None:
        """Record a tool the host ran: its arguments, its result (or ``error``), how long it took,
        and ``call_id``, the tool call id the model asked with (``correlation_id`` is the older
        name). See :mod:`workbench_sdk.tools`; :meth:`tool_run` measures and catches for you."""
        self.sink.record(
            tool_run_events(
                self.sink.run_id,
                name,
                args=args,
                result=result,
                has_result=result is not None,
                error=error,
                call_id=call_id or correlation_id,
                duration_ms=duration_ms,
                step_id=self.step_id,
            )
        )

    def tool_run(self, call_or_name: Any, args: Any = None, *, call_id: str | None = None) -> ToolRun:
        """A block that runs one tool, recorded when it ends (``with`` or ``async with``)::

            for call in completion.choices[0].message.tool_calls or []:
                with tracer.tool_run(call) as tool:      # name, arguments and id from the call
                    tool.result = TOOLS[tool.name](**tool.args)

        ``call_or_name``: a tool call the model asked for (OpenAI's, an Anthropic ``tool_use``
        block, or a dict of either) or the tool's name with ``args``. An exception leaving the
        block is recorded as the run's error and raised on; a call the host does not run is
        simply not given a block (it stays in the model's response only)."""
        return ToolRun(
            call_or_name,
            args,
            call_id=call_id,
            run_id=self.sink.run_id,
            step_id=self.step_id,
            record=self.sink.record,
            arecord=lambda events: arecord(self.sink, events),
        )


async def arecord(sink: Sink, events: list[dict[str, Any]]) -> None:
    """Record from async code: the sink (blocking HTTP, a database) runs in a worker thread."""
    await in_thread(sink, sink.record, events)


async def in_thread(sink: Sink, fn: Callable[..., Any], *args: Any) -> Any:
    """Run ``fn(*args)`` from async code in a worker thread: through the sink's ``run_blocking``
    when it has one (a sink into a database picks the thread its connections live in), else
    ``asyncio.to_thread``."""
    runner: Callable[..., Awaitable[Any]] | None = getattr(sink, "run_blocking", None)
    if runner is not None:
        return await runner(fn, *args)
    return await asyncio.to_thread(fn, *args)


class Call:
    """One provider call: its correlation id, start time and the stream chunks not yet recorded."""

    def __init__(self, tracer: Tracer, provider: str, model: str) -> None:
        self.tracer = tracer
        self.provider = provider
        self.model = model
        self.correlation_id = f"call_{uuid.uuid4()}"
        self.started = time.monotonic()
        self.pending: list[dict[str, Any]] = []
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
                    payload=dump_model(payload),
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

    def _finish(self, response: Any, *, usage: Any, summary: str | None = None) -> list[dict[str, Any]]:
        if self.done:
            return []
        self.done = True
        usage_doc = usage_of(self.provider, usage)
        model = getattr(response, "model", None) or self.model
        price = self.tracer.price(self.provider, model, self.model)
        write, hour = _cache_write_tokens(self.provider, usage)
        cost = cost_of(usage_doc, price, cache_write_tokens=write, cache_write_1h_tokens=hour)
        fields: dict[str, Any] = {
            "correlationId": self.correlation_id,
            "direction": "response",
            "provider": self.provider,
            "model": model,
            "durationMs": round((time.monotonic() - self.started) * 1000, 3),
            "payload": dump_model(response),
        }
        if usage_doc is not None:
            fields["usage"] = usage_doc
        if cost is not None:
            fields["cost"] = cost
            source = price.get("source") if isinstance(price, dict) else None
            if source and isinstance(fields["payload"], dict):
                # which source priced the call (the protocol's cost object takes no extra keys)
                fields["payload"] = {
                    **fields["payload"],
                    "workbench.pricing": {"source": source, "model": model},
                }
        prompt_ref = active_prompt.get()
        if prompt_ref is not None and isinstance(fields["payload"], dict):
            # the prompt version this call used (Prompt.compile): the runs list filters by it
            fields["payload"] = {**fields["payload"], PROMPT_KEY: dict(prompt_ref)}
        if summary:
            fields["summary"] = summary
        # the tool calls the model asked for stay in the payload: a tool_call event is a tool run
        return [*self.pending, self.tracer.event("model_io", **fields)]

    def _fail(self, exc: BaseException) -> list[dict[str, Any]]:
        if self.done:
            return []
        self.done = True
        message = f"{type(exc).__name__}: {exc}"[:2000]
        return [*self.pending, self.tracer.event("error", correlationId=self.correlation_id, message=message)]


class _NoResponse:
    """Stands for the HTTP response of a stream answered from the cache (there is none)."""

    headers: dict[str, str] = {}

    def close(self) -> None:
        pass

    async def aclose(self) -> None:
        pass


class _RecordedStream:
    """Recorded SDK stream events, delivered like the SDK's stream (no request behind them)."""

    def __init__(self, events: list[Any]) -> None:
        self._events = events
        self.response = _NoResponse()

    def __iter__(self) -> Iterator[Any]:
        return iter(self._events)

    def close(self) -> None:
        pass


class _AsyncRecordedStream(_RecordedStream):
    async def __aiter__(self) -> AsyncIterator[Any]:
        for event in self._events:
            yield event

    # the async twin's close is awaited, as the SDK's AsyncStream.close is (hence the ignore)
    async def close(self) -> None:  # type: ignore[override]
        pass


class _TracedStream:
    """Wraps an SDK stream (sync): yields its events unchanged while recording them."""

    def __init__(
        self,
        stream: Any,
        call: Call,
        feed: Feed,
        final: Final,
        provider: Provider,
        summary: str | None = None,
    ) -> None:
        self._stream = stream
        self._call = call
        self._feed = feed
        self._final = final
        self._provider = provider
        self._summary = summary

    def __iter__(self) -> Iterator[Any]:
        try:
            for event in self._stream:
                self._call.chunk(event)
                self._feed(event)
                yield event
        except BaseException as exc:
            self._call.fail(exc)
            raise
        self._end()

    def _end(self) -> None:
        response, usage = self._final()
        self._call.finish(response, usage=usage, summary=self._summary)

    def __enter__(self) -> _TracedStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if not self._call.done:
            self._call.fail(RuntimeError("stream closed before it ended"))
        self._stream.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _AsyncTracedStream(_TracedStream):
    async def __aiter__(self) -> AsyncIterator[Any]:
        try:
            async for event in self._stream:
                self._call.chunk(event)
                self._feed(event)
                yield event
        except BaseException as exc:
            await self._call.afail(exc)
            raise
        response, usage = self._final()
        await self._call.afinish(response, usage=usage, summary=self._summary)

    async def __aenter__(self) -> _AsyncTracedStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if not self._call.done:
            await self._call.afail(RuntimeError("stream closed before it ended"))
        await self._stream.close()

    # as the SDK's AsyncStream.close (its stream helpers await it); hence the ignore
    async def close(self) -> None:  # type: ignore[override]
        await self.aclose()


class _Endpoint:
    """``messages`` (Anthropic) or ``chat.completions`` (OpenAI), with ``create`` recorded."""

    def __init__(self, target: Any, tracer: Tracer, provider: Provider, is_async: bool) -> None:
        self._target = target
        self._tracer = tracer
        self._provider = provider
        self._is_async = is_async

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)

    def _replayed(self, model: str, kwargs: dict[str, Any]) -> Any:
        """The recorded answer to this call as the SDK would return it (a response, or for a
        streaming call the list of its stream events), or None to ask the provider."""
        if self._tracer.replay is None:
            return None
        answer = self._tracer.replay(self._provider.name, model, _request_payload(kwargs))
        if answer is None:
            return None
        if not isinstance(answer, RecordedAnswer):
            answer = RecordedAnswer(answer)
        from pydantic import ValidationError

        try:
            if kwargs.get("stream"):
                return self._provider.stream_events(answer)
            return self._provider.response_type().model_validate(answer.body)
        except ValidationError:  # recorded in a shape this SDK does not read: ask the provider
            return None

    def _replayed_stream(self, events: list[Any], call: Call, kwargs: dict[str, Any]) -> _TracedStream:
        feed, final = self._provider.accumulator(kwargs)
        if self._is_async:
            stream = _AsyncRecordedStream(events)
            return _AsyncTracedStream(stream, call, feed, final, self._provider, summary=REPLAYED_SUMMARY)
        return _TracedStream(
            _RecordedStream(events), call, feed, final, self._provider, summary=REPLAYED_SUMMARY
        )

    def create(self, **kwargs: Any) -> Any:
        if self._is_async:
            return self._acreate(**kwargs)
        model = kwargs.get("model", "")
        call = self._tracer.begin(self._provider.name, model, kwargs)
        replayed = self._replayed(model, kwargs)
        if isinstance(replayed, list):
            return self._replayed_stream(replayed, call, kwargs)
        if replayed is not None:
            call.finish(replayed, usage=replayed.usage, summary=REPLAYED_SUMMARY)
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
        call.finish(result, usage=getattr(result, "usage", None))
        return result

    async def _acreate(self, **kwargs: Any) -> Any:
        model = kwargs.get("model", "")
        call = await self._tracer.abegin(self._provider.name, model, kwargs)
        replayed = await self._tracer.run_blocking(self._replayed, model, kwargs)  # may ask a server
        if isinstance(replayed, list):
            return self._replayed_stream(replayed, call, kwargs)
        if replayed is not None:
            await call.afinish(replayed, usage=replayed.usage, summary=REPLAYED_SUMMARY)
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
        await call.afinish(result, usage=getattr(result, "usage", None))
        return result

    def stream(self, **kwargs: Any) -> Any:
        """The SDK's streaming helper (Anthropic ``messages.stream``, OpenAI
        ``chat.completions.stream``, used as a context manager) over a traced
        ``create(stream=True)``: recorded like it, and answered from the replay cache like it."""
        body, manager = self._provider.stream_helper(kwargs, self._is_async)
        if self._is_async:
            return manager(self._acreate(**body))
        return manager(lambda: self.create(**body))

    def _stream_options(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        # OpenAI sends usage in a stream only when asked; ask, so the ledger has it.
        if self._provider.name == "openai" and kwargs.get("stream") and "stream_options" not in kwargs:
            return {**kwargs, "stream_options": {"include_usage": True}}
        return kwargs


class _Proxy:
    def __init__(self, client: Any, overrides: dict[str, Any]) -> None:
        self._client = client
        self._overrides = overrides

    def __getattr__(self, name: str) -> Any:
        if name in self._overrides:
            return self._overrides[name]
        return getattr(self._client, name)


def _is_async(client: Any) -> bool:
    return type(client).__name__.startswith("Async")


def traced_anthropic(client: Any, tracer: Tracer) -> Any:
    """An ``anthropic.Anthropic`` / ``AsyncAnthropic`` whose ``messages.create`` is recorded."""
    messages = _Endpoint(client.messages, tracer, AnthropicProvider(), _is_async(client))
    return _Proxy(client, {"messages": messages})


def traced_openai(client: Any, tracer: Tracer) -> Any:
    """An ``openai.OpenAI`` / ``AsyncOpenAI`` whose ``chat.completions.create`` is recorded."""
    completions = _Endpoint(client.chat.completions, tracer, OpenAIProvider(), _is_async(client))
    chat = _Proxy(client.chat, {"completions": completions})
    return _Proxy(client, {"chat": chat})
