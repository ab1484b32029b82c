// The recipes of docs/engineers/typescript.md run as written against a real server and the
// loopback fakes (OPENAI_BASE_URL / ANTHROPIC_BASE_URL point the SDKs there; the pytest side
// decides the gates: "chat" approved, "articles" rejected with a note once, then approved).
import assert from "node:assert/strict";
import { test } from "node:test";
import { callRoute, loadRecipe, recipes } from "./recipes.js";
import { SKIP, liveClient, responses, traceOf } from "./helpers.js";

test("the page has the recipes", () => {
  assert.deepEqual(Object.keys(recipes()).sort(), ["langgraph", "nextjs-route", "observe"]);
});

test("recipe observe: one run, both clients' calls priced from the server's table", { skip: SKIP }, async () => {
  const { forecast } = await loadRecipe("observe");
  const text = await forecast("Oslo");
  assert.ok(text);
  const client = liveClient();
  const state = await client.getRun(forecast.lastRun.runId);
  assert.equal(state.run.status, "completed");
  const calls = responses(await traceOf(client, forecast.lastRun.runId));
  assert.deepEqual(calls.map((c) => [c.provider, c.stepId]), [["openai", "lookup"], ["anthropic", "forecast"]]);
  for (const call of calls) assert.ok(call.cost?.amount > 0, JSON.stringify(call));
});

test("recipe nextjs-route: generateText, a gate decided by a reviewer, then the streamed answer", { skip: SKIP }, async () => {
  const answer = await callRoute("a greeting");
  assert.equal(answer.status, 200);
  assert.match(answer.text, /Write it: /);
  const client = liveClient();
  const trace = await traceOf(client, answer.runId);
  const calls = responses(trace);
  assert.deepEqual(calls.map((c) => c.stepId), ["outline", "write"]);
  for (const call of calls) assert.ok(call.cost?.amount > 0 && call.usage.inputTokens > 0, JSON.stringify(call));
  assert.equal(calls[1].payload.text, answer.text);
  const resolved = trace.filter((e) => e.type === "human_gate_resolved");
  assert.deepEqual(resolved.map((e) => e.decision), ["approved"]);
  assert.equal((await client.getRun(answer.runId)).run.status, "completed");
});

test("recipe langgraph: rejected with a note, the graph loops back and publishes", { skip: SKIP }, async () => {
  const { graph } = await loadRecipe("langgraph");
  const result = await graph.invoke({ topic: "tides" });
  assert.equal(result.published, true);
  assert.equal(result.text, "A piece on tides (cite your sources)");
});
