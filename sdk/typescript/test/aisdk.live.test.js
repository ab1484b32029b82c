// The Vercel AI SDK against a real server and the loopback OpenAI fake: a Next.js-style route
// handler (generateText, then streamText to the client) through workbenchMiddleware, a gate that
// waits for a reviewer's decision; and the AI SDK's own OTel telemetry exported to /v1/traces.
import assert from "node:assert/strict";
import { test } from "node:test";
import { createOpenAI } from "@ai-sdk/openai";
import { context } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { generateText, jsonSchema, stepCountIs, streamText, tool, wrapLanguageModel } from "ai";
import { RemoteRun, workbenchMiddleware } from "../src/index.js";
import { OPENAI_URL, SKIP, eventually, liveClient, responses, traceOf } from "./helpers.js";

const WORKFLOW = {
  id: "nextjs-chat",
  version: 0,
  steps: [{ id: "draft" }, { id: "review" }],
  edges: [{ id: "e1", from: "draft", to: "review" }],
};

// what a Next.js route (app/api/chat/route.ts) does, minus the Response around the stream
async function chatRoute(run, prompt) {
  const openai = createOpenAI({ baseURL: OPENAI_URL, apiKey: "test-openai-key" });
  const model = wrapLanguageModel({ model: openai.chat("gpt-4o-mini"), middleware: workbenchMiddleware({ run, stepId: "draft" }) });
  const { text: outline } = await generateText({ model, prompt: `Outline: ${prompt}` });
  const result = streamText({ model, prompt: `Write it: ${outline}` });
  let streamed = "";
  for await (const delta of result.textStream) streamed += delta;
  return { outline, streamed };
}

test("generateText and streamText through the middleware record priced calls; a gate waits for the decision", { skip: SKIP }, async () => {
  const client = liveClient();
  const run = await RemoteRun.start(client, { workflow: WORKFLOW, title: "ai sdk chat" });
  const { outline, streamed } = await run.step("draft", () => chatRoute(run, "a greeting"));
  assert.match(outline, /Outline: a greeting/);
  assert.match(streamed, /Write it: /);
  await run.startStep("review");
  const decision = await run
    .gate("review", "CHECKPOINT", { name: "review", reason: "Send this reply?", payload: { text: streamed } })
    .wait({ timeout: 120 });
  assert.equal(decision.decision, "approved");
  assert.equal(decision.note, "send it");
  assert.deepEqual(decision.payload, { text: streamed });
  await run.completeStep("review");
  await run.finish();

  const trace = await traceOf(client, run.runId);
  const calls = responses(trace);
  assert.equal(calls.length, 2);
  for (const call of calls) {
    assert.equal(call.provider, "openai");
    assert.equal(call.stepId, "draft");
    assert.ok(call.usage.inputTokens > 0 && call.usage.outputTokens > 0, JSON.stringify(call.usage));
    assert.ok(call.cost.amount > 0 && call.cost.currency === "USD", JSON.stringify(call.cost));
  }
  assert.equal(calls[0].payload.text, outline);
  assert.equal(calls[1].payload.text, streamed); // the stream's text, recorded whole
  const chunks = trace.filter((e) => e.type === "model_io" && e.direction === "stream_chunk");
  assert.ok(chunks.some((c) => c.payload.type === "text-delta"));
  const requests = trace.filter((e) => e.type === "model_io" && e.direction === "request");
  assert.equal(requests[0].payload.messages[0].content, "Outline: a greeting");
  const state = await client.getRun(run.runId);
  assert.equal(state.run.status, "completed");
});

test("a replay of the route answers both calls from the server's response cache, the stream included", { skip: SKIP }, async () => {
  const client = liveClient();
  const source = await RemoteRun.start(client, { workflow: WORKFLOW, title: "ai sdk chat (source)" });
  const first = await source.step("draft", () => chatRoute(source, "a replayed greeting"));
  await source.finish();
  const replay = await RemoteRun.replayOf(client, source.runId);
  const again = await replay.step("draft", () => chatRoute(replay, "a replayed greeting"));
  await replay.finish();
  assert.deepEqual(again, first);
  const calls = responses(await traceOf(client, replay.runId));
  assert.deepEqual(calls.map((c) => c.summary), ["replayed", "replayed"]);
  assert.ok(calls.every((c) => c.cost.amount > 0));
  const report = await client.request("GET", `/runs/${replay.runId}/determinism`);
  assert.equal(report.cacheHits, 2);
  assert.equal(report.providerCalls, 0);
});

test("the AI SDK's own OTel telemetry exported to /v1/traces becomes a run with priced model calls", { skip: SKIP }, async () => {
  const client = liveClient();
  // what NodeSDK / @vercel/otel register: spans of one call share a trace through the context
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const exporter = new OTLPTraceExporter({
    url: `${process.env.WORKBENCH_URL}/v1/traces`,
    headers: { Authorization: `Bearer ${process.env.WORKBENCH_TOKEN}` },
  });
  const service = `ts-aisdk-otel-${Date.now()}`;
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": service }),
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  const openai = createOpenAI({ baseURL: OPENAI_URL, apiKey: "test-openai-key" });
  const result = await generateText({
    model: openai.chat("gpt-4o-mini"),
    prompt: "use get_weather for Paris",
    tools: {
      get_weather: tool({
        description: "Weather of a city",
        inputSchema: jsonSchema({ type: "object", properties: { city: { type: "string" } }, required: ["city"] }),
        execute: async ({ city }) => ({ city, sky: "clear" }),
      }),
    },
    stopWhen: stepCountIs(2),
    experimental_telemetry: { isEnabled: true, tracer: provider.getTracer("ai"), functionId: "weather" },
  });
  assert.equal(result.steps.length, 2);
  await provider.forceFlush();
  await provider.shutdown();

  const run = await eventually(async () => (await client.listRuns({ limit: 500 })).find((r) => r.tags?.includes(`service:${service}`)));
  const trace = await eventually(async () => {
    const events = await traceOf(client, run.id);
    return responses(events).length >= 2 && events.some((e) => e.type === "tool_call" && "result" in e) ? events : null;
  });
  const calls = responses(trace);
  assert.equal(calls.length, 2); // the doGenerate spans; the outer ai.generateText span is not a second count
  for (const call of calls) {
    assert.equal(call.provider, "openai");
    assert.equal(call.model, "gpt-4o-mini");
    assert.ok(call.usage.inputTokens > 0, JSON.stringify(call.usage));
    assert.ok(call.cost.amount > 0 && call.cost.currency === "USD", JSON.stringify(call.cost));
  }
  const request = trace.find((e) => e.type === "model_io" && e.direction === "request");
  assert.equal(request.payload.inputMessages[0].parts[0].content, "use get_weather for Paris");
  const ran = trace.filter((e) => e.type === "tool_call" && "result" in e);
  const executed = result.steps.flatMap((s) => s.toolResults);
  assert.ok(executed.length >= 1);
  assert.deepEqual(ran.map((t) => [t.name, t.result]), executed.map((r) => [r.toolName, r.output]));
  // one run for the trace: no span of it made a run of its own
  const runs = (await client.listRuns({ limit: 500 })).filter((r) => r.tags?.includes(`service:${service}`));
  assert.equal(runs.length, 1);
  // the model calls keep their place in the span tree, under the ai.generateText root
  const spans = trace.filter((e) => e.type === "span_started");
  const root = spans.find((s) => !s.parentSpanId);
  assert.equal(root.name, "ai.generateText");
  const doGenerate = spans.filter((s) => s.name === "ai.generateText.doGenerate");
  assert.equal(doGenerate.length, 2);
  assert.ok(doGenerate.every((s) => s.parentSpanId === root.spanId));
});

test("a request span holding generateText and streamText: one run, the stream's call priced too", { skip: SKIP }, async () => {
  const client = liveClient();
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const service = `ts-aisdk-stream-${Date.now()}`;
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": service }),
    spanProcessors: [new SimpleSpanProcessor(new OTLPTraceExporter({
      url: `${process.env.WORKBENCH_URL}/v1/traces`,
      headers: { Authorization: `Bearer ${process.env.WORKBENCH_TOKEN}` },
    }))],
  });
  const tracer = provider.getTracer("route");
  const model = createOpenAI({ baseURL: OPENAI_URL, apiKey: "test-openai-key" }).chat("gpt-4o-mini");
  const telemetry = { isEnabled: true, tracer };
  const streamed = await tracer.startActiveSpan("POST /api/chat", async (span) => {
    const { text } = await generateText({ model, prompt: "Outline: tides", experimental_telemetry: telemetry });
    const result = streamText({ model, prompt: `Write it: ${text}`, experimental_telemetry: telemetry });
    let out = "";
    for await (const delta of result.textStream) out += delta;
    span.end();
    return out;
  });
  await provider.forceFlush();
  await provider.shutdown();

  const run = await eventually(async () => (await client.listRuns({ limit: 500 })).find((r) => r.tags?.includes(`service:${service}`)));
  const trace = await eventually(async () => {
    const events = await traceOf(client, run.id);
    return responses(events).length >= 2 && events.some((e) => e.type === "span_started" && !e.parentSpanId) ? events : null;
  });
  const calls = responses(trace);
  assert.equal(calls.length, 2);
  assert.ok(calls.every((c) => c.provider === "openai" && c.cost.amount > 0), JSON.stringify(calls));
  const started = Object.fromEntries(trace.filter((e) => e.type === "span_started").map((e) => [e.correlationId, e])); // a span's events share it
  const names = calls.map((c) => started[c.correlationId].name).sort();
  assert.deepEqual(names, ["ai.generateText.doGenerate", "ai.streamText.doStream"]);
  const stream = calls.find((c) => started[c.correlationId].name === "ai.streamText.doStream");
  assert.equal(stream.payload.outputMessages[0].parts[0].content, streamed); // the stream's text
  const root = Object.values(started).find((s) => !s.parentSpanId);
  assert.equal(root.name, "POST /api/chat");
});
