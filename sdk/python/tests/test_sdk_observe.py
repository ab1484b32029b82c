"""@observe, RemoteRun and gates against a small in-memory stand-in of the server's REST API
(httpx MockTransport; no Django, no network). The LangGraph adapter's test runs when
``langgraph`` is installed (the ``langgraph`` extra)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

import workbench_sdk as wb
from workbench_sdk import RemoteRun, WorkbenchClient
from workbench_sdk.observe import _config


class FakeServer:
    """Runs, events, artifacts and the gate long poll, as the REST API answers them."""

    def __init__(self) -> None:
        self.runs: dict[str, dict[str, Any]] = {}
        self.decisions: list[dict] = []  # answers of the long poll, one per wait
        self.waits: list[dict] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        body = json.loads(request.content) if request.content else None
        if request.method == "POST" and path == "/api/runs":
            run_id = f"run_{len(self.runs) + 1}"
            self.runs[run_id] = {"body": body, "events": [], "artifacts": []}
            return httpx.Response(201, json={"runId": run_id})
        run_id = path.split("/")[3]
        run = self.runs[run_id]
        if path.endswith("/events") and request.method == "POST":
            first = len(run["events"]) + 1
            run["events"].extend(body["events"])
            return httpx.Response(200, json={"seqs": list(range(first, len(run["events"]) + 1))})
        if path.endswith("/artifacts"):
            run["artifacts"].append(body)
            run["events"].append({"type": "artifact_written", "artifact": body})
            return httpx.Response(200, json={"seqs": [len(run["events"])]})
        if path.endswith("/gates/wait"):
            self.waits.append(dict(request.url.params))
            answer = self.decisions.pop(0) if self.decisions else {"status": "pending"}
            return httpx.Response(200, json=answer)
        return httpx.Response(404, json={"code": "NOT_FOUND", "error": path})

    def types(self, run_id: str) -> list[str]:
        return [e["type"] for e in self.runs[run_id]["events"]]


@pytest.fixture
def server():
    fake = FakeServer()
    client = WorkbenchClient("http://wb.test", "wbt_x", transport=httpx.MockTransport(fake))
    wb.configure(client=client, prices={})
    yield fake
    _config.client, _config.prices, _config.prices_loaded = None, None, False


def test_observe_opens_a_run_nests_steps_and_completes(server):
    @wb.observe()
    def inner(x: int) -> int:
        return x * 2

    @wb.observe(title="Outer")
    def outer(x: int) -> dict:
        assert wb.current_step() == "outer"
        return {"sum": inner(x) + inner(x + 1)}

    assert outer(3) == {"sum": 14}
    (run_id,) = server.runs
    run = server.runs[run_id]
    assert run["body"]["metadata"] == {"workbench.driver": "external"}
    assert run["body"]["workflow"]["steps"] == [{"id": "outer"}] and run["body"]["title"] == "Outer"
    starts = [e["stepId"] for e in run["events"] if e["type"] == "step_started"]
    assert starts == ["outer", "inner", "inner"]  # inner's second call is its attempt 2
    assert server.types(run_id)[-1] == "run_status_changed"
    assert run["events"][-1]["status"] == "completed"
    keys = [a["artifactKey"] for a in run["artifacts"]]
    assert keys == [
        "outer.input",
        "inner.input",
        "inner.output",
        "inner.input",
        "inner.output",
        "outer.output",
    ]
    assert run["artifacts"][0]["data"] == {"x": 3}
    assert outer.last_run.run_id == run_id and wb.current_run() is None


def test_an_exception_fails_the_step_and_the_run(server):
    @wb.observe()
    def boom() -> None:
        raise KeyError("missing")

    with pytest.raises(KeyError):
        boom()
    (run,) = server.runs.values()
    completed = next(e for e in run["events"] if e["type"] == "step_completed")
    assert completed["ok"] is False and completed["error"]["code"] == "KeyError"
    assert [e["type"] for e in run["events"][-2:]] == ["error", "run_status_changed"]
    assert run["events"][-1]["status"] == "failed"


def test_async_functions_are_observed(server):
    @wb.observe()
    async def child() -> str:
        await asyncio.sleep(0)
        return "ok"

    @wb.observe()
    async def parent() -> str:
        return await child()

    assert asyncio.run(parent()) == "ok"
    (run,) = server.runs.values()
    assert [e["stepId"] for e in run["events"] if e["type"] == "step_started"] == ["parent", "child"]
    assert run["events"][-1]["status"] == "completed"


def test_gate_requests_with_its_payload_and_waits_by_long_poll(server):
    run = RemoteRun.start(wb.configure(), workflow={"id": "w", "version": 0, "steps": [{"id": "s"}]})
    handle = run.gate("s", name="tone", reason="ok?", payload={"text": "hi"})
    events = server.runs[run.run_id]["events"]
    assert events[0]["artifact"]["artifactKey"] == "gate:s:tone"
    assert events[1] == {
        **events[1],
        "type": "human_gate_requested",
        "gate": "CHECKPOINT",
        "correlationId": "checkpoint:tone",
    }
    assert handle.request_seq == 2
    server.decisions = [
        {"status": "pending"},
        {
            "status": "decided",
            "decision": "edited",
            "note": "warmer",
            "by": "user:rita",
            "at": "2026-01-01T00:00:00.000Z",
            "edits": [{"artifactKey": "gate:s:tone", "version": 2, "data": {"text": "hello"}}],
        },
    ]
    decision = handle.wait(timeout=60)
    assert decision == {
        "decision": "edited",
        "note": "warmer",
        "edits": [{"artifactKey": "gate:s:tone", "version": 2, "data": {"text": "hello"}}],
        "by": "user:rita",
        "at": "2026-01-01T00:00:00.000Z",
        "payload": {"text": "hello"},
    }
    assert len(server.waits) == 2  # one long poll timed out (pending), the next one answered
    assert server.waits[0]["afterSeq"] == "2" and server.waits[0]["checkpoint"] == "tone"
    assert float(server.waits[0]["timeout"]) > 1  # a long poll, not a quick look


def test_a_gate_on_an_ended_run_or_out_of_time_raises(server):
    run = RemoteRun.start(wb.configure(), workflow={"id": "w", "version": 0, "steps": [{"id": "s"}]})
    handle = run.gate("s")
    server.decisions = [{"status": "closed", "note": "the run is cancelled"}]
    with pytest.raises(wb.GateClosed, match="cancelled"):
        handle.wait()
    with pytest.raises(wb.GateTimeout):
        handle.wait(timeout=0)
    with pytest.raises(ValueError):
        run.gate("s", "PAUSE_AFTER", name="x")


def test_wrapped_clients_pass_through_outside_observe():
    class Completions:
        def create(self, **kw):
            return "raw"

    class Chat:
        completions = Completions()

    class Client:
        chat = Chat()
        api_key = "k"

    wrapped = wb.openai(Client())
    assert wrapped.chat.completions.create(model="m") == "raw" and wrapped.api_key == "k"


def test_langgraph_nodes_are_attempts_and_interrupts_are_gates(server):
    pytest.importorskip("langgraph")
    from typing import TypedDict

    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    from workbench_sdk.langgraph import WorkbenchGraph, workflow_of

    class S(TypedDict, total=False):
        n: int
        ok: bool

    def work(s: S) -> S:
        return {"n": s.get("n", 0) + 1}

    def check(s: S) -> S:
        return {"ok": interrupt({"question": f"n={s['n']}?"})["decision"] == "approved"}

    builder = StateGraph(S)
    builder.add_node("work", work)
    builder.add_node("check", check)
    builder.add_edge(START, "work")
    builder.add_edge("work", "check")
    builder.add_conditional_edges("check", lambda s: END if s["ok"] else "work", ["work", END])
    compiled = builder.compile(checkpointer=InMemorySaver())
    workflow = workflow_of(compiled, "loop")
    assert [e["from"] + ">" + e["to"] for e in workflow["edges"]] == ["work>check"]  # no cycle on the wire
    decided = {"status": "decided", "note": None, "by": "user:r", "at": "t", "edits": []}
    server.decisions = [{**decided, "decision": "rejected"}, {**decided, "decision": "approved"}]
    result = WorkbenchGraph(compiled, workflow_id="loop").invoke({})
    assert result == {"n": 2, "ok": True}
    (run,) = server.runs.values()
    starts = [e["stepId"] for e in run["events"] if e["type"] == "step_started"]
    assert starts == ["work", "check", "work", "check"]  # the resumed node is not a new attempt
    gates = [e for e in run["events"] if e["type"] == "human_gate_requested"]
    assert [g["correlationId"] for g in gates] == ["checkpoint:check", "checkpoint:check"]
    assert run["events"][-1] == {**run["events"][-1], "type": "run_status_changed", "status": "completed"}
