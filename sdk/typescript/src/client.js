// The REST client, runs and gates: a port of workbench_sdk.client / run (same routes, same
// event shapes). Only the platform's fetch and crypto.randomUUID are used.
import { llmCacheKey, requestFromWire } from "./cachekey.js";

export const ENV_URL = "WORKBENCH_URL";
export const ENV_TOKEN = "WORKBENCH_TOKEN";
export const ENV_WORKSPACE = "WORKBENCH_WORKSPACE";
export const DRIVER_METADATA_KEY = "workbench.driver";
export const EXTERNAL_DRIVER = "external";
export const GATE_PAYLOAD_TYPE = "workbench.gate-payload";
export const GATES = ["PAUSE_BEFORE", "PAUSE_AFTER", "CHECKPOINT"];
export const LONG_POLL_SECONDS = 25;
export const PRICES_TTL_SECONDS = 300;
/** The summary of a model answer replayed from the response cache (the server's REPLAYED_SUMMARY). */
export const REPLAYED_SUMMARY = "replayed";
const WRITE_METHODS = new Set(["POST", "PUT", "PATCH", "DELETE"]);

export class WorkbenchAPIError extends Error {
  constructor(status, code, message) {
    super(`${status} ${code}: ${message}`);
    this.name = "WorkbenchAPIError";
    this.status = status;
    this.code = code;
  }
}
export class GateTimeout extends Error {}
export class GateClosed extends Error {}

const env = (name) => (typeof process !== "undefined" ? process.env[name] : undefined);
const dropNone = (o) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined && v !== null));
const q = encodeURIComponent;
const sleep = (s) => new Promise((r) => setTimeout(r, s * 1000));

export function shouldRetry(status) {
  return status === 408 || status === 429 || status >= 500;
}

/** `2025-01-31T12:00:00.123Z`, as the protocol writes times. */
export const nowIso = () => new Date().toISOString();

/** A protocol trace event with a fresh id and the current time. */
export function makeEvent(runId, type, fields = {}) {
  return { id: `evt_${crypto.randomUUID()}`, runId, ts: nowIso(), type, ...dropNone(fields) };
}

export function gatePayloadKey(stepId, gate, checkpoint) {
  return `gate:${stepId}:${checkpoint || gate}`;
}

export class WorkbenchClient {
  constructor({ baseUrl, token, workspace, timeout = 15, retries = 3, backoff = 0.25, maxBackoff = 4, headers } = {}) {
    baseUrl = baseUrl || env(ENV_URL);
    if (!baseUrl) throw new Error(`WorkbenchClient needs a baseUrl (or the ${ENV_URL} environment variable)`);
    token = token ?? env(ENV_TOKEN);
    workspace = workspace ?? env(ENV_WORKSPACE);
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.timeout = timeout;
    this.retries = retries;
    this.backoff = backoff;
    this.maxBackoff = maxBackoff;
    this.headers = { Accept: "application/json", "User-Agent": "workbench-client-js/0" };
    if (token) this.headers.Authorization = `Bearer ${token}`;
    if (workspace) this.headers["X-Workspace"] = workspace;
    Object.assign(this.headers, headers || {});
  }

  /** Send a request with retries (408/429/5xx, network errors); the parsed JSON body. */
  async request(method, path, { json, params, idempotencyKey, timeout } = {}) {
    method = method.toUpperCase();
    const headers = { ...this.headers };
    if (WRITE_METHODS.has(method)) headers["Idempotency-Key"] = idempotencyKey || crypto.randomUUID();
    if (json !== undefined) headers["Content-Type"] = "application/json";
    const url = new URL(this.baseUrl + "/api" + path);
    for (const [k, v] of Object.entries(dropNone(params || {}))) url.searchParams.set(k, String(v));
    for (let attempt = 0; ; attempt++) {
      let response;
      try {
        response = await fetch(url, {
          method,
          headers,
          body: json === undefined ? undefined : JSON.stringify(json),
          signal: AbortSignal.timeout(Math.ceil((timeout ?? this.timeout) * 1000)),
        });
      } catch (err) {
        if (attempt >= this.retries) throw err;
      }
      if (response) {
        const text = await response.text();
        if (response.ok) return text ? JSON.parse(text) : null;
        if (!shouldRetry(response.status) || attempt >= this.retries) throw apiError(response.status, text);
      }
      await sleep(Math.min(this.maxBackoff, this.backoff * 2 ** attempt));
    }
  }

  health() { return this.request("GET", "/health"); }
  listRuns({ limit = 100, status, workflowId } = {}) {
    return this.request("GET", "/runs", { params: { limit, status, workflow_id: workflowId } });
  }
  getRun(runId) { return this.request("GET", `/runs/${q(runId)}`); }

  /** The workspace's effective price table (GET /api/prices): {model: row}, cached 5 minutes per
   * set of models asked ("provider:model" or "model" asks for rows the workspace has not listed). */
  async prices(models = [], { refresh = false } = {}) {
    const key = [...models].sort().join("\n");
    this._prices ??= new Map();
    const hit = this._prices.get(key);
    if (hit && !refresh && performance.now() - hit.at < PRICES_TTL_SECONDS * 1000) return hit.table;
    const url = models.length ? "/prices?" + models.map((m) => `model=${q(m)}`).join("&") : "/prices";
    const table = (await this.request("GET", url)).prices;
    this._prices.set(key, { at: performance.now(), table });
    return table;
  }

  /** The workspace's cached answer to this provider request body (null on a miss): the key is
   * computed here exactly as the server computes it from a recorded model_io request. */
  async cachedResponse(provider, model, body, { preferRunId } = {}) {
    const key = llmCacheKey(requestFromWire(provider, model, body));
    try {
      return await this.request("GET", `/cache/${key}`, { params: { preferRunId } });
    } catch (err) {
      if (err instanceof WorkbenchAPIError && err.status === 404) return null;
      throw err;
    }
  }

  /** A `replay` function for a Tracer: (provider, model, body) -> {body, chunks} or null. */
  replayFn({ preferRunId } = {}) {
    return async (provider, model, body) => {
      const found = await this.cachedResponse(provider, model, body, { preferRunId });
      const payload = found?.response?.payload;
      if (!payload || typeof payload !== "object" || Array.isArray(payload)) return null;
      const chunks = (found.chunks || []).map((c) => c.payload).filter((p) => p && typeof p === "object");
      return { body: payload, chunks };
    };
  }

  /** POST /runs/{id}:fork: {runId, sourceRunId, fromSeq, mode, status}. */
  fork(runId, { mode = "replay", fromSeq, overlay } = {}) {
    return this.request("POST", `/runs/${q(runId)}:fork`, { json: dropNone({ mode, fromSeq, runOptionsOverlay: overlay }) });
  }

  /** Before a model call (POST /runs/{id}/budget/check): {allowed, gate?, message?}. */
  checkBudget(runId, stepId) {
    return this.request("POST", `/runs/${q(runId)}/budget/check`, { json: dropNone({ stepId }) });
  }
  startRun({ workflow, runId, title, subject, metadata, tags, context }) {
    return this.request("POST", "/runs", { json: dropNone({ workflow, runId, title, subject, metadata, tags, context }) });
  }
  appendEvents(runId, events) { return this.request("POST", `/runs/${q(runId)}/events`, { json: { events } }); }
  events(runId, { afterSeq = 0, limit = 1000 } = {}) {
    return this.request("GET", `/runs/${q(runId)}/events`, { params: { after_seq: afterSeq, limit } });
  }
  writeArtifact(runId, { key, typeId, data, artifactIdempotencyKey, stepId }) {
    const body = dropNone({ artifactKey: key, typeId, idempotencyKey: artifactIdempotencyKey, stepId });
    body.data = data;
    return this.request("POST", `/runs/${q(runId)}/artifacts`, { json: body });
  }
  resolveGate(runId, { stepId, gate, decision, note, checkpoint, edit }) {
    return this.request("POST", `/runs/${q(runId)}/gates/resolve`, {
      json: dropNone({ stepId, gate, decision, note, checkpoint, edit }),
    });
  }
  /** One long poll (GET /runs/{id}/gates/wait): status decided | closed | pending. */
  waitForGate(runId, { stepId, gate, afterSeq, checkpoint, timeout = 25 }) {
    const t = Math.max(0, Math.min(timeout, 60));
    return this.request("GET", `/runs/${q(runId)}/gates/wait`, {
      params: { stepId, gate, checkpoint, afterSeq, timeout: t },
      timeout: t + 15,
    });
  }
}

function apiError(status, text) {
  let body = {};
  try { body = JSON.parse(text); } catch { /* not JSON */ }
  const err = body && typeof body.error === "object" ? body.error : body;
  if (err && err.code) return new WorkbenchAPIError(status, String(err.code), String(err.message ?? err.error ?? ""));
  return new WorkbenchAPIError(status, "HTTP_ERROR", text.slice(0, 500));
}

export class GateHandle {
  constructor(run, { stepId, gate, checkpoint, requestSeq, payload }) {
    Object.assign(this, { run, stepId, gate, checkpoint, requestSeq, payload });
  }

  /** One long poll of at most `timeout` seconds: the decision, or null while pending. */
  async poll(timeout = 0) {
    const answer = await this.run.client.waitForGate(this.run.runId, {
      stepId: this.stepId, gate: this.gate, checkpoint: this.checkpoint, afterSeq: this.requestSeq, timeout,
    });
    if (answer.status === "decided") return this.#decision(answer);
    if (answer.status === "closed") throw new GateClosed(answer.note || "the run ended before the gate was decided");
    return null;
  }

  /** Wait until a reviewer decides (GateTimeout after `timeout` seconds; undefined: no limit). */
  async wait({ timeout } = {}) {
    const deadline = timeout === undefined ? undefined : performance.now() / 1000 + timeout;
    for (;;) {
      const left = deadline === undefined ? LONG_POLL_SECONDS : Math.min(LONG_POLL_SECONDS, deadline - performance.now() / 1000);
      if (left <= 0) throw new GateTimeout(`no decision on gate ${this.gate} of ${this.stepId} within ${timeout} s`);
      const decision = await this.poll(left);
      if (decision) return decision;
    }
  }

  #decision(answer) {
    const edits = [...(answer.edits || [])];
    let payload = this.payload;
    const key = gatePayloadKey(this.stepId, this.gate, this.checkpoint);
    for (const edit of edits) if (edit.artifactKey === key) payload = edit.data;
    return { decision: answer.decision, note: answer.note ?? null, edits, by: answer.by ?? null, at: answer.at ?? null, payload };
  }
}

export class RemoteRun {
  constructor(client, runId) {
    this.client = client;
    this.runId = runId;
  }

  /** Start an external run of `workflow`. */
  static async start(client, { workflow, title, tags, metadata, subject, runId }) {
    const meta = { ...(metadata || {}), [DRIVER_METADATA_KEY]: EXTERNAL_DRIVER };
    const started = await client.startRun({ workflow, runId, title, tags, metadata: meta, subject });
    return new RemoteRun(client, started.runId);
  }

  /** Fork `sourceRunId` as a replay this host re-executes: model calls through the traced
   * clients (inside withScope(replay, ...)) answer from the server's response cache, the
   * source's answers preferred, recorded as "replayed". Then finish() it. */
  static async replayOf(client, sourceRunId, { fromSeq = 0 } = {}) {
    const fork = await client.fork(sourceRunId, { mode: "replay", fromSeq });
    const run = new RemoteRun(client, fork.runId);
    run.replay = client.replayFn({ preferRunId: sourceRunId });
    return run;
  }

  record(events) { return this.client.appendEvents(this.runId, events); }
  event(type, fields = {}) { return this.record([makeEvent(this.runId, type, fields)]); }
  startStep(stepId) { return this.event("step_started", { stepId }); }
  completeStep(stepId, { ok = true, error } = {}) {
    return this.event("step_completed", { stepId, ok, error: ok ? undefined : error || { message: "step failed" } });
  }

  /** One attempt of `stepId` around `fn(run)`: completed when it resolves, failed when it throws. */
  async step(stepId, fn) {
    await this.startStep(stepId);
    let result;
    try {
      result = await fn(this);
    } catch (err) {
      await this.completeStep(stepId, { ok: false, error: errorOf(err) });
      throw err;
    }
    await this.completeStep(stepId);
    return result;
  }

  artifact(key, data, { typeId = "json", stepId } = {}) {
    return this.client.writeArtifact(this.runId, { key, typeId, data, stepId });
  }

  /** Ask a reviewer (human_gate_requested); `await run.gate(...).wait()` for the decision. */
  gate(stepId, kind = "CHECKPOINT", { name, reason, payload } = {}) {
    if (!GATES.includes(kind)) throw new Error(`kind must be one of ${GATES.join(", ")}`);
    if (name !== undefined && kind !== "CHECKPOINT") throw new Error("only CHECKPOINT gates are named");
    const checkpoint = kind === "CHECKPOINT" ? name || stepId : undefined;
    const requested = (async () => {
      if (payload !== undefined && payload !== null) {
        await this.artifact(gatePayloadKey(stepId, kind, checkpoint), payload, { typeId: GATE_PAYLOAD_TYPE, stepId });
      }
      const fields = { stepId, gate: kind, reason };
      if (checkpoint) fields.correlationId = `checkpoint:${checkpoint}`;
      const answer = await this.event("human_gate_requested", fields);
      return new GateHandle(this, { stepId, gate: kind, checkpoint, requestSeq: answer.seqs.at(-1), payload });
    })();
    return {
      /** The handle once the gate is recorded. */
      handle: () => requested,
      wait: async (opts) => (await requested).wait(opts),
      then: (ok, fail) => requested.then(ok, fail),
    };
  }

  finish(status = "completed", { reason } = {}) { return this.event("run_status_changed", { status, reason }); }
  fail(reason, { code } = {}) {
    return this.record([
      makeEvent(this.runId, "error", { message: reason, fatal: true, code }),
      makeEvent(this.runId, "run_status_changed", { status: "failed", reason }),
    ]);
  }
}

/** A protocol error object for an exception: {message, code}. */
export function errorOf(err) {
  const name = err?.name || "Error";
  return { message: `${name}: ${err?.message ?? err}`.slice(0, 2000), code: name };
}
