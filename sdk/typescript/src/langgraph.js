// LangGraph.js adapter: a compiled graph's runs recorded, its interrupt() calls decided at gates
// (a port of workbench_sdk.langgraph).
//
//   import { WorkbenchGraph } from "@workbench/sdk/langgraph";
//   const graph = new WorkbenchGraph(builder.compile({ checkpointer: new MemorySaver() }), { workflowId: "articles" });
//   const result = await graph.invoke({ topic: "tides" });   // waits at each interrupt for a reviewer
//
// One external run per invoke; the workflow is the graph's nodes and those of its edges that do
// not close a cycle (a loop back stays a DAG on the wire, its passes are attempts). Every node
// execution is a step attempt (step_started ... step_completed; ok: false with the error when the
// node throws); model calls inside a node through openai(...) / anthropic(...) or the AI SDK
// middleware land on the node's step. Every interrupt(value) is a CHECKPOINT gate on the node
// (named after it; the second of one attempt <node>-2 ...), value its payload. When the reviewer
// decides, the graph resumes with Command({resume: decision}) ({decision, note, edits, by, at,
// payload}; several interrupts at once: a map by interrupt id). A rejection is the node's to
// handle: the graph's own edges route it (back into a loop, to another node, beside a parallel
// branch); the run says so (metadata "workbench.rejections": "routed"). A resumed node is the
// same attempt. The graph needs a checkpointer, as for any interrupt().
// Tools: a tool the graph runs (a ToolNode, any LangChain tool invoked inside a node) is recorded
// from LangChain's tool callbacks as one tool_call on the node's step (name, input, output or
// error, duration, the tool call id the model asked with); the tool calls a model only asks for
// stay in its recorded response, so a call the graph never runs records no tool_call.
import { BaseCallbackHandler } from "@langchain/core/callbacks/base";
import { RunnableLambda } from "@langchain/core/runnables";
import { Command, isGraphBubbleUp, isGraphInterrupt } from "@langchain/langgraph";
import { RemoteRun, errorOf } from "./client.js";
import { configure, currentRun, defaultClient, jsonable, withScope } from "./observe.js";
import { Tracer, toolRunEvents } from "./traced.js";

const GRAPH_ENDS = new Set(["__start__", "__end__"]);
export const REJECTIONS_METADATA_KEY = "workbench.rejections";

function reaches(successors, start, goal) {
  const todo = [start];
  const seen = new Set();
  while (todo.length) {
    const node = todo.pop();
    if (node === goal) return true;
    if (seen.has(node)) continue;
    seen.add(node);
    todo.push(...(successors.get(node) || []));
  }
  return false;
}

/** The protocol workflow of a compiled graph: its nodes as steps, its edges minus any that would
 * close a cycle (loops show as attempts instead). */
export async function workflowOf(graph, workflowId) {
  const drawn = await graph.getGraphAsync();
  const steps = Object.keys(drawn.nodes).filter((n) => !GRAPH_ENDS.has(n));
  const successors = new Map(steps.map((s) => [s, new Set()]));
  const edges = [];
  // fixed edges first: a loop is most often closed by a conditional edge back to an earlier node
  const sorted = [...drawn.edges].sort((a, b) => Number(!!a.conditional) - Number(!!b.conditional));
  for (const { source: a, target: b } of sorted) {
    if (!successors.has(a) || !successors.has(b) || a === b || successors.get(a).has(b)) continue;
    if (reaches(successors, b, a)) continue;
    successors.get(a).add(b);
    edges.push({ id: `e${edges.length + 1}`, from: a, to: b });
  }
  const id = workflowId || graph.name || "langgraph";
  return { id, version: 0, title: workflowId || graph.name || "LangGraph graph", steps: steps.map((s) => ({ id: s, title: s })), edges };
}

function reasonOf(value) {
  if (typeof value === "string") return value.slice(0, 500);
  if (value && typeof value === "object") {
    for (const key of ["question", "reason", "message"]) if (typeof value[key] === "string") return value[key].slice(0, 500);
  }
  return undefined;
}

function parsed(input) {
  if (typeof input !== "string") return jsonable(input);
  try {
    return JSON.parse(input);
  } catch {
    return input;
  }
}

/** A ToolMessage's content (what the model is given back), else the output as JSON. */
function outputOf(output) {
  if (output && typeof output === "object" && "content" in output && typeof output._getType === "function") {
    return parsed(output.content);
  }
  return jsonable(output);
}

/** LangChain tool callbacks -> tool runs of `run` (awaited, so a run ends after its tools). */
export class ToolRecorder extends BaseCallbackHandler {
  name = "workbench-tools";

  constructor(run) {
    super({ _awaitHandler: true });
    this.run = run;
    this.open = new Map();
  }

  handleToolStart(tool, input, runId, _parentRunId, _tags, metadata, runName, toolCallId) {
    const name = runName || tool?.name || tool?.id?.at?.(-1) || "tool";
    this.open.set(runId, { name, args: parsed(input), callId: toolCallId, stepId: metadata?.langgraph_node, started: performance.now() });
  }

  async handleToolEnd(output, runId) {
    const open = this.open.get(runId);
    if (!open) return;
    this.open.delete(runId);
    await this.#record(open, { result: outputOf(output), hasResult: true });
  }

  async handleToolError(err, runId) {
    const open = this.open.get(runId);
    if (!open) return;
    this.open.delete(runId);
    await this.#record(open, { error: err });
  }

  async #record({ name, args, callId, stepId, started }, outcome) {
    const tracer = new Tracer(this.run, { stepId });
    await this.run.record(toolRunEvents(tracer, name, { args, callId, durationMs: performance.now() - started, ...outcome }));
  }
}

/** A compiled LangGraph.js graph whose invoke records a run and waits at its interrupts. */
export class WorkbenchGraph {
  constructor(graph, { client, workflowId, title, tags, prices, gateTimeout } = {}) {
    Object.assign(this, { graph, client, workflowId, title, tags, prices, gateTimeout });
    this.sessions = new Map();
    this.lastRun = null;
    for (const [name, node] of Object.entries(graph.nodes)) {
      if (GRAPH_ENDS.has(name) || node.bound?.workbenchNode) continue;
      const bound = node.bound;
      const wrapped = RunnableLambda.from((input, config) => this.#node(name, bound, input, config));
      wrapped.workbenchNode = true;
      wrapped.name = name;
      node.bound = wrapped;
    }
  }

  async #node(name, bound, input, config) {
    const run = currentRun();
    const session = run ? this.sessions.get(run.runId) : undefined;
    if (!run || !session) return bound.invoke(input, config); // not under invoke: unrecorded
    let asked = session.suspended.get(name);
    session.suspended.delete(name);
    if (asked === undefined) {
      await run.startStep(name); // a resumed node is the same attempt, not a new one
      asked = 0;
    }
    let result;
    try {
      result = await withScope(run, name, () => bound.invoke(input, config));
    } catch (err) {
      if (isGraphInterrupt(err)) {
        for (const item of err.interrupts || []) {
          asked += 1;
          const gateName = asked === 1 ? name : `${name}-${asked}`;
          const value = jsonable(item.value);
          const handle = await run.gate(name, "CHECKPOINT", { name: gateName, reason: reasonOf(value), payload: value }).handle();
          session.pending.push([item.id ?? gateName, handle]);
        }
        session.suspended.set(name, asked);
      } else if (isGraphBubbleUp(err)) {
        await run.completeStep(name); // a Command to a parent graph is an end
      } else {
        await run.completeStep(name, { ok: false, error: errorOf(err) });
      }
      throw err;
    }
    await run.completeStep(name);
    return result;
  }

  async #start() {
    if (this.client) configure({ client: this.client });
    const client = this.client || defaultClient();
    if (this.prices) configure({ prices: this.prices });
    const workflow = await workflowOf(this.graph, this.workflowId);
    const run = await RemoteRun.start(client, {
      workflow,
      title: this.title || workflow.title,
      tags: this.tags,
      // the graph routes a rejection itself: the node that asked receives it, its end closes it
      metadata: { [REJECTIONS_METADATA_KEY]: "routed" },
    });
    this.sessions.set(run.runId, { suspended: new Map(), pending: [] });
    this.lastRun = run;
    return run;
  }

  async #resume(session) {
    if (!session.pending.length) return null;
    const pending = session.pending.splice(0);
    const decisions = await Promise.all(pending.map(([, handle]) => handle.wait({ timeout: this.gateTimeout })));
    if (decisions.length === 1) return new Command({ resume: decisions[0] });
    return new Command({ resume: Object.fromEntries(pending.map(([id], i) => [id, decisions[i]])) });
  }

  /** Run the graph to its end, waiting for a reviewer at every interrupt; the final state. */
  async invoke(input, config = {}) {
    const run = await this.#start();
    const session = this.sessions.get(run.runId);
    const callbacks = Array.isArray(config.callbacks) || !config.callbacks ? [...(config.callbacks || []), new ToolRecorder(run)] : config.callbacks;
    const merged = { ...config, callbacks, configurable: { thread_id: `wb-${crypto.randomUUID()}`, ...(config.configurable || {}) } };
    let result;
    try {
      await withScope(run, undefined, async () => {
        let value = input;
        for (;;) {
          result = await this.graph.invoke(value, merged);
          value = await this.#resume(session);
          if (value === null) break;
        }
      });
    } catch (err) {
      const error = errorOf(err);
      await run.fail(error.message, { code: error.code });
      throw err;
    } finally {
      this.sessions.delete(run.runId);
    }
    await run.finish();
    return result;
  }
}
