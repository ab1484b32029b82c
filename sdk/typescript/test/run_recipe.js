// `node test/run_recipe.js <recipe> [input]`: one recipe of docs/engineers/typescript.md run once,
// its outcome printed as one JSON line (tests/browser/test_typescript_browser.py decides its
// gates in Chromium):
//   nextjs-route "<prompt>"  the Next.js route called as Next.js would: {status, text, runId}
//   langgraph "<topic>"      the LangGraph.js graph invoked: {state, runId}
import { callRoute, loadRecipe } from "./recipes.js";

const [name, input] = process.argv.slice(2);
let answer;
if (name === "nextjs-route") {
  answer = await callRoute(input || "a greeting");
} else if (name === "langgraph") {
  const { graph } = await loadRecipe("langgraph");
  const state = await graph.invoke({ topic: input || "tides" });
  answer = { state, runId: graph.lastRun.runId };
} else {
  throw new Error(`run_recipe.js: no recipe runner for '${name}' (nextjs-route, langgraph)`);
}
console.log(JSON.stringify(answer));
