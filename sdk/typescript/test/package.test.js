// package.json says what the modules import: every npm package a module of src/ imports is an
// optional peer dependency (the main entry needs none), pinned for the tests in devDependencies
// at a version the peer range accepts, and package-lock.json's root says the same (npm ci).
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { test } from "node:test";

const read = (path) => JSON.parse(readFileSync(new URL(path, import.meta.url), "utf-8"));
const pkg = read("../package.json");
const lock = read("../package-lock.json");
const SRC = new URL("../src/", import.meta.url);

/** The npm packages `file` imports (statically): "@scope/name" or "name". */
function imported(file) {
  const text = readFileSync(new URL(file, SRC), "utf-8");
  const names = new Set();
  for (const [, spec] of text.matchAll(/^\s*(?:import|export)\s[^;]*?\sfrom\s+["']([^"']+)["']/gm)) {
    if (spec.startsWith(".") || spec.startsWith("node:")) continue;
    names.add(spec.split("/").slice(0, spec.startsWith("@") ? 2 : 1).join("/"));
  }
  return names;
}

/** Whether `version` (x.y.z) is in a caret range (^x.y.z). */
function caret(range, version) {
  const want = /^\^(\d+)\.(\d+)\.(\d+)$/.exec(range);
  assert.ok(want, `peer range ${range} is a caret range`);
  const [a, b] = [want.slice(1).map(Number), version.split(".").map(Number)];
  return a[0] === b[0] && (b[1] > a[1] || (b[1] === a[1] && b[2] >= a[2]));
}

test("every package a module imports is an optional peer, pinned for the tests", () => {
  const files = readdirSync(SRC).filter((f) => f.endsWith(".js"));
  const needed = new Set(files.flatMap((f) => [...imported(f)]));
  assert.ok(needed.has("@langchain/core") && needed.has("@langchain/langgraph"), [...needed].join(", "));
  assert.deepEqual(Object.keys(pkg.peerDependencies ?? {}).sort(), [...needed].sort());
  for (const name of needed) {
    assert.deepEqual(pkg.peerDependenciesMeta?.[name], { optional: true }, `${name} is an optional peer`);
    const pinned = pkg.devDependencies[name];
    assert.ok(pinned && caret(pkg.peerDependencies[name], pinned), `${name} ${pinned} in ${pkg.peerDependencies[name]}`);
    assert.equal(lock.packages[`node_modules/${name}`].version, pinned, `${name} locked at the pinned version`);
  }
  assert.deepEqual(pkg.dependencies ?? {}, {}, "no runtime dependency");
  const main = ["index.js", "canonical.js", "cachekey.js", "sha256.js", "client.js", "pricing.js", "traced.js", "observe.js", "aisdk.js"];
  for (const file of main) assert.deepEqual([...imported(file)], [], `${file} (main entry) imports no package`);
});

test("package-lock.json's root is package.json (npm ci refuses a lock out of step)", () => {
  const root = lock.packages[""];
  for (const key of ["name", "version", "devDependencies", "peerDependencies", "peerDependenciesMeta", "engines"]) {
    assert.deepEqual(root[key], pkg[key], key);
  }
  assert.equal(lock.name, pkg.name);
});
