export declare class WorkbenchAPIError extends Error { status: number; code: string; }
export declare class GateTimeout extends Error {}
export declare class GateClosed extends Error {}
export declare const REPLAYED_SUMMARY: string;
export declare const PRICES_TTL_SECONDS: number;
export type GateKind = "PAUSE_BEFORE" | "PAUSE_AFTER" | "CHECKPOINT";
export interface Decision {
  decision: "approved" | "rejected" | "edited" | string;
  note: string | null;
  edits: Record<string, unknown>[];
  by: string | null;
  at: string | null;
  payload: unknown;
}
export interface ClientOptions {
  baseUrl?: string; token?: string; workspace?: string; timeout?: number; retries?: number;
  backoff?: number; maxBackoff?: number; headers?: Record<string, string>;
}
type Json = any;
export declare function makeEvent(runId: string, type: string, fields?: Record<string, unknown>): Record<string, unknown>;
export declare function gatePayloadKey(stepId: string, gate: string, checkpoint?: string): string;
export declare function errorOf(err: unknown): { message: string; code: string };
export declare class WorkbenchClient {
  constructor(options?: ClientOptions);
  request(method: string, path: string, opts?: { json?: unknown; params?: Record<string, unknown>; idempotencyKey?: string; timeout?: number }): Promise<Json>;
  health(): Promise<Json>;
  listRuns(o?: { limit?: number }): Promise<Json[]>;
  getRun(runId: string): Promise<Json>;
  /** GET /api/prices: {model: row}, cached 5 minutes per set of models asked. */
  prices(models?: string[], o?: { refresh?: boolean }): Promise<Record<string, import("./pricing.js").PriceRow>>;
  cachedResponse(provider: string, model: string | null | undefined, body: Record<string, unknown>, o?: { preferRunId?: string }): Promise<Json | null>;
  replayFn(o?: { preferRunId?: string }): import("./traced.js").ReplayFn;
  fork(runId: string, o?: { mode?: "replay" | "branch"; fromSeq?: number; overlay?: Record<string, unknown> }): Promise<Json>;
  checkBudget(runId: string, stepId?: string): Promise<Json>;
  startRun(body: { workflow: Record<string, unknown>; runId?: string; title?: string; subject?: unknown; metadata?: Record<string, unknown>; tags?: string[]; context?: unknown }): Promise<Json>;
  appendEvents(runId: string, events: Record<string, unknown>[]): Promise<{ seqs: number[]; lastSeq: number }>;
  events(runId: string, opts?: { afterSeq?: number; limit?: number }): Promise<Json>;
  writeArtifact(runId: string, a: { key: string; typeId: string; data: unknown; artifactIdempotencyKey?: string; stepId?: string }): Promise<Json>;
  resolveGate(runId: string, r: { stepId: string; gate: GateKind; decision: string; note?: string; checkpoint?: string; edit?: unknown }): Promise<Json>;
  waitForGate(runId: string, w: { stepId: string; gate: GateKind; afterSeq: number; checkpoint?: string; timeout?: number }): Promise<Json>;
}
export declare class GateHandle {
  run: RemoteRun; stepId: string; gate: GateKind; checkpoint?: string; requestSeq: number; payload: unknown;
  poll(timeout?: number): Promise<Decision | null>;
  wait(opts?: { timeout?: number }): Promise<Decision>;
}
export interface PendingGate extends PromiseLike<GateHandle> {
  handle(): Promise<GateHandle>;
  wait(opts?: { timeout?: number }): Promise<Decision>;
}
export declare class RemoteRun {
  constructor(client: WorkbenchClient, runId: string);
  client: WorkbenchClient; runId: string; replay?: import("./traced.js").ReplayFn;
  /** Fork a run as a replay this host re-executes (model calls answered from the response cache). */
  static replayOf(client: WorkbenchClient, sourceRunId: string, o?: { fromSeq?: number }): Promise<RemoteRun>;
  static start(client: WorkbenchClient, o: { workflow: Record<string, unknown>; title?: string; tags?: string[]; metadata?: Record<string, unknown>; subject?: unknown; runId?: string }): Promise<RemoteRun>;
  record(events: Record<string, unknown>[]): Promise<{ seqs: number[]; lastSeq: number }>;
  event(type: string, fields?: Record<string, unknown>): Promise<{ seqs: number[]; lastSeq: number }>;
  startStep(stepId: string): Promise<Json>;
  completeStep(stepId: string, o?: { ok?: boolean; error?: Record<string, unknown> }): Promise<Json>;
  step<T>(stepId: string, fn: (run: RemoteRun) => Promise<T> | T): Promise<T>;
  artifact(key: string, data: unknown, o?: { typeId?: string; stepId?: string }): Promise<Json>;
  gate(stepId: string, kind?: GateKind, o?: { name?: string; reason?: string; payload?: unknown }): PendingGate;
  finish(status?: string, o?: { reason?: string }): Promise<Json>;
  fail(reason: string, o?: { code?: string }): Promise<Json>;
}
