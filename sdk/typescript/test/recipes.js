// The recipes of docs/engineers/typescript.md (blocks starting `// recipe: <name>`), written as
// modules under .recipes/ (gitignored) so that they import "@workbench/sdk" and the npm
// packages exactly as a project would. Run by docs.live.test.js and, with a decision taken in
// Chromium, by tests/browser/test_typescript_browser.py through run_recipe.js.
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";

const DOC = new URL("../../../docs/engineers/typescript.md", import.meta.url);
const RECIPE = /```js\n\/\/ recipe: ([\w-]+)[^\n]*\n([\s\S]*?)```/g;

export function recipes() {
  const text = readFileSync(DOC, "utf-8");
  return Object.fromEntries([...text.matchAll(RECIPE)].map((m) => [m[1], m[2]]));
}

/** Import recipe `name` as a module (written under .recipes/). */
export async function loadRecipe(name) {
  const code = recipes()[name];
  if (!code) throw new Error(`no recipe ${name} in docs/engineers/typescript.md`);
  const dir = new URL("../.recipes/", import.meta.url);
  mkdirSync(dir, { recursive: true });
  const file = new URL(`${name}.mjs`, dir);
  writeFileSync(file, code);
  return import(file.href);
}

/** Call the Next.js route recipe as Next.js would: {status, text, runId}. */
export async function callRoute(prompt) {
  const { POST } = await loadRecipe("nextjs-route");
  const response = await POST(new Request("http://localhost/api/chat", { method: "POST", body: JSON.stringify({ prompt }) }));
  return { status: response.status, text: await response.text(), runId: response.headers.get("X-Workbench-Run") };
}
