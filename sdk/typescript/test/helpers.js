// Shared by the live tests: run by tests/live/test_typescript_sdk.py (WORKBENCH_URL,
// WORKBENCH_TOKEN, OPENAI_FAKE_URL, ANTHROPIC_FAKE_URL: a real server and the loopback provider
// fakes of tests/fakes/); skipped without them.
import { WorkbenchClient } from "../src/index.js";

export const SKIP = !process.env.WORKBENCH_URL || !process.env.OPENAI_FAKE_URL;
export const OPENAI_URL = `${process.env.OPENAI_FAKE_URL}/v1`;
export const ANTHROPIC_URL = process.env.ANTHROPIC_FAKE_URL;

/** Every event of a run, unwrapped from the server's {seq, event} items. */
export async function traceOf(client, runId) {
  const page = await client.events(runId, { limit: 1000 });
  return page.events.map((item) => item.event ?? item);
}

export const responses = (trace) => trace.filter((e) => e.type === "model_io" && e.direction === "response");

export const liveClient = () => (SKIP ? null : new WorkbenchClient());

/** Poll `fn` until it returns a truthy value (at most `seconds`). */
export async function eventually(fn, seconds = 30) {
  const deadline = Date.now() + seconds * 1000;
  for (;;) {
    const value = await fn();
    if (value) return value;
    if (Date.now() > deadline) throw new Error("timed out waiting");
    await new Promise((r) => setTimeout(r, 300));
  }
}
