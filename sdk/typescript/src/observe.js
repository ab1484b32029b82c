// Zero-config tracing: observe() for functions and drop-in wrappers of the official clients (a
// port of workbench_sdk.observe). The outermost observed call starts an external run (workflow:
// one step named after the function) and ends it, completed or failed; observed calls inside it
// (found through AsyncLocalStorage, so awaits and callbacks follow) are steps of that run.
// No static `node:` import: AsyncLocalStorage is the runtime's global one (Vercel Edge, Next.js
// edge routes), else node:async_hooks through process.getBuiltinModule (Node 20.16+, Cloudflare
// Workers with nodejs_compat or nodejs_als), else a dynamic import begun at load (older Node).
// Without any, asyncContext() is false: each observed call is a run of its own and the
// wrappers and the middleware without `run` pass through (see docs/engineers/typescript.md). Inputs
// and outputs are artifacts of the step (<step>.input: {args}, <step>.output). Calls through
// openai(...) / anthropic(...) inside an observed call are recorded on the current step (the
// tool calls a model asks for are part of its response); outside any they pass straight
// through. A tool the host runs is recorded by runTool(call, fn): one tool_call with name, args,
// result or error, duration and the model's tool call id; a call it does not run records none. Prices: the server's (GET /api/prices) unless
// configure({prices}) gives a table.
import { RemoteRun, WorkbenchClient, errorOf } from "./client.js";
import { Tracer, overlay, requestedCall, tracedAnthropic, tracedOpenAI } from "./traced.js";

export const OBSERVED_TYPE = "workbench.observed";
const config = { client: null, prices: null, replay: null };

/** Set the client (or its URL and token) and the price table used by observe and the wrappers. */
export function configure({ client, url, token, workspace, prices, replay } = {}) {
  if (!client && (url || token || workspace)) client = new WorkbenchClient({ baseUrl: url, token, workspace });
  if (client) config.client = client;
  if (prices !== undefined) config.prices = prices;
  if (replay !== undefined) config.replay = replay;
  return defaultClient();
}

// The no-context storage: nothing is current, run() just calls.
const NO_CONTEXT = Object.freeze({ getStore: () => undefined, run: (_store, fn) => fn() });

function runtimeAsyncLocalStorage() {
  const found = globalThis.AsyncLocalStorage;
  if (typeof found === "function") return found;
  const getBuiltin = globalThis.process?.getBuiltinModule;
  if (typeof getBuiltin !== "function") return null;
  try {
    return getBuiltin("node:async_hooks")?.AsyncLocalStorage ?? null;
  } catch {
    return null;
  }
}

const Found = runtimeAsyncLocalStorage();
let storage = Found ? new Found() : NO_CONTEXT;
// Node before 20.16 has no getBuiltinModule: import it, by a computed name so that bundlers for
// the edge leave it alone; observe() awaits this before its first call.
let loading =
  Found || typeof globalThis.process?.versions?.node !== "string"
    ? null
    : import(/* webpackIgnore: true */ ["node", "async_hooks"].join(":")).then(
        (mod) => {
          if (storage === NO_CONTEXT && typeof mod.AsyncLocalStorage === "function") storage = new mod.AsyncLocalStorage();
        },
        () => undefined,
      );

/** Whether observed calls follow awaits (an AsyncLocalStorage was found); false on a runtime
 * without one, where observe() nesting, the wrappers and withScope() record nothing ambient. */
export function asyncContext() {
  return storage !== NO_CONTEXT;
}

/** Resolves once the search for an AsyncLocalStorage is over (at once on most runtimes). */
export async function asyncContextReady() {
  if (loading) {
    await loading;
    loading = null;
  }
  return asyncContext();
}

export function defaultClient() {
  config.client ??= new WorkbenchClient();
  return config.client;
}

/** {run, stepId} of the current observed call (undefined outside any). */
export const currentScope = () => storage.getStore();
export const currentRun = () => storage.getStore()?.run;
export const currentStep = () => storage.getStore()?.stepId;

/** Run `fn` recording into `run` (and `stepId`): what adapters use around a node. */
export function withScope(run, stepId, fn) {
  return storage.run({ run, stepId }, fn);
}

/** The tracer of the current scope (or of `scope`), with the configured prices and replay. */
export function scopeTracer(scope = storage.getStore()) {
  if (!scope) return null;
  return new Tracer(scope.run, { stepId: scope.stepId, prices: config.prices, replay: scope.run.replay ?? config.replay });
}

export function jsonable(value) {
  const seen = new WeakSet();
  return JSON.parse(
    JSON.stringify(value ?? null, (_k, v) => {
      if (typeof v === "bigint") return v.toString();
      if (typeof v === "function" || typeof v === "symbol") return String(v);
      if (v && typeof v === "object") {
        if (seen.has(v)) return "[circular]";
        seen.add(v);
      }
      return v;
    }),
  );
}

/** Record calls of `fn` as a run, or as a step of the current run. Options: name (the step id,
 * default fn.name), title and tags of a run it starts, captureInput, captureOutput. The wrapper's
 * `lastRun` is the RemoteRun its latest outermost call started. */
export function observe(fn, { name, title, tags, captureInput = true, captureOutput = true } = {}) {
  const step = name || fn.name || "observed";
  const wrapper = async function (...args) {
    if (loading) await asyncContextReady();
    const parent = storage.getStore();
    let run;
    if (parent) run = parent.run;
    else {
      run = await RemoteRun.start(defaultClient(), {
        workflow: { id: step, version: 0, steps: [{ id: step }] },
        title: title || step,
        tags,
      });
      wrapper.lastRun = run;
    }
    const owns = !parent;
    let result;
    try {
      await run.startStep(step);
      if (captureInput) await run.artifact(`${step}.input`, { args: jsonable(args) }, { typeId: OBSERVED_TYPE, stepId: step });
      result = await storage.run({ run, stepId: step }, () => fn.apply(this, args));
    } catch (err) {
      const error = errorOf(err);
      await run.completeStep(step, { ok: false, error });
      if (owns) await run.fail(error.message, { code: error.code });
      throw err;
    }
    if (captureOutput && result !== undefined && result !== null) {
      await run.artifact(`${step}.output`, jsonable(result), { typeId: OBSERVED_TYPE, stepId: step });
    }
    await run.completeStep(step);
    if (owns) await run.finish();
    return result;
  };
  wrapper.lastRun = null;
  Object.defineProperty(wrapper, "name", { value: step });
  return wrapper;
}

/** Run one tool and record it into the current observed call (outside any, just run it):
 * `fn(args)` is awaited, its value the result, a throw the error (thrown on). `callOrName`: a tool
 * call the model asked for (OpenAI's, an Anthropic tool_use block, an AI SDK tool-call part) or
 * the tool's name with `{args}`. See Tracer.runTool. */
export function runTool(callOrName, fn, { args, callId } = {}) {
  const tracer = scopeTracer();
  if (tracer) return tracer.runTool(callOrName, fn, { args, callId });
  const asked = requestedCall(callOrName);
  return Promise.resolve().then(() => fn(args === undefined ? asked.args : args));
}

function scoped(endpoint, traced) {
  return overlay(endpoint, {
    create: (...args) => {
      const tracer = scopeTracer();
      return tracer ? traced(tracer).create(...args) : endpoint.create(...args);
    },
  });
}

/** An `openai` client whose chat.completions.create is recorded into the current observed call. */
export function openai(client) {
  const completions = scoped(client.chat.completions, (t) => tracedOpenAI(client, t).chat.completions);
  return overlay(client, { chat: overlay(client.chat, { completions }) });
}

/** An `@anthropic-ai/sdk` client whose messages.create is recorded into the current observed call. */
export function anthropic(client) {
  return overlay(client, { messages: scoped(client.messages, (t) => tracedAnthropic(client, t).messages) });
}
