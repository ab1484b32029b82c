// observe() and the official openai / @anthropic-ai/sdk clients wrapped, against a real server and
// the loopback fakes: one run with priced calls (streaming included) and, of two tools the model
// asks for, the one the host runs as the only tool call, on the right step; a failure marks the run failed; a replay answers from the server's response cache.
import assert from "node:assert/strict";
import { test } from "node:test";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { RemoteRun, anthropic, configure, observe, openai, runTool, withScope } from "../src/index.js";
import { ANTHROPIC_URL, OPENAI_URL, SKIP, liveClient, responses, traceOf } from "./helpers.js";

const PRICES = {
  "gpt-5-mini": { input: 0.25, output: 2.0, cache_read: 0.025 },
  "claude-haiku-4-5": { input: 1, output: 5, cache_read: 0.1, cache_write: 1.25 },
};
const WEATHER = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Weather of a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};
const DELETE = {
  type: "function",
  function: {
    name: "delete_city",
    description: "Remove a city from the list",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};

function clients() {
  configure({ client: liveClient(), prices: PRICES });
  const gpt = openai(new OpenAI({ apiKey: "test-openai-key", baseURL: OPENAI_URL, maxRetries: 0 }));
  const claude = anthropic(new Anthropic({ apiKey: "test-anthropic-key", baseURL: ANTHROPIC_URL, maxRetries: 0 }));
  return { gpt, claude };
}

test("observe() records one run with priced calls (streams included) and the one tool that ran", { skip: SKIP }, async () => {
  const { gpt, claude } = clients();
  const lookup = observe(async (city) => {
    const answer = await gpt.chat.completions.create({
      model: "gpt-5-mini", messages: [{ role: "user", content: `use get_weather, then call delete_city for ${city}` }], tools: [WEATHER, DELETE],
    });
    const calls = answer.choices[0].message.tool_calls;
    assert.deepEqual(calls.map((c) => c.function.name), ["get_weather", "delete_city"]);
    for (const call of calls) {
      if (call.function.name === "delete_city") continue; // refused: never run
      await runTool(call, async (args) => ({ city: args.city, sky: "clear" }));
    }
    return calls[0].function.name;
  }, { name: "lookup" });
  const forecast = observe(async (city) => {
    const tool = await lookup(city);
    const message = await claude.messages.create({
      model: "claude-haiku-4-5", max_tokens: 50, messages: [{ role: "user", content: `Forecast for ${city}` }],
    });
    let short = "";
    const chunks = await gpt.chat.completions.create({ model: "gpt-5-mini", messages: [{ role: "user", content: "Say it short" }], stream: true });
    for await (const chunk of chunks) short += chunk.choices[0]?.delta?.content ?? "";
    let streamed = "";
    const events = await claude.messages.create({ model: "claude-haiku-4-5", max_tokens: 50, stream: true, messages: [{ role: "user", content: "Stream it" }] });
    for await (const event of events) if (event.type === "content_block_delta") streamed += event.delta.text ?? "";
    return { tool, text: message.content[0].text, short, streamed };
  }, { name: "forecast", title: "forecast desk" });

  const result = await forecast("Oslo");
  assert.equal(result.tool, "get_weather");
  assert.ok(result.text && result.short && result.streamed, JSON.stringify(result));
  const client = liveClient();
  const runId = forecast.lastRun.runId;
  const state = await client.getRun(runId);
  assert.equal(state.run.status, "completed");
  assert.equal(state.run.metadata["workbench.driver"], "external");
  const trace = await traceOf(client, runId);
  const calls = responses(trace);
  assert.deepEqual(calls.map((c) => [c.provider, c.stepId]), [
    ["openai", "lookup"], ["anthropic", "forecast"], ["openai", "forecast"], ["anthropic", "forecast"],
  ]);
  for (const call of calls) assert.ok(call.cost.amount > 0 && call.cost.currency === "USD", JSON.stringify(call));
  assert.ok(calls[2].usage.inputTokens > 0, "the stream's usage (include_usage asked for it)");
  assert.equal(calls[2].payload.choices[0].message.content, result.short);
  assert.equal(calls[3].payload.content[0].text, result.streamed);
  const requests = trace.filter((e) => e.type === "model_io" && e.direction === "request");
  assert.deepEqual(new Set(requests.map((r) => r.correlationId)), new Set(calls.map((c) => c.correlationId)));
  // two tools asked for, one ran: exactly one tool_call, named by the id the model asked with
  const tools = trace.filter((e) => e.type === "tool_call");
  assert.deepEqual(tools.map((t) => [t.name, t.stepId, t.result.sky]), [["get_weather", "lookup", "clear"]]);
  const asked = calls[0].payload.choices[0].message.tool_calls;
  assert.deepEqual(asked.map((c) => c.function.name), ["get_weather", "delete_city"]); // both stay visible
  assert.equal(tools[0].correlationId, asked[0].id);
  const ended = trace.find((e) => e.type === "span_ended" && e.correlationId === asked[0].id);
  assert.ok(ended.status === "ok" && ended.durationMs >= 0, JSON.stringify(ended));
  const keys = new Set(state.artifactsByKey.map(([, a]) => a.artifactKey));
  for (const key of ["forecast.input", "forecast.output", "lookup.input", "lookup.output"]) assert.ok(keys.has(key), key);
});

test("an exception marks the observed run failed; clients outside observe record nothing", { skip: SKIP }, async () => {
  const { gpt } = clients();
  const fragile = observe(async (n) => { throw new RangeError(`cannot handle ${n}`); }, { name: "fragile" });
  await assert.rejects(fragile(3), RangeError);
  const client = liveClient();
  const state = await client.getRun(fragile.lastRun.runId);
  assert.equal(state.run.status, "failed");
  const completed = state.trace.filter((e) => e.type === "step_completed");
  assert.equal(completed.at(-1).ok, false);
  assert.equal(completed.at(-1).error.code, "RangeError");
  const before = (await client.listRuns({ limit: 500 })).length;
  const answer = await gpt.chat.completions.create({ model: "gpt-5-mini", messages: [{ role: "user", content: "hi" }] });
  assert.ok(answer.choices[0].message.content);
  assert.equal((await client.listRuns({ limit: 500 })).length, before);
});

test("a replay answers from the server's response cache: no provider call, counted as cache hits", { skip: SKIP }, async () => {
  const { gpt } = clients();
  const haiku = observe(async (topic) => {
    const lines = [];
    for (const n of [0, 1]) {
      const answer = await gpt.chat.completions.create({ model: "gpt-5-mini", messages: [{ role: "user", content: `line ${n} about ${topic}` }] });
      lines.push(answer.choices[0].message.content);
    }
    let streamed = "";
    const stream = await gpt.chat.completions.create({ model: "gpt-5-mini", stream: true, messages: [{ role: "user", content: `last line about ${topic}` }] });
    for await (const chunk of stream) streamed += chunk.choices[0]?.delta?.content ?? "";
    lines.push(streamed);
    return lines.join("\n");
  }, { name: "haiku" });
  const first = await haiku("rain");
  const client = liveClient();
  const replay = await RemoteRun.replayOf(client, haiku.lastRun.runId);
  const again = await withScope(replay, undefined, () => haiku("rain"));
  await replay.finish();
  assert.equal(again, first);
  const calls = responses(await traceOf(client, replay.runId));
  assert.deepEqual(calls.map((c) => c.summary), ["replayed", "replayed", "replayed"]);
  const report = await client.request("GET", `/runs/${replay.runId}/determinism`);
  assert.equal(report.cacheHits, 3);
  assert.equal(report.providerCalls, 0);
});
