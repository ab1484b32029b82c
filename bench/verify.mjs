// Node.js baseline for the bundle-check benchmark (no npm packages).
// Reads a run bundle, JSON.parse, canonical JSON (keys sorted by UTF-16 code units, which is
// Array.prototype.sort's default order; numbers and strings as JSON.stringify writes them),
// SHA-256 over {run, trace, artifacts, ruleSets, engine?} and compares with integrity.sha256.
// Usage: node bench/verify.mjs BUNDLE.json   -> prints {"integrity": "...", "seconds": ...}
import { readFileSync } from "node:fs";
import { createHash } from "node:crypto";

function canonical(value) {
  if (value === null || typeof value !== "object") {
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) {
    return "[" + value.map((v) => (v === undefined ? "null" : canonical(v))).join(",") + "]";
  }
  const keys = Object.keys(value).filter((k) => value[k] !== undefined).sort();
  return "{" + keys.map((k) => JSON.stringify(k) + ":" + canonical(value[k])).join(",") + "}";
}

const path = process.argv[2];
const started = process.hrtime.bigint();
const bundle = JSON.parse(readFileSync(path, "utf8"));
const input = { run: bundle.run, trace: bundle.trace, artifacts: bundle.artifacts, ruleSets: bundle.ruleSets };
if (bundle.engine !== undefined) input.engine = bundle.engine;
const digest = createHash("sha256").update(canonical(input), "utf8").digest("hex");
const declared = bundle.integrity && bundle.integrity.sha256;
const status = declared === undefined ? "missing" : declared === digest ? "valid" : "mismatch";
const seconds = Number(process.hrtime.bigint() - started) / 1e9;
console.log(JSON.stringify({ integrity: status, sha256: digest, seconds }));
