// A LangGraph.js graph whose interrupt() is decided by a reviewer (this test's pytest side, over
// REST, as the inbox does): the first answer is a rejection with a note, the graph loops back to
// draft with it, the second is an approval; the model call inside the draft node lands on its step.
import assert from "node:assert/strict";
import { test } from "node:test";
import { AIMessage, HumanMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { Annotation, END, MemorySaver, MessagesAnnotation, START, StateGraph, interrupt } from "@langchain/langgraph";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import OpenAI from "openai";
import { z } from "zod";
import { configure, openai } from "../src/index.js";
import { WorkbenchGraph, workflowOf } from "../src/langgraph.js";
import { OPENAI_URL, SKIP, liveClient, responses, traceOf } from "./helpers.js";

const Article = Annotation.Root({
  topic: Annotation(),
  text: Annotation(),
  feedback: Annotation(),
  published: Annotation(),
});

function articleGraph(gpt) {
  const draft = async (state) => {
    const answer = await gpt.chat.completions.create({ model: "gpt-5-mini", messages: [{ role: "user", content: `Title for ${state.topic}` }] });
    assert.ok(answer.choices[0].message.content);
    return { text: `A piece on ${state.topic}` + (state.feedback ? ` (${state.feedback})` : "") };
  };
  const review = async (state) => {
    const decision = interrupt({ question: "Publish this draft?", draft: state.text });
    return { feedback: decision.decision === "rejected" ? decision.note : "" };
  };
  const publish = async () => ({ published: true });
  return new StateGraph(Article)
    .addNode("draft", draft)
    .addNode("review", review)
    .addNode("publish", publish)
    .addEdge(START, "draft")
    .addEdge("draft", "review")
    .addConditionalEdges("review", (s) => (s.feedback ? "draft" : "publish"), ["draft", "publish"])
    .addEdge("publish", END)
    .compile({ checkpointer: new MemorySaver() });
}

test("the workflow is the graph's nodes and its edges less the loop back", async () => {
  const workflow = await workflowOf(articleGraph(null), "ts-articles");
  assert.deepEqual(workflow.steps.map((s) => s.id), ["draft", "review", "publish"]);
  assert.deepEqual(workflow.edges.map((e) => `${e.from}>${e.to}`), ["draft>review", "review>publish"]);
});

test("a LangGraph.js graph revises after a rejection with a note and publishes", { skip: SKIP }, async () => {
  configure({ client: liveClient(), prices: { "gpt-5-mini": { input: 0.25, output: 2, cache_read: 0.025 } } });
  const gpt = openai(new OpenAI({ apiKey: "test-openai-key", baseURL: OPENAI_URL, maxRetries: 0 }));
  const graph = new WorkbenchGraph(articleGraph(gpt), { workflowId: "ts-articles", gateTimeout: 120 });
  const result = await graph.invoke({ topic: "tides" });
  assert.equal(result.published, true);
  assert.equal(result.text, "A piece on tides (cite your sources)");

  const client = liveClient();
  const runId = graph.lastRun.runId;
  const state = await client.getRun(runId);
  assert.equal(state.run.status, "completed");
  assert.equal(state.run.metadata["workbench.rejections"], "routed");
  const trace = await traceOf(client, runId);
  const starts = trace.filter((e) => e.type === "step_started").map((e) => e.stepId);
  assert.deepEqual(starts, ["draft", "review", "draft", "review", "publish"]); // a resumed review is one attempt
  const resolved = trace.filter((e) => e.type === "human_gate_resolved");
  assert.deepEqual(resolved.map((e) => [e.decision, e.note]), [["rejected", "cite your sources"], ["approved", "good now"]]);
  const payload = state.artifactsByKey.map(([, a]) => a).find((a) => a.artifactKey === "gate:review:review");
  assert.equal(payload.data.question, "Publish this draft?");
  const calls = responses(trace);
  assert.deepEqual(calls.map((c) => c.stepId), ["draft", "draft"]);
  assert.ok(calls.every((c) => c.cost.amount > 0));
});

// issue 54's seams, on the TypeScript side: a rejection routed to another node, parallel branches
function routedGraph({ parallel = false } = {}) {
  const State = Annotation.Root({ topic: Annotation(), text: Annotation(), feedback: Annotation(), legalVerdict: Annotation(), published: Annotation() });
  let builder = new StateGraph(State)
    .addNode("draft", (s) => ({ text: `A piece on ${s.topic}` }))
    .addNode("review", (s) => {
      const decision = interrupt({ question: "Publish this draft?", draft: s.text });
      return { feedback: decision.decision === "rejected" ? decision.note : "" };
    })
    .addNode("publish", () => ({ published: true }))
    .addEdge(START, "draft")
    .addEdge("draft", "review");
  if (parallel) {
    builder = builder
      .addNode("legal", () => ({ legalVerdict: interrupt({ question: "Legal ok?" }).decision }))
      .addEdge("draft", "legal")
      .addEdge(["review", "legal"], "publish");
  } else {
    builder = builder
      .addNode("archive", () => ({ published: false }))
      .addConditionalEdges("review", (s) => (s.feedback ? "archive" : "publish"), ["archive", "publish"])
      .addEdge("archive", END);
  }
  return builder.addEdge("publish", END).compile({ checkpointer: new MemorySaver() });
}

test("a rejection routed to another node runs it and the run completes", { skip: SKIP }, async () => {
  configure({ client: liveClient() });
  const graph = new WorkbenchGraph(routedGraph(), { workflowId: "ts-routed", gateTimeout: 120 });
  const result = await graph.invoke({ topic: "eels" });
  assert.equal(result.published, false);
  const client = liveClient();
  const state = await client.getRun(graph.lastRun.runId);
  assert.equal(state.run.status, "completed");
  const starts = state.trace.filter((e) => e.type === "step_started").map((e) => e.stepId);
  assert.deepEqual(starts, ["draft", "review", "archive"]);
});

test("parallel branches, one rejected: both gates wait at once, the graph publishes as it routes", { skip: SKIP }, async () => {
  configure({ client: liveClient() });
  const graph = new WorkbenchGraph(routedGraph({ parallel: true }), { workflowId: "ts-parallel", gateTimeout: 120 });
  const result = await graph.invoke({ topic: "eels" });
  assert.equal(result.published, true);
  assert.equal(result.legalVerdict, "rejected");
  const client = liveClient();
  const state = await client.getRun(graph.lastRun.runId);
  assert.equal(state.run.status, "completed");
  const decisions = state.trace.filter((e) => e.type === "human_gate_resolved").map((e) => [e.stepId, e.decision]).sort();
  assert.deepEqual(decisions, [["legal", "rejected"], ["review", "approved"]]);
});

// A tool_call is a tool the graph ran: the model asks for two tools, the ToolNode has only one of
// them, so exactly one tool_call (from LangChain's tool callbacks), both requests in the response.
test("a ToolNode's run is one tool_call; a tool call the graph never runs is in the response only", { skip: SKIP }, async () => {
  configure({ client: liveClient(), prices: { "gpt-5-mini": { input: 0.25, output: 2, cache_read: 0.025 } } });
  const gpt = openai(new OpenAI({ apiKey: "test-openai-key", baseURL: OPENAI_URL, maxRetries: 0 }));
  const schema = z.object({ city: z.string() });
  const getWeather = tool(async ({ city }) => JSON.stringify({ city, sky: "clear" }), { name: "get_weather", description: "Weather of a city", schema });
  const asked = { type: "function", function: { name: "delete_city", description: "Remove a city", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } } };
  const agent = async (state) => {
    const answer = await gpt.chat.completions.create({
      model: "gpt-5-mini",
      messages: [{ role: "user", content: state.messages[0].content }],
      tools: [{ type: "function", function: { name: "get_weather", description: "Weather of a city", parameters: asked.function.parameters } }, asked],
    });
    const calls = answer.choices[0].message.tool_calls.map((c) => ({ id: c.id, name: c.function.name, args: JSON.parse(c.function.arguments), type: "tool_call" }));
    return { messages: [new AIMessage({ content: "", tool_calls: calls })] };
  };
  const graph = new StateGraph(MessagesAnnotation)
    .addNode("agent", agent)
    .addNode("tools", new ToolNode([getWeather]))
    .addEdge(START, "agent")
    .addEdge("agent", "tools")
    .addEdge("tools", END)
    .compile({ checkpointer: new MemorySaver() });
  const wrapped = new WorkbenchGraph(graph, { workflowId: "ts-tools" });
  const result = await wrapped.invoke({ messages: [new HumanMessage("use get_weather, then call delete_city for Oslo")] });
  assert.equal(result.messages.filter((m) => m._getType() === "tool").length, 2); // one answer, one "not found"
  const client = liveClient();
  const trace = await traceOf(client, wrapped.lastRun.runId);
  const requested = responses(trace)[0].payload.choices[0].message.tool_calls;
  assert.deepEqual(requested.map((c) => c.function.name), ["get_weather", "delete_city"]);
  const ran = trace.filter((e) => e.type === "tool_call");
  assert.equal(ran.length, 1);
  const { city } = JSON.parse(requested[0].function.arguments);
  assert.deepEqual([ran[0].name, ran[0].args, ran[0].result, ran[0].stepId, ran[0].correlationId], ["get_weather", { city }, { city, sky: "clear" }, "tools", requested[0].id]);
  assert.ok(trace.some((e) => e.type === "span_ended" && e.correlationId === requested[0].id && e.status === "ok"));
});
