// The type declarations (src/*.d.ts) compile under `tsc --strict` (typescript is a devDependency).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, writeFileSync } from "node:fs";
import { test } from "node:test";

const tsc = new URL("../node_modules/typescript/bin/tsc", import.meta.url).pathname;

test("the .d.ts files compile with tsc --strict, one beside each module", { skip: !existsSync(tsc) }, () => {
  const src = new URL("../src/", import.meta.url).pathname;
  const modules = readdirSync(src).filter((f) => f.endsWith(".js"));
  for (const js of modules) assert.ok(existsSync(src + js.replace(/\.js$/, ".d.ts")), `${js} has no .d.ts`);
  const files = readdirSync(src).filter((f) => f.endsWith(".d.ts")).map((f) => src + f);
  execFileSync(process.execPath, [tsc, "--noEmit", "--strict", "--target", "es2022", "--module", "nodenext", "--moduleResolution", "nodenext", ...files], { stdio: "pipe" });
});

// A TypeScript project's use of the SDK type-checks against the real ai, @ai-sdk/openai and openai.
const PROJECT = `
import { wrapLanguageModel, generateText } from "ai";
import { createOpenAI } from "@ai-sdk/openai";
import OpenAI from "openai";
import { RemoteRun, WorkbenchClient, workbenchMiddleware, observe, openai } from "@workbench/sdk";
import { WorkbenchGraph } from "@workbench/sdk/langgraph";

export async function main(): Promise<void> {
  const run = await RemoteRun.start(new WorkbenchClient(), { workflow: { id: "x", version: 0, steps: [] } });
  const model = wrapLanguageModel({ model: createOpenAI().chat("gpt-4o-mini"), middleware: workbenchMiddleware({ run, stepId: "s" }) });
  const { text } = await generateText({ model, prompt: "hi" });
  const gpt = openai(new OpenAI());
  const f = observe(async (city: string) => (await gpt.chat.completions.create({ model: "m", messages: [{ role: "user", content: city }] })).choices[0].message.content, { name: "f" });
  const out: string | null = await f("Oslo");
  const decision = await run.gate("s", "CHECKPOINT", { name: "s" }).wait({ timeout: 1 });
  const graph = new WorkbenchGraph<{ done: boolean }>({}, { workflowId: "w" });
  const state = await graph.invoke({});
  console.log(text, out, decision.decision, state.done, f.lastRun?.runId);
}
`;

test("a TypeScript project using the SDK with the AI SDK and openai type-checks", { skip: !existsSync(tsc) }, () => {
  const dir = new URL("../.recipes/", import.meta.url);
  mkdirSync(dir, { recursive: true });
  const file = new URL("project.ts", dir).pathname;
  writeFileSync(file, PROJECT);
  execFileSync(process.execPath, [tsc, "--noEmit", "--strict", "--skipLibCheck", "--target", "es2022", "--module", "nodenext", "--moduleResolution", "nodenext", file], { stdio: "pipe" });
});
