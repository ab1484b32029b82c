// No server: a tool_call event is a tool that ran. The tool calls a model asks for stay in its
// response (the model_io payload); runTool / traceTools record the one the host runs (name, args,
// result or error, duration, the model's tool call id), inside a span as the server makes of a
// tool span. A model asking for two tools of which one runs yields exactly one tool_call.
import assert from "node:assert/strict";
import { test } from "node:test";
import { generateText, jsonSchema, tool, wrapLanguageModel } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { Tracer, requestedCall, runTool, traceTools, tracedAnthropic, tracedOpenAI, withScope, workbenchMiddleware } from "../src/index.js";

class MemoryRun {
  runId = "run_memory";
  events = [];
  batches = 0;
  async record(events) {
    this.batches += 1;
    this.events.push(...events);
  }
}

const TWO_CALLS = {
  id: "chatcmpl_1", object: "chat.completion", created: 1, model: "gpt-5-mini",
  choices: [{
    index: 0, finish_reason: "tool_calls",
    message: {
      role: "assistant", content: null,
      tool_calls: [
        { id: "call_w", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo"}' } },
        { id: "call_d", type: "function", function: { name: "delete_city", arguments: '{"city":"Oslo"}' } },
      ],
    },
  }],
  usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
};

const kinds = (run) => run.events.map((e) => e.direction || e.type);

test("openai: two tools asked for, one run: one tool_call, both requests in the response", async () => {
  const run = new MemoryRun();
  const tracer = new Tracer(run, { stepId: "agent", prices: { "gpt-5-mini": { input: 1, output: 2 } } });
  const gpt = tracedOpenAI({ chat: { completions: { create: async () => TWO_CALLS } } }, tracer);
  const answer = await gpt.chat.completions.create({ model: "gpt-5-mini", messages: [{ role: "user", content: "weather, then delete" }] });
  assert.deepEqual(kinds(run), ["request", "response"]); // asking is not running
  for (const call of answer.choices[0].message.tool_calls) {
    if (call.function.name === "delete_city") continue; // refused: never run
    const out = await tracer.runTool(call, async ({ city }) => ({ city, sky: "clear" }));
    assert.deepEqual(out, { city: "Oslo", sky: "clear" });
  }
  assert.deepEqual(kinds(run), ["request", "response", "span_started", "tool_call", "span_ended"]);
  const tools = run.events.filter((e) => e.type === "tool_call");
  assert.equal(tools.length, 1);
  const [ran] = tools;
  assert.deepEqual([ran.name, ran.args, ran.result, ran.correlationId, ran.stepId], ["get_weather", { city: "Oslo" }, { city: "Oslo", sky: "clear" }, "call_w", "agent"]);
  const response = run.events.find((e) => e.direction === "response");
  assert.deepEqual(response.payload.choices[0].message.tool_calls.map((c) => c.id), ["call_w", "call_d"]);
  const [started, , ended] = run.events.slice(2);
  assert.equal(started.name, "execute_tool get_weather");
  assert.deepEqual(started.attributes, { "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather", "gen_ai.tool.call.id": "call_w" });
  assert.equal(ended.spanId, started.spanId);
  assert.equal(ended.status, "ok");
  assert.ok(ended.durationMs >= 0 && started.ts <= ended.ts);
  assert.equal(run.batches, 3); // request, response, the tool run in one append
});

test("anthropic: a tool that throws is a run with its error and no result; tracer.tool records after the fact", async () => {
  const run = new MemoryRun();
  const tracer = new Tracer(run);
  const message = {
    id: "msg_1", type: "message", role: "assistant", model: "claude-haiku-4-5", stop_reason: "tool_use",
    content: [{ type: "tool_use", id: "toolu_1", name: "lookup", input: { k: "x" } }],
    usage: { input_tokens: 3, output_tokens: 2 },
  };
  const claude = tracedAnthropic({ messages: { create: async () => message } }, tracer);
  const answer = await claude.messages.create({ model: "claude-haiku-4-5", max_tokens: 5, messages: [] });
  await assert.rejects(tracer.runTool(answer.content[0], async () => { throw new RangeError("no such key"); }), RangeError);
  const call = run.events.find((e) => e.type === "tool_call");
  assert.deepEqual([call.name, call.args, "result" in call, call.correlationId], ["lookup", { k: "x" }, false, "toolu_1"]);
  const ended = run.events.find((e) => e.type === "span_ended");
  assert.deepEqual([ended.status, ended.error], ["error", { message: "RangeError: no such key", code: "RangeError" }]);

  await tracer.tool("search", { args: { q: "x" }, result: ["hit"], durationMs: 12 });
  const last = run.events.slice(-3);
  assert.deepEqual(last.map((e) => e.type), ["span_started", "tool_call", "span_ended"]);
  assert.equal(last[2].durationMs, 12);
  assert.ok(last[1].correlationId.startsWith("tool_")); // no call id given: one of its own
  assert.equal(run.events.filter((e) => e.type === "tool_call").length, 2);
});

test("requestedCall reads OpenAI, Responses, Anthropic and AI SDK calls", () => {
  assert.deepEqual(requestedCall({ id: "c", function: { name: "f", arguments: '{"a":1}' } }), { callId: "c", name: "f", args: { a: 1 } });
  assert.deepEqual(requestedCall({ type: "function_call", call_id: "fc", name: "f", arguments: "{}" }), { callId: "fc", name: "f", args: {} });
  assert.deepEqual(requestedCall({ type: "tool_use", id: "t", name: "f", input: { a: 2 } }), { callId: "t", name: "f", args: { a: 2 } });
  assert.deepEqual(requestedCall({ type: "tool-call", toolCallId: "x", toolName: "f", input: '{"a":3}' }), { callId: "x", name: "f", args: { a: 3 } });
});

test("runTool records into the observed scope and just runs outside any", async () => {
  const run = new MemoryRun();
  assert.equal(await runTool("add", ({ a, b }) => a + b, { args: { a: 1, b: 2 } }), 3);
  assert.equal(run.events.length, 0);
  const sum = await withScope(run, "math", () => runTool("add", ({ a, b }) => a + b, { args: { a: 2, b: 2 }, callId: "call_9" }));
  assert.equal(sum, 4);
  const [call] = run.events.filter((e) => e.type === "tool_call");
  assert.deepEqual([call.name, call.result, call.stepId, call.correlationId], ["add", 4, "math", "call_9"]);
});

test("AI SDK: the model asks for two tools, generateText executes one: one tool_call, both in the response", async () => {
  const run = new MemoryRun();
  const mock = new MockLanguageModelV3({
    provider: "openai.chat",
    modelId: "m-1",
    doGenerate: async () => ({
      content: [
        { type: "tool-call", toolCallId: "tc_w", toolName: "get_weather", input: '{"city":"Oslo"}' },
        { type: "tool-call", toolCallId: "tc_d", toolName: "delete_city", input: '{"city":"Oslo"}' },
      ],
      finishReason: { unified: "tool-calls", raw: "tool_calls" },
      usage: { inputTokens: { total: 5 }, outputTokens: { total: 3 } },
      warnings: [],
    }),
  });
  const model = wrapLanguageModel({ model: mock, middleware: workbenchMiddleware({ run, stepId: "s" }) });
  const schema = jsonSchema({ type: "object", properties: { city: { type: "string" } }, required: ["city"] });
  const tools = traceTools({
    get_weather: tool({ description: "Weather", inputSchema: schema, execute: async ({ city }) => ({ city, sky: "clear" }) }),
    delete_city: tool({ description: "Delete a city (the host runs it only after a person agrees)", inputSchema: schema }),
  }, { run, stepId: "s" });
  const result = await generateText({ model, prompt: "weather, then delete", tools });
  assert.equal(result.toolResults.length, 1);
  const calls = run.events.filter((e) => e.type === "tool_call");
  assert.equal(calls.length, 1);
  assert.deepEqual([calls[0].name, calls[0].args, calls[0].result, calls[0].correlationId, calls[0].stepId], ["get_weather", { city: "Oslo" }, { city: "Oslo", sky: "clear" }, "tc_w", "s"]);
  const response = run.events.find((e) => e.direction === "response");
  assert.deepEqual(response.payload.content.filter((p) => p.type === "tool-call").map((p) => p.toolCallId), ["tc_w", "tc_d"]);
  assert.ok(run.events.some((e) => e.type === "span_ended" && e.correlationId === "tc_w" && e.status === "ok"));
});
