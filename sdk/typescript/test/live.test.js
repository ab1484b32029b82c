// Against a real server: run by tests/live/test_typescript_sdk.py (WORKBENCH_URL, WORKBENCH_TOKEN,
// WORKBENCH_TS_TITLE); skipped without WORKBENCH_URL. The pytest side decides the gate.
import assert from "node:assert/strict";
import { test } from "node:test";
import { RemoteRun, WorkbenchAPIError, WorkbenchClient } from "../src/index.js";

const live = !process.env.WORKBENCH_URL;
const WORKFLOW = { id: "ts-sdk", version: 0, steps: [{ id: "draft" }, { id: "review" }] };

test("a run with events, an artifact and a gate that wait() sees decided", { skip: live }, async () => {
  const client = new WorkbenchClient();
  const run = await RemoteRun.start(client, { workflow: WORKFLOW, title: process.env.WORKBENCH_TS_TITLE });
  const text = await run.step("draft", async (r) => {
    await r.artifact("draft", { text: "hello" });
    return "hello";
  });
  assert.equal(text, "hello");
  await run.startStep("review");
  const decision = await run
    .gate("review", "CHECKPOINT", { name: "review", reason: "Check the draft", payload: { draft: text } })
    .wait({ timeout: 120 });
  assert.equal(decision.decision, "approved");
  assert.equal(decision.note, "ship it");
  assert.deepEqual(decision.payload, { draft: "hello" });
  await run.completeStep("review");
  await run.finish();
  const trace = await client.events(run.runId);
  const types = trace.events.map((e) => e.event?.type ?? e.type);
  for (const t of ["step_started", "step_completed", "human_gate_requested", "run_status_changed"]) {
    assert.ok(types.includes(t), `${t} in ${types}`);
  }
});

test("errors carry the server's code", { skip: live }, async () => {
  const client = new WorkbenchClient({ retries: 0 });
  await assert.rejects(client.appendEvents("no-such-run", [{ type: "step_started", stepId: "x" }]), (e) => e instanceof WorkbenchAPIError && e.status === 404);
  const anon = new WorkbenchClient({ token: "wrong", retries: 0 });
  await assert.rejects(anon.startRun({ workflow: WORKFLOW }), (e) => e instanceof WorkbenchAPIError && e.status === 401);
});
