"""Pipelines built elsewhere, against a real server (daphne on loopback, SQLite) with the real SDKs:
``@observe`` and the wrapped official clients, gates with ``wait()``, the LangGraph adapter with a
graph that revises after a rejection, and a replay through the SDK that counts its cache hits.

The server looks at the database for a decision only every 30 s here
(``WORKBENCH_GATE_WAIT_POLL_MS``): a ``wait()`` that returns sooner was woken by the decision's
commit itself.
"""

from __future__ import annotations

import json
import threading
import time
from typing import TypedDict

import anthropic as anthropic_sdk
import httpx
import openai as openai_sdk
import pytest
import workbench_sdk as wb
from workbench_sdk import RemoteRun, WorkbenchClient
from workbench_sdk.observe import _config

from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.openai_api import FakeOpenAI
from tests.live.cluster import Cluster

pytestmark = pytest.mark.slow

PRICES = {
    "gpt-5-mini": {"input": 0.25, "output": 2.0, "cache_read": 0.025},
    "claude-haiku-4-5": {"input": 1, "output": 5, "cache_read": 0.1, "cache_write": 1.25},
}
POLL_SECONDS = 30.0
SEED_WORKFLOW = {"id": "seed", "version": 0, "steps": [{"id": "only"}]}
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
DELETE_TOOL = {
    "type": "function",
    "function": {
        "name": "delete_city",
        "description": "Remove a city from the list",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


@pytest.fixture(scope="module")
def server():
    with Cluster(
        database="sqlite", extra_env={"WORKBENCH_GATE_WAIT_POLL_MS": str(int(POLL_SECONDS * 1000))}
    ) as cluster:
        seed = cluster.seed(workflow=SEED_WORKFLOW, users=(("alice", "owner"), ("rita", "reviewer")))
        yield cluster, seed


@pytest.fixture
def client(server):
    cluster, seed = server
    client = WorkbenchClient(f"http://127.0.0.1:{cluster.ports[0]}", seed["token"])
    wb.configure(client=client, prices=PRICES)
    yield client
    _config.client, _config.prices, _config.prices_loaded = None, None, False
    client.close()


@pytest.fixture(scope="module")
def fakes():
    with FakeOpenAI() as gpt_fake, FakeAnthropic() as claude_fake:
        yield gpt_fake, claude_fake


def trace_of(client: WorkbenchClient, run_id: str) -> list[dict]:
    return [event for _, event in client.iter_events(run_id)]


def decide(
    client: WorkbenchClient, run_id: str, step: str, checkpoint: str, decision: str, note: str
) -> None:
    client.resolve_gate(
        run_id, step_id=step, gate="CHECKPOINT", checkpoint=checkpoint, decision=decision, note=note
    )


# --------------------------------------------------------------------------------------------- @observe


def test_observe_records_one_run_with_three_priced_calls_and_the_one_tool_that_ran(client, fakes):
    gpt_fake, claude_fake = fakes
    gpt = wb.openai(
        openai_sdk.OpenAI(api_key="test-openai-key", base_url=gpt_fake.url + "/v1", max_retries=0)
    )
    claude = wb.anthropic(
        anthropic_sdk.Anthropic(api_key="test-anthropic-key", base_url=claude_fake.url, max_retries=0)
    )

    @wb.observe()
    def lookup(city: str) -> str:
        answer = gpt.chat.completions.create(
            model="gpt-5-mini",
            messages=[{"role": "user", "content": f"use get_weather, then call delete_city for {city}"}],
            tools=[WEATHER_TOOL, DELETE_TOOL],
        )
        calls = answer.choices[0].message.tool_calls
        assert [c.function.name for c in calls] == ["get_weather", "delete_city"]
        for call in calls:
            if call.function.name == "delete_city":
                continue  # refused: never run
            with wb.tool(call) as tool:
                tool.result = {"city": tool.args["city"], "sky": "clear"}
        return calls[0].function.name

    @wb.observe(title="forecast desk")
    def forecast(city: str) -> dict:
        tool = lookup(city)
        text = (
            claude.messages.create(
                model="claude-haiku-4-5",
                max_tokens=50,
                messages=[{"role": "user", "content": f"Forecast for {city}"}],
            )
            .content[0]
            .text
        )
        chunks = gpt.chat.completions.create(
            model="gpt-5-mini", messages=[{"role": "user", "content": "Say it short"}], stream=True
        )
        short = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        return {"tool": tool, "text": text, "short": short}

    result = forecast("Oslo")
    assert result["tool"] == "get_weather" and result["text"] and result["short"]
    runs = client.list_runs()
    run_id = next(r["id"] for r in runs if r["workflowId"] == "forecast")
    state, _ = client.get_run_state(run_id)
    assert state["run"]["status"] == "completed"
    assert state["run"]["metadata"]["workbench.driver"] == "external"
    assert [s["id"] for s in state["run"]["workflowSnapshot"]["steps"]] == ["forecast", "lookup"]
    trace = trace_of(client, run_id)
    responses = [e for e in trace if e["type"] == "model_io" and e["direction"] == "response"]
    requests = [e for e in trace if e["type"] == "model_io" and e["direction"] == "request"]
    assert len(requests) == len(responses) == 3
    assert {r["correlationId"] for r in requests} == {r["correlationId"] for r in responses}
    assert all(r["cost"]["amount"] > 0 and r["cost"]["currency"] == "USD" for r in responses)
    assert [r["stepId"] for r in responses] == ["lookup", "forecast", "forecast"]
    # two tools asked for, one ran: exactly one tool_call, with its result, named by the call's id
    tools = [e for e in trace if e["type"] == "tool_call"]
    assert [(t["name"], t["stepId"], t["result"]["sky"]) for t in tools] == [
        ("get_weather", "lookup", "clear")
    ]
    asked = responses[0]["payload"]["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["name"] for c in asked] == ["get_weather", "delete_city"]  # both stay visible
    assert tools[0]["correlationId"] == asked[0]["id"]
    [span] = [e for e in trace if e["type"] == "span_ended" and e["correlationId"] == asked[0]["id"]]
    assert span["status"] == "ok" and span["durationMs"] >= 0
    artifacts = {a["artifactKey"] for _, a in state["artifactsByKey"]}
    assert {"forecast.input", "forecast.output", "lookup.input", "lookup.output"} <= artifacts


def test_an_exception_marks_the_observed_run_failed(client):
    @wb.observe(name="fragile")
    def fragile(n: int) -> int:
        raise ValueError(f"cannot handle {n}")

    with pytest.raises(ValueError):
        fragile(3)
    run_id = next(r["id"] for r in client.list_runs() if r["workflowId"] == "fragile")
    state, _ = client.get_run_state(run_id)
    assert state["run"]["status"] == "failed"
    completed = [e for e in state["trace"] if e["type"] == "step_completed"]
    assert completed[-1]["ok"] is False and completed[-1]["error"]["code"] == "ValueError"
    assert any(e["type"] == "error" and e.get("fatal") for e in state["trace"])


def test_wrapped_clients_outside_observe_record_nothing(client, fakes):
    gpt_fake, _ = fakes
    before = len(client.list_runs(limit=500))
    gpt = wb.openai(
        openai_sdk.OpenAI(api_key="test-openai-key", base_url=gpt_fake.url + "/v1", max_retries=0)
    )
    gpt.chat.completions.create(model="gpt-5-mini", messages=[{"role": "user", "content": "hi"}])
    assert len(client.list_runs(limit=500)) == before


# --------------------------------------------------------------------------------------------- gates


def test_wait_returns_when_the_decision_commits(client):
    run = RemoteRun.start(client, workflow={"id": "manual", "version": 0, "steps": [{"id": "write"}]})
    run.start_step("write")
    handle = run.gate("write", name="tone", reason="Is the tone right?", payload={"text": "Hello there"})
    assert handle.poll(0) is None  # nobody decided yet: the long poll answers "pending"
    with pytest.raises(wb.GateTimeout):
        handle.wait(timeout=1)
    # nobody asked: waiting (and timing out) decided nothing
    assert not [e for e in trace_of(client, run.run_id) if e["type"] == "human_gate_resolved"]
    assert client.get_run_state(run.run_id)[0]["run"]["status"] == "running"
    got: dict = {}

    def waiter():
        got["decision"] = handle.wait(timeout=POLL_SECONDS * 2)
        got["at"] = time.monotonic()

    thread = threading.Thread(target=waiter)
    thread.start()
    time.sleep(0.5)
    client.resolve_gate(
        run.run_id,
        step_id="write",
        gate="CHECKPOINT",
        checkpoint="tone",
        decision="edited",
        note="warmer, please",
        edit={"artifactKey": "gate:write:tone", "typeId": "workbench.gate-payload", "data": {"text": "Hi!"}},
    )
    decided = time.monotonic()
    thread.join(POLL_SECONDS * 2)
    decision = got["decision"]
    assert decision["decision"] == "edited" and decision["note"] == "warmer, please"
    assert decision["payload"] == {"text": "Hi!"} and decision["edits"][0]["version"] == 2
    assert decision["by"].startswith("token:") and decision["at"]
    # woken by the commit, not by the server's 30 s database look
    assert got["at"] - decided < POLL_SECONDS / 2
    run.complete_step("write")
    run.finish()


def test_wait_ends_when_the_run_is_cancelled_and_outsiders_get_404(client, server):
    run = RemoteRun.start(client, workflow={"id": "manual", "version": 0, "steps": [{"id": "write"}]})
    run.start_step("write")
    handle = run.gate("write", name="tone")
    client.cancel(run.run_id, reason="changed my mind")
    with pytest.raises(wb.GateClosed, match="cancelled"):
        handle.wait(timeout=5)
    cluster, _ = server
    url = f"http://127.0.0.1:{cluster.ports[0]}/api/runs/{run.run_id}/gates/wait"
    answer = httpx.get(url, params={"stepId": "write", "gate": "CHECKPOINT", "afterSeq": 1})
    assert answer.status_code == 401
    with pytest.raises(wb.WorkbenchAPIError) as exc:
        client.request(
            "GET", f"/runs/{run.run_id}/gates/wait", params={"stepId": "write", "gate": "CHECKPOINT"}
        )
    assert exc.value.status == 400 and exc.value.code == "INVALID_INPUT"


# --------------------------------------------------------------------------------------------- LangGraph


class Article(TypedDict, total=False):
    topic: str
    draft: str
    feedback: str
    published: bool
    legal: str


def article_graph():
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    def draft(state: Article) -> Article:
        version = f"A piece on {state['topic']}" + (
            f" ({state['feedback']})" if state.get("feedback") else ""
        )
        return {"draft": version}

    def review(state: Article) -> Article:
        decision = interrupt({"question": "Publish this draft?", "draft": state["draft"]})
        return {"feedback": decision["note"] if decision["decision"] == "rejected" else ""}

    def publish(state: Article) -> Article:
        return {"published": True}

    builder = StateGraph(Article)
    builder.add_node("draft", draft)
    builder.add_node("review", review)
    builder.add_node("publish", publish)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "review")
    builder.add_conditional_edges(
        "review", lambda s: "draft" if s.get("feedback") else "publish", ["draft", "publish"]
    )
    builder.add_edge("publish", END)
    return builder.compile(checkpointer=InMemorySaver())


def reviewer(client: WorkbenchClient, decisions: list[tuple[str, str]], seen: list[dict]) -> threading.Thread:
    """Decides each pending review gate in turn, as a person in the inbox would."""

    def work():
        for decision, note in decisions:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                runs = [
                    r
                    for r in client.list_runs(limit=500)
                    if r["workflowId"] == "articles" and r["status"] == "running"
                ]
                found = None
                for r in runs:
                    state, _ = client.get_run_state(r["id"])
                    opened = [e for e in state["trace"] if e["type"] == "human_gate_requested"]
                    closed = [e for e in state["trace"] if e["type"] == "human_gate_resolved"]
                    if len(opened) > len(closed):
                        found = (r["id"], state)
                if found:
                    seen.append(found[1])
                    decide(client, found[0], "review", "review", decision, note)
                    break
                time.sleep(0.2)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread


def test_langgraph_graph_revises_after_a_rejection_and_publishes(client):
    from workbench_sdk.langgraph import WorkbenchGraph

    graph = WorkbenchGraph(article_graph(), workflow_id="articles", gate_timeout=60)
    seen: list[dict] = []
    thread = reviewer(client, [("rejected", "cite your sources"), ("approved", "good now")], seen)
    result = graph.invoke({"topic": "tides"})
    thread.join(10)
    assert result["published"] is True and result["draft"] == "A piece on tides (cite your sources)"
    run_id = graph.last_run.run_id
    state, _ = client.get_run_state(run_id)
    assert state["run"]["status"] == "completed"
    snapshot = state["run"]["workflowSnapshot"]
    assert [e["from"] + ">" + e["to"] for e in snapshot["edges"]] == ["draft>review", "review>publish"]
    trace = state["trace"]
    starts = [e["stepId"] for e in trace if e["type"] == "step_started"]
    assert starts == ["draft", "review", "draft", "review", "publish"]  # the resumed review is one attempt
    resolved = [e for e in trace if e["type"] == "human_gate_resolved"]
    assert [(e["decision"], e["note"]) for e in resolved] == [
        ("rejected", "cite your sources"),
        ("approved", "good now"),
    ]
    # the interrupt's value is the gate's payload (what the gate panel shows)
    payloads = [a for _, a in state["artifactsByKey"] if a["artifactKey"] == "gate:review:review"]
    assert payloads and payloads[0]["data"]["question"] == "Publish this draft?"
    assert seen[0]["artifactsByKey"]
    # the bundle verifies and imports again
    bundle = client.export_bundle(run_id)
    assert client.verify_bundle(bundle)["ok"] is True
    assert client.import_bundle(bundle, as_new_id=True)["runId"] != run_id


# --------------------------------------------------------------------------------------------- replay


def test_a_replay_through_the_sdk_counts_its_cache_hits(client, fakes):
    gpt_fake, _ = fakes
    gpt = wb.openai(
        openai_sdk.OpenAI(api_key="test-openai-key", base_url=gpt_fake.url + "/v1", max_retries=0)
    )

    @wb.observe(name="haiku")
    def haiku(topic: str) -> str:
        lines = []
        for n in range(2):
            answer = gpt.chat.completions.create(
                model="gpt-5-mini", messages=[{"role": "user", "content": f"line {n} about {topic}"}]
            )
            lines.append(answer.choices[0].message.content)
        return "\n".join(lines)

    first = haiku("rain")
    source = next(r["id"] for r in client.list_runs() if r["workflowId"] == "haiku")
    calls_before = len(gpt_fake.requests)
    replay = RemoteRun.replay_of(client, source)
    with wb.scope(replay):
        again = haiku("rain")
    replay.finish()
    assert again == first
    assert len(gpt_fake.requests) == calls_before  # served from /api/cache, no provider call
    report = client.determinism(replay.run_id)
    assert report["cacheHits"] == 2 and report["providerCalls"] == 0


def routed_graph(parallel: bool = False):
    """review -> publish when approved, -> archive when rejected (no loop back); with ``parallel``
    two reviews run side by side and both lead to publish."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    def draft(state: Article) -> Article:
        return {"draft": f"A piece on {state['topic']}"}

    def review(state: Article) -> Article:
        decision = interrupt({"question": "Publish this draft?", "draft": state["draft"]})
        return {"feedback": decision["note"] if decision["decision"] == "rejected" else ""}

    def legal(state: Article) -> Article:
        decision = interrupt({"question": "Legal ok?"})
        return {"legal": decision["decision"]}

    def publish(state: Article) -> Article:
        return {"published": True}

    def archive(state: Article) -> Article:
        return {"published": False}

    builder = StateGraph(Article)
    builder.add_node("draft", draft)
    builder.add_node("review", review)
    builder.add_node("publish", publish)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "review")
    if parallel:
        builder.add_node("legal", legal)
        builder.add_edge("draft", "legal")
        builder.add_edge(["review", "legal"], "publish")
    else:
        builder.add_node("archive", archive)
        builder.add_conditional_edges(
            "review", lambda s: "archive" if s.get("feedback") else "publish", ["archive", "publish"]
        )
        builder.add_edge("archive", END)
    builder.add_edge("publish", END)
    return builder.compile(checkpointer=InMemorySaver())


def test_langgraph_a_rejection_routed_to_another_node_runs_it(client):
    """reject -> archive: the node the graph routes to runs and the run completes, as the same
    graph does without the wrapper (issue 54: it failed with a 409 inside the graph)."""
    from workbench_sdk.langgraph import WorkbenchGraph

    graph = WorkbenchGraph(routed_graph(), workflow_id="articles", gate_timeout=60)
    thread = reviewer(client, [("rejected", "not for us")], [])
    result = graph.invoke({"topic": "eels"})
    thread.join(10)
    assert result["published"] is False
    state, _ = client.get_run_state(graph.last_run.run_id)
    assert state["run"]["status"] == "completed"
    starts = [e["stepId"] for e in state["trace"] if e["type"] == "step_started"]
    assert starts == ["draft", "review", "archive"]


def test_langgraph_parallel_branches_one_rejected_still_publish(client):
    """Two interrupts side by side (review and legal), one rejected: the graph goes on to publish
    as it routes, and the record shows both decisions."""
    from workbench_sdk.langgraph import WorkbenchGraph

    graph = WorkbenchGraph(routed_graph(parallel=True), workflow_id="articles-par", gate_timeout=60)
    run_box: list[str] = []

    def decide_both():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not run_box:
            if graph.last_run is not None:
                run_box.append(graph.last_run.run_id)
            time.sleep(0.05)
        run_id = run_box[0]
        decided: set[str] = set()
        while time.monotonic() < deadline and len(decided) < 2:
            state, _ = client.get_run_state(run_id)
            closed = {e["stepId"] for e in state["trace"] if e["type"] == "human_gate_resolved"}
            for e in state["trace"]:
                if e["type"] == "human_gate_requested" and e["stepId"] not in closed | decided:
                    verdict = "rejected" if e["stepId"] == "legal" else "approved"
                    decide(client, run_id, e["stepId"], e["stepId"], verdict, "checked")
                    decided.add(e["stepId"])
            time.sleep(0.2)

    thread = threading.Thread(target=decide_both, daemon=True)
    thread.start()
    result = graph.invoke({"topic": "eels"})
    thread.join(10)
    assert result["published"] is True and result["legal"] == "rejected"
    state, _ = client.get_run_state(graph.last_run.run_id)
    assert state["run"]["status"] == "completed"
    decisions = sorted(
        (e["stepId"], e["decision"]) for e in state["trace"] if e["type"] == "human_gate_resolved"
    )
    assert decisions == [("legal", "rejected"), ("review", "approved")]


def test_langgraph_a_tool_node_run_is_one_tool_call_and_an_unrun_request_none(client, fakes):
    """The model asks for two tools; the graph's ToolNode has one of them: exactly one tool_call
    (LangChain's tool callbacks, on the node's step, named by the model's call id), and both
    requests stay visible in the model's recorded response."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode
    from workbench_sdk.langgraph import WorkbenchGraph

    gpt_fake, _ = fakes
    gpt = wb.openai(
        openai_sdk.OpenAI(api_key="test-openai-key", base_url=gpt_fake.url + "/v1", max_retries=0)
    )

    @tool
    def get_weather(city: str) -> dict:
        """Weather of a city."""
        return {"city": city, "sky": "clear"}

    def agent(state: MessagesState) -> dict:
        answer = gpt.chat.completions.create(
            model="gpt-5-mini",
            messages=[{"role": "user", "content": state["messages"][0].content}],
            tools=[WEATHER_TOOL, DELETE_TOOL],
        )
        calls = [
            {
                "id": c.id,
                "name": c.function.name,
                "args": json.loads(c.function.arguments),
                "type": "tool_call",
            }
            for c in answer.choices[0].message.tool_calls
        ]
        return {"messages": [AIMessage(content="", tool_calls=calls)]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([get_weather], handle_tool_errors=True))
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "tools")
    builder.add_edge("tools", END)
    graph = WorkbenchGraph(builder.compile(checkpointer=InMemorySaver()), workflow_id="tools-graph")
    graph.invoke({"messages": [HumanMessage("use get_weather, then call delete_city for Oslo")]})
    trace = trace_of(client, graph.last_run.run_id)
    [response] = [e for e in trace if e["type"] == "model_io" and e["direction"] == "response"]
    asked = response["payload"]["choices"][0]["message"]["tool_calls"]
    assert [c["function"]["name"] for c in asked] == ["get_weather", "delete_city"]
    [ran] = [e for e in trace if e["type"] == "tool_call"]
    city = json.loads(asked[0]["function"]["arguments"])["city"]
    assert (ran["name"], ran["args"], ran["result"]) == (
        "get_weather",
        {"city": city},
        {"city": city, "sky": "clear"},
    )
    assert ran["stepId"] == "tools" and ran["correlationId"] == asked[0]["id"]
