// The Vercel AI SDK (`ai`): a language-model middleware that records every call of a wrapped
// model (generateText, streamText, generateObject, streamObject; streaming included) as model
// events on a run. No import of `ai` here: the middleware is plain data for wrapLanguageModel.
//
//   import { wrapLanguageModel, generateText } from "ai";
//   const model = wrapLanguageModel({ model: openai.chat("gpt-4o-mini"), middleware: workbenchMiddleware({ run, stepId: "draft" }) });
//
// Without `run`, calls record into the current observed call (observe(), withScope()) and pass
// straight through outside any. Per call: a model_io request (an OpenAI-style wire body: model,
// messages, tools, sampling settings; the same cache key as the other wrappers), then one append
// at its end with the stream_chunk events (one per stream part), the model_io response (usage
// with cached and reasoning tokens, cost from the price table, duration, the content as payload:
// the tool calls the model asked for are parts of it); a failed call records an error event.
// Tools: a tool_call event is a tool that ran. traceTools(tools) wraps the tools given to
// generateText / streamText so each execute the AI SDK makes records one (name, input, output
// or error, duration, the toolCallId the model asked with); a call that is never executed (no
// execute, refused by needsApproval, the step limit reached) stays in the model's response only.
// Replays: in a run made by RemoteRun.replayOf (or with a tracer's replay function), a call whose
// request the server's response cache knows is answered from it (a stream from its recorded
// parts) without calling the provider, and recorded with summary "replayed".
import { REPLAYED_SUMMARY } from "./client.js";
import { scopeTracer } from "./observe.js";
import { Tracer } from "./traced.js";

/** The AI SDK tools (a ToolSet: name -> tool({...})) with each execute recorded as a tool run
 * (see the module's note). Options: run (default: the current observed call; none: executes
 * pass through unrecorded), stepId. Tools without execute are left as they are. */
export function traceTools(tools, { run, stepId } = {}) {
  const out = {};
  for (const [name, t] of Object.entries(tools || {})) {
    if (typeof t?.execute !== "function") {
      out[name] = t;
      continue;
    }
    const execute = t.execute;
    out[name] = {
      ...t,
      execute(input, options) {
        const tracer = run ? new Tracer(run, { stepId }) : scopeTracer();
        const call = () => execute.call(t, input, options);
        if (!tracer) return call();
        return tracer.runTool({ toolCallId: options?.toolCallId, toolName: name, input }, call);
      },
    };
  }
  return out;
}

/** "openai.chat" -> "openai", "anthropic.messages" -> "anthropic" (the AI SDK's provider ids). */
export function providerName(provider) {
  return String(provider || "unknown").split(".")[0];
}

const num = (v) => (typeof v === "number" && Number.isFinite(v) ? v : undefined);

/** The protocol's model_io.usage from an AI SDK usage (LanguageModelV3's nested counts or V2's flat). */
export function usageOfAiSdk(usage) {
  if (!usage) return null;
  let input, output, cached, reasoning, total, cacheWrite;
  if (typeof usage.inputTokens === "object" || typeof usage.outputTokens === "object") {
    const i = usage.inputTokens || {};
    const o = usage.outputTokens || {};
    input = num(i.total) ?? (num(i.noCache) ?? 0) + (num(i.cacheRead) ?? 0) + (num(i.cacheWrite) ?? 0);
    output = num(o.total) ?? (num(o.text) ?? 0) + (num(o.reasoning) ?? 0);
    cached = num(i.cacheRead);
    cacheWrite = num(i.cacheWrite);
    reasoning = num(o.reasoning);
  } else {
    input = num(usage.inputTokens) ?? num(usage.promptTokens) ?? 0;
    output = num(usage.outputTokens) ?? num(usage.completionTokens) ?? 0;
    total = num(usage.totalTokens);
    cached = num(usage.cachedInputTokens);
    reasoning = num(usage.reasoningTokens);
  }
  const out = { inputTokens: input, outputTokens: output, totalTokens: total ?? input + output };
  if (cached !== undefined) out.cachedInputTokens = cached;
  if (reasoning !== undefined) out.reasoningTokens = reasoning;
  return { usage: out, cacheWrite: cacheWrite ?? 0 };
}

function textOf(parts) {
  return parts.filter((p) => p.type === "text").map((p) => p.text).join("");
}

function messagesOf(prompt) {
  const out = [];
  for (const m of prompt || []) {
    if (typeof m.content === "string") out.push({ role: m.role, content: m.content });
    else if (m.role === "tool") {
      for (const r of m.content) {
        if (r.type !== "tool-result") continue;
        const value = r.output?.value ?? r.output ?? r.result;
        out.push({ role: "tool", tool_call_id: r.toolCallId, content: typeof value === "string" ? value : JSON.stringify(value) });
      }
    } else if (m.role === "assistant") {
      const message = { role: "assistant", content: textOf(m.content) || null };
      const calls = m.content.filter((p) => p.type === "tool-call");
      if (calls.length) {
        message.tool_calls = calls.map((c) => ({
          id: c.toolCallId, type: "function",
          function: { name: c.toolName, arguments: typeof c.input === "string" ? c.input : JSON.stringify(c.input ?? c.args ?? {}) },
        }));
      }
      out.push(message);
    } else {
      const onlyText = m.content.every((p) => p.type === "text");
      out.push({
        role: m.role,
        content: onlyText ? textOf(m.content) : m.content.map((p) => (p.type === "text" ? { type: "text", text: p.text } : { type: p.type, mediaType: p.mediaType ?? p.mimeType })),
      });
    }
  }
  return out;
}

/** The recorded request of a call: an OpenAI-style wire body of the AI SDK's call options. */
export function requestOf(modelId, params) {
  const body = { model: modelId, messages: messagesOf(params.prompt) };
  const tools = (params.tools || []).filter((t) => t.type === "function");
  if (tools.length) {
    body.tools = tools.map((t) => ({
      type: "function",
      function: { name: t.name, ...(t.description ? { description: t.description } : {}), parameters: t.inputSchema ?? t.parameters ?? {} },
    }));
  }
  const settings = { temperature: "temperature", topP: "top_p", topK: "top_k", maxOutputTokens: "max_tokens", seed: "seed", stopSequences: "stop", presencePenalty: "presence_penalty", frequencyPenalty: "frequency_penalty" };
  for (const [from, to] of Object.entries(settings)) if (params[from] !== undefined && params[from] !== null) body[to] = params[from];
  const fmt = params.responseFormat;
  if (fmt?.type === "json") body.response_format = fmt.schema ? { type: "json_schema", json_schema: { name: fmt.name ?? "response", schema: fmt.schema } } : { type: "json_object" };
  if (params.toolChoice) body.tool_choice = params.toolChoice;
  return body;
}

/** Stream parts rebuilt from a recorded whole answer (when its parts were not recorded). */
function streamPartsOf(body) {
  const parts = [{ type: "stream-start", warnings: [] }];
  if (body.text) parts.push({ type: "text-start", id: "0" }, { type: "text-delta", id: "0", delta: body.text }, { type: "text-end", id: "0" });
  for (const part of body.content || []) if (part.type === "tool-call") parts.push(part);
  const reason = body.finishReason ?? "stop";
  parts.push({ type: "finish", finishReason: { unified: reason, raw: reason }, usage: body.usage });
  return parts;
}

function finishReason(reason) {
  return typeof reason === "object" && reason !== null ? reason.unified ?? reason.raw : reason;
}

/** A LanguageModel middleware for wrapLanguageModel that records calls (see the module's note).
 * Options: run (a RemoteRun; default: the current observed call), stepId, prices (a table;
 * default: the server's), recordChunks (default true). */
export function workbenchMiddleware({ run, stepId, prices, recordChunks = true } = {}) {
  const tracerOf = () => (run ? new Tracer(run, { stepId, prices, recordChunks, replay: run.replay }) : scopeTracer());

  /** The call's Call (null outside any run) and the recorded answer a replay found (or null). */
  async function begin(model, params) {
    const tracer = tracerOf();
    if (!tracer) return [null, null];
    if (!run) tracer.recordChunks = recordChunks;
    const provider = providerName(model.provider);
    const request = requestOf(model.modelId, params);
    const call = await tracer.begin(provider, model.modelId, request);
    const answer = tracer.replay ? await tracer.replay(provider, model.modelId, request) : null;
    // only answers this middleware recorded (content parts, the AI SDK's usage) can be replayed
    const body = answer?.body ?? answer;
    return [call, Array.isArray(body?.content) && body.usage ? answer : null];
  }

  function replayedResult(answer) {
    const body = answer.body ?? answer;
    const reason = body.finishReason ?? "stop";
    return { content: body.content, finishReason: { unified: reason, raw: reason }, usage: body.usage, warnings: [], response: { id: body.id, modelId: body.model } };
  }

  function replayedStream(answer) {
    const parts = answer.chunks?.length ? answer.chunks : streamPartsOf(answer.body ?? answer);
    return new ReadableStream({
      start(controller) {
        for (const part of parts) {
          // recorded as JSON: the response time comes back as text, the AI SDK wants a Date
          const revived = part.type === "response-metadata" && typeof part.timestamp === "string" ? { ...part, timestamp: new Date(part.timestamp) } : part;
          controller.enqueue(revived);
        }
        controller.close();
      },
    });
  }

  return {
    specificationVersion: "v3",
    middlewareVersion: "v2",

    async wrapGenerate({ doGenerate, params, model }) {
      const [call, answer] = await begin(model, params);
      if (!call) return doGenerate();
      let result;
      try {
        result = answer ? replayedResult(answer) : await doGenerate();
      } catch (err) {
        await call.fail(err);
        throw err;
      }
      const counted = usageOfAiSdk(result.usage);
      const response = {
        id: result.response?.id,
        model: result.response?.modelId ?? model.modelId,
        content: result.content,
        text: textOf(result.content || []),
        finishReason: finishReason(result.finishReason),
        usage: result.usage,
      };
      await call.finish(response, {
        summary: answer ? REPLAYED_SUMMARY : undefined,
        protocolUsage: counted?.usage ?? null,
        cacheWrite: { cacheWriteTokens: counted?.cacheWrite ?? 0 },
      });
      return result;
    },

    async wrapStream({ doStream, params, model }) {
      const [call, answer] = await begin(model, params);
      if (!call) return doStream();
      let result;
      try {
        result = answer ? { stream: replayedStream(answer) } : await doStream();
      } catch (err) {
        await call.fail(err);
        throw err;
      }
      let text = "";
      let usage = null;
      let reason;
      let failure = null;
      const meta = {};
      const content = [];
      const recording = new TransformStream({
        transform(part, controller) {
          if (part.type !== "raw") call.chunk(part);
          if (part.type === "text-delta") text += part.delta ?? part.textDelta ?? "";
          else if (part.type === "tool-call") content.push(part);
          else if (part.type === "response-metadata") Object.assign(meta, { id: part.id, modelId: part.modelId });
          else if (part.type === "finish") {
            usage = part.usage;
            reason = finishReason(part.finishReason);
          } else if (part.type === "error") failure = part.error;
          controller.enqueue(part);
        },
        async flush() {
          if (failure && !usage) {
            await call.fail(failure instanceof Error ? failure : new Error(String(failure?.message ?? failure)));
            return;
          }
          const counted = usageOfAiSdk(usage);
          const parts = text ? [{ type: "text", text }, ...content] : content;
          const response = { id: meta.id, model: meta.modelId ?? model.modelId, content: parts, text, finishReason: reason, usage };
          await call.finish(response, {
            summary: answer ? REPLAYED_SUMMARY : undefined,
            protocolUsage: counted?.usage ?? null,
            cacheWrite: { cacheWriteTokens: counted?.cacheWrite ?? 0 },
          });
        },
      });
      return { ...result, stream: result.stream.pipeThrough(recording) };
    },
  };
}
