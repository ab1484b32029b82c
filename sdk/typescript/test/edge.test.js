// Edge runtimes (Vercel Edge, Next.js edge routes, Cloudflare Workers) have no `node:` modules:
// the package must load without one, hash cache keys byte-equal with Python, call the server
// through fetch, and say whether observed calls nest (test/edge_runtime.js, under module hooks
// that refuse every node: import). Also: src/sha256.js against NIST and node:crypto.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { readFileSync, readdirSync } from "node:fs";
import { createServer } from "node:http";
import { test } from "node:test";
import { promisify } from "node:util";
import { sha256Hex } from "../src/sha256.js";

const run = promisify(execFile);
const vectors = JSON.parse(readFileSync(new URL("./vectors.json", import.meta.url), "utf-8"));
const SRC = new URL("../src/", import.meta.url);

test("sha256Hex: the NIST vectors, and node:crypto's digest at every length around the blocks", () => {
  assert.equal(sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  assert.equal(sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  assert.equal(sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
    "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  assert.equal(sha256Hex(new Uint8Array(1_000_000).fill(0x61)),
    "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  for (let n = 0; n <= 200; n++) {
    const bytes = randomBytes(n);
    assert.equal(sha256Hex(new Uint8Array(bytes)), createHash("sha256").update(bytes).digest("hex"), `${n} bytes`);
  }
  assert.equal(sha256Hex("é\u{1f600}"), createHash("sha256").update("é\u{1f600}", "utf8").digest("hex"));
  assert.throws(() => sha256Hex(/** @type {any} */ ([1, 2])), TypeError);
});

test("no module of the main entry imports a node: module", () => {
  for (const file of readdirSync(SRC).filter((f) => f.endsWith(".js") && f !== "langgraph.js")) {
    const text = readFileSync(new URL(file, SRC), "utf-8");
    assert.doesNotMatch(text, /(from|import)\s*\(?\s*["'](node:|crypto|async_hooks)/, file);
  }
});

/** A fake server: records every request; answers runs, events, artifacts and one cache entry. */
async function fakeServer() {
  const seen = [];
  let runs = 0;
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => { body += chunk; });
    req.on("end", () => {
      seen.push({ method: req.method, path: req.url, auth: req.headers.authorization, body: body ? JSON.parse(body) : null });
      const send = (status, value) => {
        res.writeHead(status, { "Content-Type": "application/json" });
        res.end(JSON.stringify(value));
      };
      if (req.method === "GET" && req.url.startsWith("/api/cache/")) {
        return send(200, { key: req.url.slice("/api/cache/".length), response: { payload: { id: "cached" } } });
      }
      if (req.method === "POST" && req.url === "/api/runs") return send(201, { runId: `run_edge_${++runs}` });
      if (req.method === "POST" && req.url.endsWith("/events")) return send(200, { seqs: [1] });
      if (req.method === "POST" && req.url.endsWith("/artifacts")) return send(201, {});
      return send(404, { error: { code: "NOT_FOUND", message: req.url } });
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { seen, url: `http://127.0.0.1:${server.address().port}`, close: () => server.close() };
}

async function edgeRun(mode) {
  const fake = await fakeServer();
  const vector = { request: vectors.find((v) => v.request).request, wire: vectors.find((v) => v.wire).wire };
  try {
    const { stdout } = await run(process.execPath, [new URL("./edge_runtime.js", import.meta.url).pathname], {
      env: { PATH: process.env.PATH, EDGE_MODE: mode, EDGE_FAKE_URL: fake.url, EDGE_VECTOR: JSON.stringify(vector) },
      timeout: 60_000,
    });
    return { out: JSON.parse(stdout.trim().split("\n").at(-1)), seen: fake.seen };
  } finally {
    fake.close();
  }
}

const wireKey = () => vectors.find((v) => v.wire).keys.v2;
const runStarts = (seen) => seen.filter((r) => r.method === "POST" && r.path === "/api/runs");

test("Vercel Edge: loads with node: refused, Python's keys, a fetch call, observed calls nest", async () => {
  const { out, seen } = await edgeRun("vercel");
  assert.equal(out.blocked, true, "the hooks refuse node: imports");
  assert.equal(out.asyncContext, true);
  assert.deepEqual(out.keys, vectors.find((v) => v.request).keys);
  assert.deepEqual(out.cached, { key: wireKey(), response: { payload: { id: "cached" } } });
  assert.ok(seen.some((r) => r.path === `/api/cache/${wireKey()}` && r.auth === "Bearer edge-token"));
  // the global AsyncLocalStorage carries the scope: one run, the inner call one of its steps
  assert.deepEqual(out.observed, { inner: 2, run: "run_edge_1" });
  assert.equal(runStarts(seen).length, 1);
  assert.equal(out.innerRun, null);
  const steps = seen.flatMap((r) => r.body?.events ?? []).filter((e) => e.type === "step_started").map((e) => e.stepId);
  assert.deepEqual(steps, ["outer", "inner"]);
});

test("no AsyncLocalStorage at all: still loads and keys; each observed call is a run of its own", async () => {
  const { out, seen } = await edgeRun("none");
  assert.equal(out.blocked, true);
  assert.equal(out.asyncContext, false);
  assert.deepEqual(out.keys, vectors.find((v) => v.request).keys);
  assert.ok(seen.some((r) => r.path === `/api/cache/${wireKey()}`));
  assert.deepEqual(out.observed, { inner: 2, run: null });
  assert.equal(runStarts(seen).length, 2);
  assert.notEqual(out.innerRun, out.outerRun);
});

test("Node before 20.16 (no getBuiltinModule): node:async_hooks is imported, observed calls nest", async () => {
  const { out, seen } = await edgeRun("oldnode");
  assert.equal(out.blocked, false);
  assert.equal(out.asyncContext, true);
  assert.deepEqual(out.observed, { inner: 2, run: "run_edge_1" });
  assert.equal(runStarts(seen).length, 1);
});
