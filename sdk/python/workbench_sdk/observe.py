"""Zero-config tracing: ``@observe`` and drop-in wrappers of the official provider clients.

    import anthropic, openai
    import workbench_sdk as wb                     # WORKBENCH_URL / WORKBENCH_TOKEN from the environment

    gpt = wb.openai(openai.OpenAI())               # or wb.anthropic(anthropic.Anthropic()), async too

    @wb.observe()
    def summarize(text: str) -> str:               # a run (or, inside another observed call, a step)
        return gpt.chat.completions.create(model="gpt-5-mini", messages=[...]).choices[0].message.content

- The outermost observed call starts an *external* run (workflow: one step named after the
  function) and ends it: ``completed``, or ``failed`` with the exception. Observed calls inside
  it (found through ``contextvars``, so threads started with a copied context and asyncio tasks
  follow) are steps of that run; a step called again is its next attempt.
- Inputs and outputs are artifacts of the step: ``<step>.input`` (the bound arguments, ``self``
  left out) and ``<step>.output`` (the return value, when not None), as JSON.
- Calls through the wrapped clients inside an observed call record a ``model_io`` request and
  response (usage, cost from the price table; the tool calls the model asked for are part of the
  response) and stream chunks, on the current step. Outside any observed call they are not recorded.
- A tool the host runs is recorded by ``with wb.tool(call) as t: t.result = ...`` (a
  ``tool_call`` event with name, arguments, result or error, duration, and the model's tool call
  id; :mod:`workbench_sdk.tools`). A requested call the host does not run is not a ``tool_call``.
- Prices: the server's effective table (``GET /api/prices``, read by the tracer when a call first
  needs it), unless ``configure(prices=...)`` gives one.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from workbench_sdk.client import WorkbenchClient
from workbench_sdk.pricing import PriceTable
from workbench_sdk.run import RemoteRun, error_of
from workbench_sdk.tools import ToolRun
from workbench_sdk.traced import Tracer, traced_anthropic, traced_openai

__all__ = [
    "OBSERVED_TYPE",
    "anthropic",
    "configure",
    "current_run",
    "current_step",
    "observe",
    "openai",
    "scope",
    "tool",
]

F = TypeVar("F", bound=Callable[..., Any])
OBSERVED_TYPE = "workbench.observed"


@dataclass(frozen=True)
class Scope:
    """Where recording goes now: a run and the step that is running in it (None: the run itself)."""

    run: RemoteRun
    step_id: str | None

    def tracer(self) -> Tracer:
        return self.run.tracer(self.step_id)


_scope: ContextVar[Scope | None] = ContextVar("workbench_scope", default=None)


class _Config:
    client: WorkbenchClient | None = None
    prices: PriceTable | None = None
    prices_loaded = False


_config = _Config()


def configure(
    *,
    client: WorkbenchClient | None = None,
    url: str | None = None,
    token: str | None = None,
    workspace: str | None = None,
    prices: PriceTable | None = None,
) -> WorkbenchClient:
    """Set the client (or its URL and token) and the price table used by ``observe`` and the
    wrapped clients. Without it they read ``WORKBENCH_URL`` / ``WORKBENCH_TOKEN`` on first use."""
    if client is None and (url or token or workspace):
        client = WorkbenchClient(url, token, workspace=workspace)
    if client is not None:
        _config.client = client
    if prices is not None:
        _config.prices, _config.prices_loaded = dict(prices), True
    return default_client()


def default_client() -> WorkbenchClient:
    if _config.client is None:
        _config.client = WorkbenchClient()
    return _config.client


def default_prices(client: WorkbenchClient) -> PriceTable | None:
    """The configured price table, or None: the tracer then prices each call from the server's
    effective table (``WorkbenchClient.prices()``, ``GET /api/prices``, cached by the client)."""
    return _config.prices if _config.prices_loaded else None


def current_run() -> RemoteRun | None:
    """The run the current observed call records into (None outside any)."""
    found = _scope.get()
    return found.run if found else None


def current_step() -> str | None:
    found = _scope.get()
    return found.step_id if found else None


@contextmanager
def scope(run: RemoteRun, step_id: str | None = None) -> Iterator[Scope]:
    """Record into ``run`` (and ``step_id``) inside the block: what adapters use around a node."""
    token = _scope.set(Scope(run, step_id))
    try:
        yield _scope.get()  # type: ignore[misc]
    finally:
        _scope.reset(token)


# --------------------------------------------------------------------------------------------
# @observe


def jsonable(value: Any) -> Any:
    """``value`` as JSON data (pydantic models dumped, dataclasses as dicts, the rest as repr)."""
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    return json.loads(json.dumps(value, default=_fallback))


def _fallback(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return repr(value)


def _inputs(signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return {"args": jsonable(list(args)), "kwargs": jsonable(kwargs)}
    return {k: jsonable(v) for k, v in bound.arguments.items() if k not in ("self", "cls")}


class _Call:
    """One observed call: opens its run or step, records input, output and the outcome."""

    def __init__(self, name: str, options: dict[str, Any]) -> None:
        self.name = name
        self.options = options
        self.parent = _scope.get()
        self.owns_run = self.parent is None
        self.run: RemoteRun | None = None

    def open(self, inputs: dict[str, Any] | None) -> Scope:
        if self.parent is None:
            client = default_client()
            workflow = {"id": self.name, "version": 0, "steps": [{"id": self.name}]}
            self.run = RemoteRun.start(
                client,
                workflow=workflow,
                title=self.options.get("title") or self.name,
                tags=self.options.get("tags"),
                prices=default_prices(client),
            )
        else:
            self.run = self.parent.run
        self.run.start_step(self.name)
        if inputs is not None:
            self.run.artifact(f"{self.name}.input", inputs, type_id=OBSERVED_TYPE, step_id=self.name)
        return Scope(self.run, self.name)

    def close(self, result: Any) -> None:
        assert self.run is not None
        if self.options.get("capture_output", True) and result is not None:
            data = jsonable(result)
            self.run.artifact(f"{self.name}.output", data, type_id=OBSERVED_TYPE, step_id=self.name)
        self.run.complete_step(self.name)
        if self.owns_run:
            self.run.finish()

    def failed(self, exc: BaseException) -> None:
        if self.run is None:
            return
        error = error_of(exc)
        self.run.complete_step(self.name, ok=False, error=error)
        if self.owns_run:
            self.run.fail(error["message"], code=error["code"])


@overload
def observe(fn: F, /) -> F: ...
@overload
def observe(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    title: str | None = None,
    tags: list[str] | None = None,
    capture_input: bool = True,
    capture_output: bool = True,
) -> Callable[[F], F]: ...


def observe(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    title: str | None = None,
    tags: list[str] | None = None,
    capture_input: bool = True,
    capture_output: bool = True,
) -> Any:
    """Record calls of a function (sync or async) as a run, or as a step of the current run.

    ``name``: the step id (default: the function's name); ``title``/``tags``: of a run it starts.
    The decorated function's ``last_run`` is the :class:`RemoteRun` its latest outermost call started."""
    options = {"title": title, "tags": tags, "capture_output": capture_output}

    def decorate(func: Callable[..., Any]) -> Callable[..., Any]:
        step = name or func.__name__
        signature = inspect.signature(func)

        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def awrapper(*args: Any, **kwargs: Any) -> Any:
                import asyncio  # only async callers pay for it

                call = _Call(step, options)
                inputs = _inputs(signature, args, kwargs) if capture_input else None
                try:
                    opened = await asyncio.to_thread(call.open, inputs)
                    token = _scope.set(opened)
                    try:
                        result = await func(*args, **kwargs)
                    finally:
                        _scope.reset(token)
                except BaseException as exc:
                    await asyncio.to_thread(call.failed, exc)
                    raise
                finally:
                    if call.owns_run and call.run is not None:
                        awrapper.last_run = call.run  # type: ignore[attr-defined]
                await asyncio.to_thread(call.close, result)
                return result

            awrapper.last_run = None  # type: ignore[attr-defined]
            return awrapper

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            call = _Call(step, options)
            inputs = _inputs(signature, args, kwargs) if capture_input else None
            try:
                opened = call.open(inputs)
                token = _scope.set(opened)
                try:
                    result = func(*args, **kwargs)
                finally:
                    _scope.reset(token)
            except BaseException as exc:
                call.failed(exc)
                raise
            finally:
                if call.owns_run and call.run is not None:
                    wrapper.last_run = call.run  # type: ignore[attr-defined]
            call.close(result)
            return result

        wrapper.last_run = None  # type: ignore[attr-defined]
        return wrapper

    if fn is not None:
        return decorate(fn)
    return decorate


def tool(call_or_name: Any, args: Any = None, *, call_id: str | None = None) -> ToolRun:
    """A block that runs one tool, recorded into the current observed call when it ends (outside
    any, nothing is recorded and the block still runs); ``with`` or ``async with``::

        for call in message.tool_calls or []:
            with wb.tool(call) as t:                 # name, arguments and id from the call
                t.result = TOOLS[t.name](**t.args)

    ``call_or_name``: a tool call the model asked for (OpenAI's, an Anthropic ``tool_use`` block,
    or a dict of either) or the tool's name with ``args``. An exception leaving the block is the
    run's error (raised on). See :meth:`workbench_sdk.traced.Tracer.tool_run`."""
    found = _scope.get()
    if found is None:
        return ToolRun(call_or_name, args, call_id=call_id, run_id=None)
    return found.tracer().tool_run(call_or_name, args, call_id=call_id)


# --------------------------------------------------------------------------------------------
# Drop-in wrappers of the official clients


class _Scoped:
    """An SDK endpoint (``chat.completions``, ``messages``) whose ``create`` and ``stream`` are
    recorded into the current scope (and pass straight through outside any)."""

    def __init__(self, target: Any, traced: Callable[[Tracer], Any]) -> None:
        self._target = target
        self._traced = traced

    def __getattr__(self, attr: str) -> Any:
        if attr in ("create", "stream"):
            found = _scope.get()
            if found is not None:
                return getattr(self._traced(found.tracer()), attr)
        return getattr(self._target, attr)


class _With:
    def __init__(self, target: Any, overrides: dict[str, Any]) -> None:
        self._target = target
        self._overrides = overrides

    def __getattr__(self, attr: str) -> Any:
        if attr in self._overrides:
            return self._overrides[attr]
        return getattr(self._target, attr)


def openai(client: Any) -> Any:
    """An ``openai.OpenAI`` / ``AsyncOpenAI`` whose ``chat.completions.create`` / ``stream`` are
    recorded into the current observed call (run and step)."""
    completions = _Scoped(client.chat.completions, lambda t: traced_openai(client, t).chat.completions)
    return _With(client, {"chat": _With(client.chat, {"completions": completions})})


def anthropic(client: Any) -> Any:
    """An ``anthropic.Anthropic`` / ``AsyncAnthropic`` whose ``messages.create`` / ``stream`` are
    recorded into the current observed call (run and step)."""
    return _With(
        client, {"messages": _Scoped(client.messages, lambda t: traced_anthropic(client, t).messages)}
    )
