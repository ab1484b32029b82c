"""LangGraph adapter: a compiled graph's runs recorded, its ``interrupt()`` calls decided at gates.

    from workbench_sdk.langgraph import WorkbenchGraph

    graph = WorkbenchGraph(builder.compile(checkpointer=InMemorySaver()))
    result = graph.invoke({"topic": "tides"})     # blocks at each interrupt until a reviewer decides

What it records (one external run per ``invoke``; the workflow is the graph's nodes and those of
its edges that do not close a cycle, so a loop back to an earlier node stays a DAG on the wire):

- every node execution is a step attempt: ``step_started`` ... ``step_completed`` (``ok: false``
  with the exception when the node raises); a node that runs again is its next attempt;
- model calls inside nodes through ``workbench_sdk.openai(...)`` / ``anthropic(...)`` land on the
  node's step (the node runs inside :func:`workbench_sdk.observe.scope`);
- every ``interrupt(value)`` is a CHECKPOINT gate on the node (named after the node; the second
  interrupt of one attempt ``<node>-2`` ...), its ``value`` the gate's payload, shown in the gate
  panel. When the reviewer decides, the graph is resumed with ``Command(resume=<decision>)``:
  ``{"decision", "note", "edits", "by", "at", "payload"}`` (``payload``: as the reviewer edited
  it, else the interrupt's value);
- every tool the graph runs (a ``ToolNode``, any LangChain tool invoked in a node) is a tool run
  on the node's step, from LangChain's tool callbacks (:class:`ToolRecorder`): one ``tool_call``
  with name, input, output or error, duration and the tool call id the model asked with
  (:mod:`workbench_sdk.tools`). The tool calls a model only asks for stay in its recorded
  response: a call the graph never runs is no ``tool_call``.

A rejection is the node's to handle: the graph's own edges decide what runs next (back into a
loop, on to another node, or on beside a parallel branch), so the run is marked as one that routes
its rejections (``metadata["workbench.rejections"] = "routed"``) and the server lets the graph move
on once the node that received the rejection ends.

LangGraph runs an interrupted node again from its start when it resumes: that re-run is the same
attempt (no second ``step_started``), so recording is idempotent. The wait is in-process (a long
poll on the server); the graph needs a checkpointer, as for any ``interrupt()``.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, cast
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.errors import GraphBubbleUp, GraphInterrupt
from langgraph.types import Command

from workbench_sdk.client import WorkbenchClient
from workbench_sdk.observe import current_run, default_client, default_prices, jsonable, scope
from workbench_sdk.pricing import PriceTable
from workbench_sdk.run import GateHandle, RemoteRun, error_of
from workbench_sdk.tools import tool_run_events

__all__ = ["ToolRecorder", "WorkbenchGraph", "workflow_of"]

GRAPH_ENDS = ("__start__", "__end__")


def workflow_of(graph: Any, workflow_id: str | None = None) -> dict[str, Any]:
    """The protocol workflow of a compiled graph: its nodes as steps, its edges minus any that
    would close a cycle (the protocol's workflow is a DAG; loops show as attempts instead)."""
    drawn = graph.get_graph()
    steps = [node for node in drawn.nodes if node not in GRAPH_ENDS]
    successors: dict[str, set[str]] = {s: set() for s in steps}
    edges: list[dict[str, str]] = []
    # fixed edges first: a loop is most often closed by a conditional edge back to an earlier node
    for edge in sorted(drawn.edges, key=lambda e: bool(getattr(e, "conditional", False))):
        a, b = edge.source, edge.target
        if a not in successors or b not in successors or a == b or b in successors[a]:
            continue
        if _reaches(successors, b, a):
            continue  # a loop back: recorded as attempts, not as an edge
        successors[a].add(b)
        edges.append({"id": f"e{len(edges) + 1}", "from": a, "to": b})
    return {
        "id": workflow_id or getattr(graph, "name", None) or "langgraph",
        "version": 0,
        "title": workflow_id or getattr(graph, "name", None) or "LangGraph graph",
        "steps": [{"id": s, "title": s} for s in steps],
        "edges": edges,
    }


def _reaches(successors: dict[str, set[str]], start: str, goal: str) -> bool:
    todo, seen = [start], set()
    while todo:
        node = todo.pop()
        if node == goal:
            return True
        if node not in seen:
            seen.add(node)
            todo.extend(successors.get(node, ()))
    return False


@dataclass
class _Session:
    """Per run: nodes suspended at an interrupt (gates asked in their attempt) and open gates."""

    suspended: dict[str, int] = field(default_factory=dict)
    pending: list[tuple[str, GateHandle]] = field(default_factory=list)


def _reason(value: Any) -> str | None:
    if isinstance(value, str):
        return value[:500]
    if isinstance(value, dict):
        for key in ("question", "reason", "message"):
            text = value.get(key)
            if isinstance(text, str):
                return text[:500]
    return None


class _Node(Runnable[Any, Any]):
    """A graph node's runnable, recorded as a step attempt of the current run."""

    name: str  # always the node's name (Runnable declares ``str | None``)

    def __init__(self, bound: Runnable[Any, Any], name: str, adapter: WorkbenchGraph) -> None:
        self.bound = bound
        self.name = name
        self.adapter = adapter

    def _begin(self) -> tuple[RemoteRun, _Session, int] | None:
        run = current_run()
        session = self.adapter.sessions.get(run.run_id) if run is not None else None
        if run is None or session is None:
            return None  # not under WorkbenchGraph.invoke: the node runs unrecorded
        asked = session.suspended.pop(self.name, None)
        if asked is None:  # a resumed node is the same attempt, not a new one
            run.start_step(self.name)
            asked = 0
        return run, session, asked

    def _interrupted(self, run: RemoteRun, session: _Session, asked: int, exc: GraphInterrupt) -> None:
        for item in exc.args[0] if exc.args else ():
            asked += 1
            name = self.name if asked == 1 else f"{self.name}-{asked}"
            value = jsonable(getattr(item, "value", None))
            handle = run.gate(self.name, "CHECKPOINT", name=name, reason=_reason(value), payload=value)
            session.pending.append((getattr(item, "id", name), handle))
        session.suspended[self.name] = asked

    def _end(self, run: RemoteRun, session: _Session, asked: int, exc: BaseException | None) -> None:
        if isinstance(exc, GraphInterrupt):
            self._interrupted(run, session, asked, exc)
        elif exc is None or isinstance(exc, GraphBubbleUp):  # a Command to a parent graph is an end
            run.complete_step(self.name)
        else:
            run.complete_step(self.name, ok=False, error=error_of(exc))

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        begun = self._begin()
        if begun is None:
            return self.bound.invoke(input, config, **kwargs)
        run, session, asked = begun
        try:
            with scope(run, self.name):
                result = self.bound.invoke(input, config, **kwargs)
        except BaseException as exc:
            self._end(run, session, asked, exc)
            raise
        self._end(run, session, asked, None)
        return result

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        import asyncio  # only async graphs pay for it

        begun = await asyncio.to_thread(self._begin)
        if begun is None:
            return await self.bound.ainvoke(input, config, **kwargs)
        run, session, asked = begun
        try:
            with scope(run, self.name):
                result = await self.bound.ainvoke(input, config, **kwargs)
        except BaseException as exc:
            await asyncio.to_thread(self._end, run, session, asked, exc)
            raise
        await asyncio.to_thread(self._end, run, session, asked, None)
        return result


def _parsed(text: Any) -> Any:
    if not isinstance(text, str):
        return jsonable(text)
    try:
        return json.loads(text)
    except ValueError:
        return text


class ToolRecorder(BaseCallbackHandler):
    """LangChain's tool callbacks as tool runs of ``run`` (one ``tool_call`` per tool that ran,
    on the step of the node that ran it)."""

    raise_error = False

    def __init__(self, run: RemoteRun) -> None:
        self.run = run
        self.open: dict[UUID, tuple[str, Any, str | None, str | None, float]] = {}

    def on_tool_start(
        self,
        serialized: dict[str, Any],
        input_str: str,
        *,
        run_id: UUID,
        metadata: dict[str, Any] | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        name = kwargs.get("name") or (serialized or {}).get("name") or "tool"
        args = jsonable(inputs) if inputs is not None else _parsed(input_str)
        step = (metadata or {}).get("langgraph_node")
        self.open[run_id] = (str(name), args, kwargs.get("tool_call_id"), step, time.monotonic())

    def on_tool_end(self, output: Any, *, run_id: UUID, **kwargs: Any) -> None:
        content = getattr(output, "content", output)  # a ToolMessage: what the model is given back
        self._record(run_id, result=_parsed(content), has_result=True)

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self._record(run_id, error=error)

    def _record(self, run_id: UUID, **outcome: Any) -> None:
        found = self.open.pop(run_id, None)
        if found is None:
            return
        name, args, call_id, step, started = found
        events = tool_run_events(
            self.run.run_id,
            name,
            args=args,
            call_id=call_id,
            step_id=step,
            duration_ms=(time.monotonic() - started) * 1000,
            **outcome,
        )
        self.run.record(events)


class WorkbenchGraph:
    """A compiled LangGraph graph whose ``invoke`` records a run and waits at its interrupts."""

    def __init__(
        self,
        graph: Any,
        *,
        client: WorkbenchClient | None = None,
        workflow_id: str | None = None,
        title: str | None = None,
        tags: list[str] | None = None,
        prices: PriceTable | None = None,
        gate_timeout: float | None = None,
    ) -> None:
        self.graph = graph
        self.client = client
        self.workflow_id = workflow_id
        self.title = title
        self.tags = tags
        self.prices = prices
        self.gate_timeout = gate_timeout
        self.sessions: dict[str, _Session] = {}
        self.last_run: RemoteRun | None = None
        for name, node in graph.nodes.items():
            if name in GRAPH_ENDS or isinstance(node.bound, _Node):
                continue
            node.bound = _Node(node.bound, name, self)
            node.__dict__.pop("node", None)  # PregelNode caches the runnable built from `bound`

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.graph, attr)

    def _start(self) -> RemoteRun:
        client = self.client or default_client()
        prices = self.prices if self.prices is not None else default_prices(client)
        workflow = workflow_of(self.graph, self.workflow_id)
        run = RemoteRun.start(
            client,
            workflow=workflow,
            title=self.title or workflow["title"],
            tags=self.tags,
            prices=prices,
            # the graph routes a rejection itself (reject -> archive, one of parallel branches
            # rejected): the node that asked receives it, and its attempt's end closes it
            metadata={"workbench.rejections": "routed"},
        )
        self.sessions[run.run_id] = _Session()
        self.last_run = run
        return run

    @staticmethod
    def _config(config: RunnableConfig | None, run: RemoteRun) -> RunnableConfig:
        merged: dict[str, Any] = dict(config or {})
        callbacks = merged.get("callbacks")
        if callbacks is None or isinstance(callbacks, list):  # a manager given is left as it is
            merged["callbacks"] = [*(callbacks or []), ToolRecorder(run)]
        configurable: dict[str, Any] = dict(merged.get("configurable") or {})
        configurable.setdefault("thread_id", f"wb-{uuid.uuid4()}")
        merged["configurable"] = configurable
        return cast(RunnableConfig, merged)

    def _resume(self, session: _Session) -> Command[Any] | None:
        if not session.pending:
            return None
        decisions = {key: handle.wait(self.gate_timeout) for key, handle in session.pending}
        session.pending.clear()
        if len(decisions) == 1:
            return Command(resume=next(iter(decisions.values())))
        return Command(resume=decisions)

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """Run the graph to its end, waiting for a reviewer at every interrupt; the final state."""
        run = self._start()
        session = self.sessions[run.run_id]
        config = self._config(config, run)
        value = input
        try:
            with scope(run):
                while True:
                    result = self.graph.invoke(value, config, **kwargs)
                    value = self._resume(session)
                    if value is None:
                        break
        except BaseException as exc:
            run.fail(error_of(exc)["message"], code=type(exc).__name__)
            raise
        finally:
            self.sessions.pop(run.run_id, None)
        run.finish()
        return result

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        """``invoke`` for async graphs (blocking calls to the workbench run in worker threads)."""
        import asyncio  # only async callers pay for it

        run = await asyncio.to_thread(self._start)
        session = self.sessions[run.run_id]
        config = self._config(config, run)
        value = input
        try:
            with scope(run):
                while True:
                    result = await self.graph.ainvoke(value, config, **kwargs)
                    value = await asyncio.to_thread(self._resume, session)
                    if value is None:
                        break
        except BaseException as exc:
            await asyncio.to_thread(run.fail, error_of(exc)["message"], code=type(exc).__name__)
            raise
        finally:
            self.sessions.pop(run.run_id, None)
        await asyncio.to_thread(run.finish)
        return result
