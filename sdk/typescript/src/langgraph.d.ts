import type { RemoteRun, WorkbenchClient } from "./client.js";
import type { PriceTable } from "./pricing.js";

export declare const REJECTIONS_METADATA_KEY: string;
export interface Workflow { id: string; version: number; title: string; steps: { id: string; title: string }[]; edges: { id: string; from: string; to: string }[] }
/** The protocol workflow of a compiled graph (its nodes; its edges less those closing a cycle). */
export declare function workflowOf(graph: unknown, workflowId?: string): Promise<Workflow>;
export interface WorkbenchGraphOptions { client?: WorkbenchClient; workflowId?: string; title?: string; tags?: string[]; prices?: PriceTable; gateTimeout?: number }
/** A compiled LangGraph.js graph whose invoke records a run and waits at its interrupts. */
export declare class WorkbenchGraph<S = Record<string, unknown>> {
  constructor(graph: unknown, options?: WorkbenchGraphOptions);
  graph: unknown; lastRun: RemoteRun | null;
  invoke(input: unknown, config?: Record<string, unknown>): Promise<S>;
}
/** LangChain tool callbacks recorded as tool runs of `run` (one tool_call per tool that ran). */
export declare class ToolRecorder {
  constructor(run: RemoteRun);
  name: string;
}
