"""Tool runs: what a ``tool_call`` event records, and the helpers that record one.

A ``tool_call`` event is a tool the host *ran*, as on the server's OTLP path (a GenAI
``execute_tool`` span, an OpenInference ``TOOL`` span). The tool calls a model merely *asked
for* are part of its ``model_io`` response (the provider's response payload, the trace page's
conversation); recording them again as ``tool_call`` events made one tool run count twice, and
made a call the host refused or skipped look as if it had run (issue 54).

One tool run is one append of three events with one correlation id, the shape the server makes
of a tool span:

- ``span_started`` (``execute_tool <name>``, its start time; attributes ``gen_ai.operation.name``,
  ``gen_ai.tool.name`` and ``gen_ai.tool.call.id``),
- ``tool_call`` (``name``, ``args``, ``result`` when the tool returned),
- ``span_ended`` (``durationMs``; ``status`` ``ok``, or ``error`` with ``error: {message, code}``
  when the tool raised).

The correlation id is the tool call id the model gave (``call_...`` of OpenAI, ``toolu_...`` of
Anthropic): the id of the requested call in the model's response, so the run and the request
that asked for it are found together. A tool run without one gets ``tool_<uuid>``. The protocol
has no other field for the duration or the error (extra keys inside an event break the
reference's verification), hence the span.

    with tracer.tool_run(call) as tool:        # an OpenAI tool call or an Anthropic tool_use block
        tool.result = get_weather(**tool.args)
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from types import TracebackType
from typing import Any

from workbench_sdk.events import make_event

__all__ = ["ToolRun", "requested_call", "tool_run_events"]

Record = Callable[[list[dict[str, Any]]], None]


def _get(obj: Any, key: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def _args(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value) if value else None
        except ValueError:
            return value
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return value


def requested_call(call: Any) -> tuple[str | None, str, Any]:
    """``(call id, name, arguments)`` of a tool call a model asked for: an OpenAI Chat Completions
    tool call (``{id, function: {name, arguments}}``), an OpenAI Responses ``function_call``
    (``{call_id, name, arguments}``) or an Anthropic ``tool_use`` block (``{id, name, input}``),
    as the SDK's object or a dict. Arguments given as JSON text are parsed."""
    function = _get(call, "function")
    if function is not None:
        return _get(call, "id"), str(_get(function, "name") or "tool"), _args(_get(function, "arguments"))
    call_id = _get(call, "call_id") or _get(call, "id")
    arguments = _get(call, "input")
    if arguments is None:
        arguments = _get(call, "arguments")
    return call_id, str(_get(call, "name") or "tool"), _args(arguments)


def _iso(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def error_info(exc: BaseException | str | Mapping[str, Any]) -> dict[str, Any]:
    """The protocol's error object ``{message, code?}`` of an exception, a text or such an object."""
    if isinstance(exc, Mapping):
        out = {"message": str(exc.get("message") or "tool failed")[:2000]}
        if exc.get("code"):
            out["code"] = str(exc["code"])
        return out
    if isinstance(exc, BaseException):
        return {"message": f"{type(exc).__name__}: {exc}"[:2000], "code": type(exc).__name__}
    return {"message": str(exc)[:2000]}


def tool_run_events(
    run_id: str,
    name: str,
    *,
    args: Any = None,
    result: Any = None,
    has_result: bool = True,
    error: BaseException | str | Mapping[str, Any] | None = None,
    call_id: str | None = None,
    duration_ms: float | None = None,
    step_id: str | None = None,
) -> list[dict[str, Any]]:
    """The events of one tool run that ended now (see the module's note). ``has_result`` False
    (or an ``error``) records no ``result``; ``result=None`` with ``has_result`` is a tool that
    returned nothing (JSON null)."""
    correlation = call_id or f"tool_{uuid.uuid4()}"
    span_id = f"tool_{uuid.uuid4().hex}"
    duration = max(0.0, float(duration_ms or 0.0))
    ended_at = datetime.now(timezone.utc)
    started_at = ended_at - timedelta(milliseconds=duration)
    common = {"correlationId": correlation, "stepId": step_id}
    attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
    if call_id:
        attributes["gen_ai.tool.call.id"] = call_id
    started = make_event(
        run_id,
        "span_started",
        ts=_iso(started_at),
        spanId=span_id,
        name=f"execute_tool {name}",
        kind="internal",
        attributes=attributes,
        **common,
    )
    call = make_event(run_id, "tool_call", ts=_iso(ended_at), name=name, args=args, **common)
    if has_result and error is None:
        call["result"] = result  # null too: the tool ran and returned nothing
    ended = make_event(
        run_id,
        "span_ended",
        ts=_iso(ended_at),
        spanId=span_id,
        status="ok" if error is None else "error",
        durationMs=round(duration, 3),
        **common,
    )
    if error is not None:
        ended["error"] = error_info(error)
    return [started, call, ended]


class ToolRun:
    """One tool run, recorded when the block ends: set ``result`` inside it; an exception
    leaving the block is recorded as the run's error (and raised on). ``args`` and ``call_id``
    are what the model asked for (or what was given); ``skip()`` inside the block records
    nothing (the tool did not run after all). Works with ``with`` and ``async with``;
    ``record`` (or ``arecord`` from async code) receives the events. Without a run to record
    into (``run_id`` None) nothing is recorded and the block still runs."""

    def __init__(
        self,
        call_or_name: Any,
        args: Any = None,
        *,
        call_id: str | None = None,
        run_id: str | None,
        step_id: str | None = None,
        record: Record | None = None,
        arecord: Callable[[list[dict[str, Any]]], Any] | None = None,
    ) -> None:
        if isinstance(call_or_name, str):
            self.name, self.args, self.call_id = call_or_name, args, call_id
        else:
            found_id, self.name, found_args = requested_call(call_or_name)
            self.args = found_args if args is None else args
            self.call_id = call_id or found_id
        self.run_id = run_id
        self.step_id = step_id
        self._record = record
        self._arecord = arecord
        self.result: Any = None
        self.has_result = False
        self.error: BaseException | str | Mapping[str, Any] | None = None
        self.skipped = False
        self.started = time.monotonic()

    def __setattr__(self, key: str, value: Any) -> None:
        if key == "result":
            object.__setattr__(self, "has_result", True)
        object.__setattr__(self, key, value)

    def skip(self) -> None:
        """The tool did not run after all (refused, not needed): nothing is recorded; the call
        the model asked for stays in its response only."""
        self.skipped = True

    def fail(self, error: BaseException | str | Mapping[str, Any]) -> None:
        """Record the run as failed without raising (a tool that reports its failure)."""
        self.error = error

    def events(self) -> list[dict[str, Any]]:
        if self.run_id is None or self.skipped:
            return []
        return tool_run_events(
            self.run_id,
            self.name,
            args=self.args,
            result=self.result,
            has_result=self.has_result,
            error=self.error,
            call_id=self.call_id,
            duration_ms=(time.monotonic() - self.started) * 1000,
            step_id=self.step_id,
        )

    def _close(self, exc: BaseException | None) -> list[dict[str, Any]]:
        if exc is not None and self.error is None:
            self.error = exc
        return self.events()

    def __enter__(self) -> ToolRun:
        self.started = time.monotonic()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        events = self._close(exc)
        if events and self._record is not None:
            self._record(events)

    async def __aenter__(self) -> ToolRun:
        return self.__enter__()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        events = self._close(exc)
        if not events:
            return
        if self._arecord is not None:
            await self._arecord(events)
        elif self._record is not None:
            self._record(events)
