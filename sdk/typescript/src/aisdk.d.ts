import type { RemoteRun } from "./client.js";
import type { PriceTable, Usage } from "./pricing.js";

export interface WorkbenchMiddlewareOptions {
  /** The run to record into (default: the current observed call; none: calls pass through). */
  run?: RemoteRun; stepId?: string; prices?: PriceTable; recordChunks?: boolean;
}
/** A LanguageModelV3 (and V2) middleware for the AI SDK's wrapLanguageModel. */
export interface WorkbenchMiddleware {
  specificationVersion: "v3";
  middlewareVersion: "v2";
  wrapGenerate(options: { doGenerate: () => PromiseLike<any>; doStream: () => PromiseLike<any>; params: any; model: any }): Promise<any>;
  wrapStream(options: { doGenerate: () => PromiseLike<any>; doStream: () => PromiseLike<any>; params: any; model: any }): Promise<any>;
}
export declare function workbenchMiddleware(options?: WorkbenchMiddlewareOptions): WorkbenchMiddleware;
export declare function providerName(provider: string | undefined): string;
export declare function usageOfAiSdk(usage: unknown): { usage: Usage; cacheWrite: number } | null;
/** The recorded request: an OpenAI-style wire body of the AI SDK's call options. */
export declare function requestOf(modelId: string, params: unknown): Record<string, unknown>;
/** The AI SDK tools with each execute recorded as a tool run (one tool_call: name, input, output or error, duration, toolCallId). */
export declare function traceTools<T extends Record<string, any>>(tools: T, options?: { run?: RemoteRun; stepId?: string }): T;
