// No server: pricing, usage conventions and the AI SDK middleware against the AI SDK's own mock
// model (a run that keeps its events in memory).
import assert from "node:assert/strict";
import { test } from "node:test";
import { generateText, streamText, wrapLanguageModel } from "ai";
import { MockLanguageModelV3, simulateReadableStream } from "ai/test";
import { costOf, priceFor, usageOf, workbenchMiddleware } from "../src/index.js";

const USAGE = {
  inputTokens: { total: 120, noCache: 20, cacheRead: 100, cacheWrite: 0 },
  outputTokens: { total: 30, text: 20, reasoning: 10 },
};

class MemoryRun {
  runId = "run_memory";
  events = [];
  async record(events) { this.events.push(...events); }
}

test("costs follow the server's arithmetic; a missing price is unknown, never 0", () => {
  const row = { input: "1", output: 5, cache_read: 0.1, currency: "usd" };
  const usage = usageOf("anthropic", { input_tokens: 100, cache_read_input_tokens: 1000, output_tokens: 10 });
  assert.deepEqual(usage, { inputTokens: 1100, outputTokens: 10, totalTokens: 1110, cachedInputTokens: 1000 });
  const cost = costOf(usage, row);
  assert.equal(cost.currency, "USD");
  assert.ok(Math.abs(cost.amount - (100 * 1 + 10 * 5 + 1000 * 0.1) / 1e6) < 1e-15);
  assert.equal(costOf(usage, { input: 1, output: 5 }), null);
  assert.equal(priceFor({ "openai:m": 1, m: 2 }, "openai", "m"), 1);
  assert.equal(priceFor({ m: 2 }, "anthropic", "m"), 2);
  const openai = usageOf("openai", { prompt_tokens: 10, completion_tokens: 5, completion_tokens_details: { reasoning_tokens: 2 } });
  assert.deepEqual(openai, { inputTokens: 10, outputTokens: 5, totalTokens: 15, cachedInputTokens: 0, reasoningTokens: 2 });
});

test("the middleware records generateText and streamText calls with usage, cost and the stream's text", async () => {
  const run = new MemoryRun();
  const mock = new MockLanguageModelV3({
    provider: "openai.chat",
    modelId: "m-1",
    doGenerate: async () => ({ content: [{ type: "text", text: "Hello" }], finishReason: { unified: "stop", raw: "stop" }, usage: USAGE, warnings: [] }),
    doStream: async () => ({
      stream: simulateReadableStream({
        chunks: [
          { type: "text-start", id: "t" },
          { type: "text-delta", id: "t", delta: "Hel" },
          { type: "text-delta", id: "t", delta: "lo!" },
          { type: "text-end", id: "t" },
          { type: "finish", finishReason: { unified: "stop", raw: "stop" }, usage: USAGE },
        ],
      }),
    }),
  });
  const prices = { "m-1": { input: 1, output: 2, cache_read: 0.5 } };
  const model = wrapLanguageModel({ model: mock, middleware: workbenchMiddleware({ run, stepId: "s", prices }) });
  const { text } = await generateText({ model, system: "Be brief.", prompt: "Say hello", temperature: 0 });
  assert.equal(text, "Hello");
  const result = streamText({ model, prompt: "Stream hello" });
  let streamed = "";
  for await (const delta of result.textStream) streamed += delta;
  assert.equal(streamed, "Hello!");
  await result.consumeStream?.();

  const requests = run.events.filter((e) => e.type === "model_io" && e.direction === "request");
  assert.deepEqual(requests[0].payload, {
    model: "m-1", temperature: 0,
    messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Say hello" }],
  });
  const answers = run.events.filter((e) => e.type === "model_io" && e.direction === "response");
  assert.deepEqual(answers.map((a) => [a.provider, a.model, a.stepId, a.payload.text]), [["openai", "m-1", "s", "Hello"], ["openai", "m-1", "s", "Hello!"]]);
  for (const answer of answers) {
    assert.deepEqual(answer.usage, { inputTokens: 120, outputTokens: 30, totalTokens: 150, cachedInputTokens: 100, reasoningTokens: 10 });
    assert.ok(Math.abs(answer.cost.amount - (20 * 1 + 30 * 2 + 100 * 0.5) / 1e6) < 1e-15);
  }
  const chunks = run.events.filter((e) => e.direction === "stream_chunk");
  assert.deepEqual(chunks.filter((c) => c.payload.type === "text-delta").map((c) => c.payload.delta), ["Hel", "lo!"]);
  assert.equal(new Set(run.events.filter((e) => e.type === "model_io").map((e) => e.correlationId)).size, 2);
});

test("a failing call records an error event; outside a run the middleware passes through", async () => {
  const run = new MemoryRun();
  const mock = new MockLanguageModelV3({ doGenerate: async () => { throw new Error("provider down"); } });
  const model = wrapLanguageModel({ model: mock, middleware: workbenchMiddleware({ run }) });
  await assert.rejects(generateText({ model, prompt: "x", maxRetries: 0 }), /provider down/);
  assert.ok(run.events.some((e) => e.type === "error" && /provider down/.test(e.message)));
  const bare = wrapLanguageModel({
    model: new MockLanguageModelV3({ doGenerate: async () => ({ content: [{ type: "text", text: "ok" }], finishReason: { unified: "stop", raw: "stop" }, usage: USAGE, warnings: [] }) }),
    middleware: workbenchMiddleware(),
  });
  assert.equal((await generateText({ model: bare, prompt: "x" })).text, "ok");
});
