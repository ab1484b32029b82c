// Traced provider clients: the official `openai` and `@anthropic-ai/sdk` clients, recorded (a port
// of workbench_sdk.traced). Each call gets one correlation id: its model_io request when it
// starts; its stream_chunk events, the model_io response (provider, model, usage, cost from the
// price table, duration, the response as payload) in one append when it ends; a failed call
// records an error event. The tool calls the model asked for are part of that response (its
// payload), not events of their own: a tool_call event is a tool the host ran (runTool /
// tracer.tool: name, args, result or error, duration, the model's tool call id; see toolRunEvents). A `replay` function
// (provider, model, body) -> {body, chunks} | null is asked first: an answer is returned without
// calling the provider and recorded with summary "replayed" (client.replayFn() asks the
// server's response cache, keyed exactly like the Python SDK).
import { REPLAYED_SUMMARY, WorkbenchAPIError, makeEvent } from "./client.js";
import { costOf, priceFor } from "./pricing.js";

export class BudgetExceeded extends Error {
  constructor(message) {
    super(message);
    this.name = "BudgetExceeded";
  }
}

const plain = (value) => (value === undefined ? undefined : JSON.parse(JSON.stringify(value)));

/** The protocol's model_io.usage from a provider usage object (OTel GenAI conventions:
 * inputTokens is the whole prompt, cache reads and writes included; outputTokens includes the
 * reasoning). Reads Anthropic Messages, OpenAI Chat Completions and OpenAI Responses usage. */
export function usageOf(provider, usage) {
  if (!usage) return null;
  if (provider === "anthropic") {
    const read = usage.cache_read_input_tokens || 0;
    const write = usage.cache_creation_input_tokens || 0;
    const inp = (usage.input_tokens || 0) + read + write;
    const out = usage.output_tokens || 0;
    return { inputTokens: inp, outputTokens: out, totalTokens: inp + out, cachedInputTokens: read };
  }
  let inp, out, cached, reasoning;
  if (!("prompt_tokens" in usage) && "input_tokens" in usage) {
    inp = usage.input_tokens || 0;
    out = usage.output_tokens || 0;
    cached = usage.input_tokens_details?.cached_tokens || 0;
    reasoning = usage.output_tokens_details?.reasoning_tokens;
  } else {
    inp = usage.prompt_tokens || 0;
    out = usage.completion_tokens || 0;
    cached = usage.prompt_tokens_details?.cached_tokens || 0;
    reasoning = usage.completion_tokens_details?.reasoning_tokens;
  }
  const result = { inputTokens: inp, outputTokens: out, totalTokens: usage.total_tokens || inp + out, cachedInputTokens: cached };
  if (reasoning !== undefined && reasoning !== null) result.reasoningTokens = reasoning;
  return result;
}

function cacheWrites(provider, usage) {
  if (provider !== "anthropic" || !usage) return { cacheWriteTokens: 0, cacheWrite1hTokens: 0 };
  return {
    cacheWriteTokens: usage.cache_creation_input_tokens || 0,
    cacheWrite1hTokens: usage.cache_creation?.ephemeral_1h_input_tokens || 0,
  };
}

/** Records model calls into a run (a RemoteRun, or any {runId, record(events)}). */
export class Tracer {
  constructor(run, { stepId, prices, replay, recordChunks = true, budget = true } = {}) {
    this.run = run;
    this.stepId = stepId;
    this.prices = prices || null;
    this.serverPrices = !prices && !!run.client;
    this.replay = replay || null;
    this.recordChunks = recordChunks;
    this.budget = budget;
  }

  event(type, fields = {}) {
    return makeEvent(this.run.runId, type, { stepId: this.stepId, ...fields });
  }

  /** The price row of the first of `models` the table knows; else the server's (GET /api/prices). */
  async price(provider, ...models) {
    for (const model of models) {
      const row = priceFor(this.prices, provider, model);
      if (row) return row;
    }
    if (!this.serverPrices) return null;
    for (const model of models.filter(Boolean)) {
      try {
        const table = await this.run.client.prices([`${provider}:${model}`]);
        if (table[model]) return table[model];
      } catch (err) {
        if (err instanceof WorkbenchAPIError) return null; // the cost stays unknown
        throw err;
      }
    }
    return null;
  }

  /** Before a model call: return when the run's budget allows it; while the run waits at its
   * budget gate, wait for a person; throw BudgetExceeded when they stop it. */
  async checkBudget() {
    const client = this.run.client;
    if (!this.budget || !client) return;
    for (;;) {
      let answer;
      try {
        answer = await client.checkBudget(this.run.runId, this.stepId);
      } catch (err) {
        if (err instanceof WorkbenchAPIError && (err.status === 404 || err.status === 405)) return;
        throw err;
      }
      if (answer.allowed) return;
      const gate = answer.gate;
      if (!gate) throw new BudgetExceeded(answer.message || "the run's budget refused the call");
      let decided;
      do {
        decided = await client.waitForGate(this.run.runId, {
          stepId: gate.stepId, gate: gate.gate, checkpoint: gate.checkpoint, afterSeq: Number(gate.afterSeq),
        });
      } while (decided.status === "pending");
      if (decided.status === "closed" || !["approved", "edited"].includes(decided.decision)) {
        throw new BudgetExceeded(decided.note || answer.message || "stopped at the run's budget");
      }
    }
  }

  /** Record the request of a call (after the budget check): the Call that finishes it. */
  async begin(provider, model, request) {
    await this.checkBudget();
    const call = new Call(this, provider, model);
    await this.run.record([
      this.event("model_io", { correlationId: call.correlationId, direction: "request", provider, model, payload: plain(request) }),
    ]);
    return call;
  }

  /** Record a tool the host ran: its args, its result (or `error`), `durationMs`, and `callId`, the
   * tool call id the model asked with (`correlationId` is the older name). runTool measures for you. */
  tool(name, { args, result, error, callId, durationMs, correlationId } = {}) {
    const hasResult = result !== undefined && error === undefined;
    return this.run.record(toolRunEvents(this, name, { args, result, hasResult, error, callId: callId ?? correlationId, durationMs }));
  }

  /** Run one tool and record it: `fn(args)` is awaited; its value is the result, a throw the
   * error (thrown on). `callOrName`: a tool call the model asked for (OpenAI's, an Anthropic
   * tool_use block, an AI SDK tool-call part) or the tool's name with `{args}`. A requested call
   * the host does not run is simply not given to runTool: it stays in the model's response. */
  async runTool(callOrName, fn, { args, callId } = {}) {
    const asked = requestedCall(callOrName);
    const name = asked.name;
    const input = args === undefined ? asked.args : args;
    const id = callId ?? asked.callId;
    const started = performance.now();
    let result;
    try {
      result = await fn(input);
    } catch (err) {
      await this.run.record(toolRunEvents(this, name, { args: input, error: err, callId: id, durationMs: performance.now() - started }));
      throw err;
    }
    await this.run.record(toolRunEvents(this, name, { args: input, result, hasResult: true, callId: id, durationMs: performance.now() - started }));
    return result;
  }
}

/** {callId, name, args} of a tool call a model asked for: an OpenAI Chat Completions tool call
 * ({id, function: {name, arguments}}), an OpenAI Responses function_call ({call_id, name,
 * arguments}), an Anthropic tool_use block ({id, name, input}) or an AI SDK tool-call part
 * ({toolCallId, toolName, input}); a string is a tool's name. JSON text arguments are parsed. */
export function requestedCall(call) {
  if (typeof call === "string") return { callId: undefined, name: call, args: undefined };
  if (call?.function) return { callId: call.id, name: String(call.function.name || "tool"), args: parseArgs(call.function.arguments) };
  return {
    callId: call?.toolCallId ?? call?.call_id ?? call?.id,
    name: String(call?.toolName ?? call?.name ?? "tool"),
    args: parseArgs(call?.input ?? call?.args ?? call?.arguments),
  };
}

/** The protocol's error object {message, code?} of a thrown value, a text or such an object. */
function errorInfo(err) {
  if (err instanceof Error) return { message: `${err.name || "Error"}: ${err.message}`.slice(0, 2000), code: err.name || "Error" };
  if (err && typeof err === "object") return { message: String(err.message ?? "tool failed").slice(0, 2000), ...(err.code ? { code: String(err.code) } : {}) };
  return { message: String(err).slice(0, 2000) };
}

/** The events of one tool run that ended now, as the server makes of a tool span (GenAI
 * execute_tool): span_started (its start; gen_ai.operation.name, gen_ai.tool.name,
 * gen_ai.tool.call.id), tool_call (name, args, result unless it failed), span_ended (durationMs,
 * status ok or error with {message, code}); one correlation id, the model's tool call id
 * (tool_<uuid> without one). The protocol has no other place for a tool's duration or error. */
export function toolRunEvents(tracer, name, { args, result, hasResult = true, error, callId, durationMs = 0 } = {}) {
  const correlationId = callId || `tool_${crypto.randomUUID()}`;
  const spanId = `tool_${crypto.randomUUID().replaceAll("-", "")}`;
  const duration = Math.max(0, Number(durationMs) || 0);
  const end = Date.now();
  const attributes = { "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name };
  if (callId) attributes["gen_ai.tool.call.id"] = callId;
  const started = tracer.event("span_started", { correlationId, spanId, name: `execute_tool ${name}`, kind: "internal", attributes });
  started.ts = new Date(end - duration).toISOString();
  const call = tracer.event("tool_call", { correlationId, name, args });
  if (hasResult && error === undefined) call.result = plain(result) ?? null;
  const ended = tracer.event("span_ended", { correlationId, spanId, status: error === undefined ? "ok" : "error", durationMs: Math.round(duration * 1000) / 1000 });
  if (error !== undefined) ended.error = errorInfo(error);
  return [started, call, ended];
}

/** One provider call: its correlation id, start time and the stream chunks not yet recorded. */
export class Call {
  constructor(tracer, provider, model) {
    this.tracer = tracer;
    this.provider = provider;
    this.model = model;
    this.correlationId = `call_${crypto.randomUUID()}`;
    this.started = performance.now();
    this.pending = [];
    this.done = false;
  }

  chunk(payload) {
    if (!this.tracer.recordChunks) return;
    const { provider, model, correlationId } = this;
    this.pending.push(this.tracer.event("model_io", { correlationId, direction: "stream_chunk", provider, model, payload: plain(payload) }));
  }

  /** Record the response: `usage` the provider's usage object (or `protocolUsage` already in the
   * protocol's shape). The tool calls it asks for stay in its payload (a tool_call is a tool run). */
  async finish(response, { usage, protocolUsage, summary, cacheWrite } = {}) {
    if (this.done) return;
    this.done = true;
    const usageDoc = protocolUsage ?? usageOf(this.provider, usage);
    const model = response?.model || response?.modelId || this.model;
    const price = await this.tracer.price(this.provider, model, this.model);
    const cost = costOf(usageDoc, price, cacheWrite ?? cacheWrites(this.provider, usage));
    const fields = {
      correlationId: this.correlationId,
      direction: "response",
      provider: this.provider,
      model,
      durationMs: Math.round((performance.now() - this.started) * 1000) / 1000,
      payload: plain(response),
      summary,
    };
    if (usageDoc) fields.usage = usageDoc;
    if (cost) {
      fields.cost = cost;
      if (price.source && fields.payload && typeof fields.payload === "object") {
        fields.payload = { ...fields.payload, "workbench.pricing": { source: price.source, model } };
      }
    }
    const events = [...this.pending, this.tracer.event("model_io", fields)];
    this.pending = [];
    await this.tracer.run.record(events);
  }

  async fail(err) {
    if (this.done) return;
    this.done = true;
    const message = `${err?.name || "Error"}: ${err?.message ?? err}`.slice(0, 2000);
    const events = [...this.pending, this.tracer.event("error", { correlationId: this.correlationId, message })];
    this.pending = [];
    await this.tracer.run.record(events);
  }
}

// ------------------------------------------------------------------------------------------
// Providers: stream accumulators, tool calls, replayed streams

function parseArgs(text) {
  if (typeof text !== "string") return text;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

const OPENAI = {
  name: "openai",
  accumulator() {
    let head = null;
    let usage = null;
    const choices = new Map();
    return {
      feed(chunk) {
        head ??= { id: chunk.id, object: "chat.completion", created: chunk.created, model: chunk.model };
        if (chunk.usage) usage = chunk.usage;
        for (const choice of chunk.choices || []) {
          const c = choices.get(choice.index) ?? { index: choice.index, message: { role: "assistant", content: null }, finish_reason: null };
          choices.set(choice.index, c);
          const delta = choice.delta || {};
          if (typeof delta.content === "string") c.message.content = (c.message.content ?? "") + delta.content;
          for (const tc of delta.tool_calls || []) {
            c.message.tool_calls ??= [];
            const slot = (c.message.tool_calls[tc.index ?? 0] ??= { id: tc.id, type: "function", function: { name: "", arguments: "" } });
            if (tc.id) slot.id = tc.id;
            if (tc.function?.name) slot.function.name += tc.function.name;
            if (tc.function?.arguments) slot.function.arguments += tc.function.arguments;
          }
          if (choice.finish_reason) c.finish_reason = choice.finish_reason;
        }
      },
      final() {
        const response = { ...(head || {}), choices: [...choices.values()].sort((a, b) => a.index - b.index) };
        if (usage) response.usage = usage;
        return { response, usage };
      },
    };
  },
  /** Stream events rebuilt from a recorded whole response. */
  events(body) {
    const base = { id: body.id, object: "chat.completion.chunk", created: body.created, model: body.model };
    const out = (body.choices || []).map((c) => ({
      ...base,
      choices: [{ index: c.index ?? 0, delta: { role: "assistant", ...(c.message || {}) }, finish_reason: c.finish_reason ?? "stop" }],
    }));
    if (body.usage) out.push({ ...base, choices: [], usage: body.usage });
    return out;
  },
  prepare(body) {
    // OpenAI sends usage in a stream only when asked; ask, so the ledger has it
    return body.stream && !("stream_options" in body) ? { ...body, stream_options: { include_usage: true } } : body;
  },
};

const ANTHROPIC = {
  name: "anthropic",
  accumulator() {
    let message = null;
    const blocks = [];
    const json = new Map();
    return {
      feed(event) {
        if (event.type === "message_start") message = { ...event.message, content: [] };
        else if (event.type === "content_block_start") blocks[event.index] = { ...event.content_block };
        else if (event.type === "content_block_delta") {
          const block = blocks[event.index];
          const d = event.delta || {};
          if (d.type === "text_delta") block.text = (block.text || "") + d.text;
          else if (d.type === "input_json_delta") json.set(event.index, (json.get(event.index) || "") + d.partial_json);
          else if (d.type === "thinking_delta") block.thinking = (block.thinking || "") + d.thinking;
        } else if (event.type === "message_delta" && message) {
          Object.assign(message, event.delta || {});
          message.usage = { ...(message.usage || {}), ...(event.usage || {}) };
        }
      },
      final() {
        for (const [index, text] of json) blocks[index].input = parseArgs(text || "{}");
        const response = { ...(message || {}), content: blocks.filter(Boolean) };
        return { response, usage: response.usage };
      },
    };
  },
  events(body) {
    const { content = [], usage = {}, stop_reason, stop_sequence, ...rest } = body;
    const out = [{ type: "message_start", message: { ...rest, content: [], stop_reason: null, usage: { ...usage, output_tokens: 0 } } }];
    content.forEach((block, index) => {
      if (block.type === "text") {
        out.push({ type: "content_block_start", index, content_block: { type: "text", text: "" } });
        out.push({ type: "content_block_delta", index, delta: { type: "text_delta", text: block.text } });
      } else if (block.type === "tool_use") {
        out.push({ type: "content_block_start", index, content_block: { ...block, input: {} } });
        out.push({ type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: JSON.stringify(block.input ?? {}) } });
      } else {
        out.push({ type: "content_block_start", index, content_block: block });
      }
      out.push({ type: "content_block_stop", index });
    });
    out.push({ type: "message_delta", delta: { stop_reason, stop_sequence: stop_sequence ?? null }, usage: { output_tokens: usage.output_tokens ?? 0 } });
    out.push({ type: "message_stop" });
    return out;
  },
  prepare: (body) => body,
};

/** An SDK stream (async iterable), yielded unchanged while it is recorded. */
class TracedStream {
  constructor(source, call, provider, summary) {
    this.source = source;
    this.call = call;
    this.provider = provider;
    this.summary = summary;
    this.controller = source?.controller;
  }

  async *[Symbol.asyncIterator]() {
    const { feed, final } = this.provider.accumulator();
    let ended = false;
    try {
      for await (const event of this.source) {
        this.call.chunk(event);
        feed(event);
        yield event;
      }
      ended = true;
    } catch (err) {
      await this.call.fail(err);
      throw err;
    } finally {
      if (!ended && !this.call.done) await this.call.fail(new Error("stream closed before it ended"));
    }
    const { response, usage } = final();
    await this.call.finish(response, { usage, summary: this.summary });
  }

  /** The stream's text parts, for a quick look (OpenAI deltas or Anthropic text deltas). */
  async text() {
    let out = "";
    for await (const e of this) out += e.choices?.[0]?.delta?.content ?? (e.delta?.type === "text_delta" ? e.delta.text : "");
    return out;
  }
}

async function* fromList(events) {
  for (const event of events) yield event;
}

/** `create` of one endpoint (chat.completions or messages), recorded through `tracer`. */
function tracedCreate(target, provider, tracer) {
  return async function create(body, options) {
    const model = body?.model || "";
    const call = await tracer.begin(provider.name, model, body);
    const answer = tracer.replay ? await tracer.replay(provider.name, model, body) : null;
    if (answer) {
      const recorded = answer.body ?? answer;
      if (body.stream) {
        const events = answer.chunks?.length ? answer.chunks : provider.events(recorded);
        return new TracedStream(fromList(events), call, provider, REPLAYED_SUMMARY);
      }
      await call.finish(recorded, { usage: recorded.usage, summary: REPLAYED_SUMMARY });
      return recorded;
    }
    let result;
    try {
      result = await target.create(provider.prepare(body), options);
    } catch (err) {
      await call.fail(err);
      throw err;
    }
    if (body.stream) return new TracedStream(result, call, provider);
    await call.finish(result, { usage: result?.usage });
    return result;
  };
}

/** `target` with some properties replaced (everything else is the original's, methods bound). */
export function overlay(target, overrides) {
  return new Proxy(target, {
    get(obj, prop) {
      if (Object.hasOwn(overrides, prop)) return overrides[prop];
      const value = Reflect.get(obj, prop, obj);
      return typeof value === "function" ? value.bind(obj) : value;
    },
  });
}

/** An `openai` client (new OpenAI(...)) whose chat.completions.create is recorded. */
export function tracedOpenAI(client, tracer) {
  const completions = overlay(client.chat.completions, { create: tracedCreate(client.chat.completions, OPENAI, tracer) });
  return overlay(client, { chat: overlay(client.chat, { completions }) });
}

/** An `@anthropic-ai/sdk` client (new Anthropic(...)) whose messages.create is recorded. */
export function tracedAnthropic(client, tracer) {
  return overlay(client, { messages: overlay(client.messages, { create: tracedCreate(client.messages, ANTHROPIC, tracer) }) });
}

export const PROVIDERS = { openai: OPENAI, anthropic: ANTHROPIC };
