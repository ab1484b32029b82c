import type { RemoteRun, WorkbenchClient } from "./client.js";
import type { PriceTable } from "./pricing.js";
import type { ReplayFn, RequestedCallLike, Tracer } from "./traced.js";

export declare const OBSERVED_TYPE: string;
export interface Scope { run: RemoteRun; stepId?: string }
export declare function configure(o?: { client?: WorkbenchClient; url?: string; token?: string; workspace?: string; prices?: PriceTable | null; replay?: ReplayFn | null }): WorkbenchClient;
export declare function defaultClient(): WorkbenchClient;
/** Whether observed calls follow awaits (an AsyncLocalStorage was found on this runtime). */
export declare function asyncContext(): boolean;
/** Resolves, with asyncContext(), once the search for an AsyncLocalStorage is over. */
export declare function asyncContextReady(): Promise<boolean>;
export declare function currentScope(): Scope | undefined;
export declare function currentRun(): RemoteRun | undefined;
export declare function currentStep(): string | undefined;
/** Run `fn` recording into `run` (and `stepId`). */
export declare function withScope<T>(run: RemoteRun, stepId: string | undefined, fn: () => T): T;
export declare function scopeTracer(scope?: Scope): Tracer | null;
export declare function jsonable(value: unknown): unknown;
export interface ObserveOptions { name?: string; title?: string; tags?: string[]; captureInput?: boolean; captureOutput?: boolean }
export type Observed<A extends unknown[], R> = ((...args: A) => Promise<Awaited<R>>) & { lastRun: RemoteRun | null };
/** Record calls of `fn` as a run, or as a step of the current run. */
export declare function observe<A extends unknown[], R>(fn: (...args: A) => R, options?: ObserveOptions): Observed<A, R>;
/** An `openai` client recorded into the current observed call (passes through outside any). */
export declare function openai<T>(client: T): T;
/** An `@anthropic-ai/sdk` client recorded into the current observed call (passes through outside any). */
export declare function anthropic<T>(client: T): T;
/** Run one tool and record it into the current observed call (outside any, just run it). */
export declare function runTool<R>(callOrName: RequestedCallLike | string, fn: (args: any) => R | Promise<R>, o?: { args?: unknown; callId?: string }): Promise<Awaited<R>>;
