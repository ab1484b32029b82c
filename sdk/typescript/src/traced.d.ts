import type { PriceRow, PriceTable, Usage } from "./pricing.js";
import type { RemoteRun } from "./client.js";

/** A recorded answer: the provider's response body and its stream events (empty when it came whole). */
export interface RecordedAnswer { body: Record<string, unknown>; chunks?: Record<string, unknown>[] }
export type ReplayFn = (provider: string, model: string, body: Record<string, unknown>) => Promise<RecordedAnswer | null> | RecordedAnswer | null;
/** Where a tracer records: a RemoteRun, or any object with runId and record(events). */
export interface RunLike { runId: string; record(events: Record<string, unknown>[]): Promise<unknown>; client?: RemoteRun["client"]; replay?: ReplayFn }
export declare class BudgetExceeded extends Error {}
export declare function usageOf(provider: string, usage: unknown): Usage | null;
export interface TracerOptions { stepId?: string; prices?: PriceTable | null; replay?: ReplayFn | null; recordChunks?: boolean; budget?: boolean }
export declare class Tracer {
  constructor(run: RunLike, options?: TracerOptions);
  run: RunLike; stepId?: string; prices: PriceTable | null; replay: ReplayFn | null; recordChunks: boolean; budget: boolean;
  event(type: string, fields?: Record<string, unknown>): Record<string, unknown>;
  price(provider: string, ...models: (string | null | undefined)[]): Promise<PriceRow | null>;
  checkBudget(): Promise<void>;
  begin(provider: string, model: string, request: unknown): Promise<Call>;
  /** Record a tool the host ran (name, args, result or error, duration, the model's tool call id). */
  tool(name: string, o?: { args?: unknown; result?: unknown; error?: unknown; callId?: string; durationMs?: number; correlationId?: string }): Promise<unknown>;
  /** Run one tool (`fn(args)`) and record it: its value is the result, a throw the error (thrown on). */
  runTool<R>(callOrName: RequestedCallLike | string, fn: (args: any) => R | Promise<R>, o?: { args?: unknown; callId?: string }): Promise<Awaited<R>>;
}
/** A tool call a model asked for: OpenAI's, an OpenAI Responses function_call, an Anthropic tool_use block, an AI SDK tool-call part. */
export type RequestedCallLike = Record<string, unknown>;
export interface RequestedCall { callId?: string; name: string; args?: unknown }
export declare function requestedCall(call: RequestedCallLike | string): RequestedCall;
/** The events of one tool run that ended now: span_started, tool_call, span_ended (one correlation id). */
export declare function toolRunEvents(tracer: Tracer, name: string, o?: { args?: unknown; result?: unknown; hasResult?: boolean; error?: unknown; callId?: string; durationMs?: number }): Record<string, unknown>[];
export declare class Call {
  tracer: Tracer; provider: string; model: string; correlationId: string; done: boolean;
  chunk(payload: unknown): void;
  finish(response: unknown, o?: { usage?: unknown; protocolUsage?: Usage | null; summary?: string; cacheWrite?: { cacheWriteTokens?: number; cacheWrite1hTokens?: number } }): Promise<void>;
  fail(err: unknown): Promise<void>;
}
/** `target` with some properties replaced (the rest is the original's, methods bound). */
export declare function overlay<T extends object>(target: T, overrides: Record<string | symbol, unknown>): T;
/** An `openai` client whose chat.completions.create is recorded (streams as async iterables). */
export declare function tracedOpenAI<T>(client: T, tracer: Tracer): T;
/** An `@anthropic-ai/sdk` client whose messages.create is recorded (streams as async iterables). */
export declare function tracedAnthropic<T>(client: T, tracer: Tracer): T;
export declare const PROVIDERS: Record<"openai" | "anthropic", unknown>;
