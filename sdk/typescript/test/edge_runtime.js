// The SDK as an edge runtime sees it (run by test/edge.test.js, one process per mode): module
// hooks refuse every `node:` import but this file's, process.getBuiltinModule is gone, and
//   EDGE_MODE=vercel: `process` is only {env} and AsyncLocalStorage is a global (Vercel Edge,
//                     Next.js edge routes);
//   EDGE_MODE=none:   no AsyncLocalStorage anywhere (a Worker without nodejs_compat);
//   EDGE_MODE=oldnode: no hooks, only getBuiltinModule gone (Node before 20.16).
// It loads the package, computes a cache key, asks the fake server (EDGE_FAKE_URL) for that
// cache entry and runs one observed call nesting another; it prints what it saw as JSON.
import { AsyncLocalStorage } from "node:async_hooks";
import { register } from "node:module";

const mode = process.env.EDGE_MODE;
if (mode !== "oldnode") register(new URL("./edge_hooks.js", import.meta.url), { data: { allowed: import.meta.url } });
const { request, wire } = JSON.parse(process.env.EDGE_VECTOR);
const fakeUrl = process.env.EDGE_FAKE_URL;
delete process.getBuiltinModule;
if (mode === "vercel") {
  globalThis.AsyncLocalStorage = AsyncLocalStorage;
  globalThis.process = { env: { WORKBENCH_URL: fakeUrl, WORKBENCH_TOKEN: "edge-token" } };
} else {
  process.env.WORKBENCH_URL = fakeUrl;
  process.env.WORKBENCH_TOKEN = "edge-token";
}

const out = { mode };
try {
  await import("data:text/javascript,import 'node:crypto';");
  out.blocked = false;
} catch (err) {
  out.blocked = err.code === "ERR_EDGE_NO_NODE_MODULES";
}
const sdk = await import("../src/index.js");
out.asyncContext = await sdk.asyncContextReady();
out.keys = sdk.llmCacheKeys(request);
const client = new sdk.WorkbenchClient({ retries: 0 });
out.cached = await client.cachedResponse(wire.provider, wire.model, wire.body);
const inner = sdk.observe(async (x) => ({ inner: x, run: sdk.currentRun()?.runId ?? null }), { name: "inner" });
const outer = sdk.observe(async (x) => inner(x + 1), { name: "outer" });
out.observed = await outer(1);
out.outerRun = outer.lastRun.runId;
out.innerRun = inner.lastRun?.runId ?? null;
console.log(JSON.stringify(out));
