import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { CacheKeyError, llmCacheKey, llmCacheKeys, requestFromWire } from "../src/cachekey.js";
import { canonicalJson } from "../src/canonical.js";

const vectors = JSON.parse(readFileSync(new URL("./vectors.json", import.meta.url), "utf-8"));

test("cache keys are byte-equal with the Python SDK's (test/vectors.json)", () => {
  assert.ok(vectors.filter((v) => v.request).length >= 4 && vectors.filter((v) => v.wire).length >= 2);
  for (const { request, wire, keys } of vectors) {
    const input = request ?? requestFromWire(wire.provider, wire.model, wire.body);
    assert.deepEqual(llmCacheKeys(input), keys);
  }
});

test("canonical JSON sorts keys by UTF-16 code units and writes JS numbers", () => {
  assert.equal(canonicalJson({ b: 1, a: [1e21, 0.1, -0], "\u{1f600}": 1, "\uff61": 2 }),
    '{"a":[1e+21,0.1,0],"b":1,"\u{1f600}":1,"\uff61":2}');
});

test("bad input throws CacheKeyError with the path, never hashed", () => {
  const base = { provider: "openai", model: "m", messages: [] };
  assert.throws(() => llmCacheKey({ ...base, temperature: "hot" }), (e) =>
    e instanceof CacheKeyError && e.code === "INVALID_INPUT" && e.path === "temperature");
  assert.throws(() => llmCacheKey({ ...base, provider: " " }), CacheKeyError);
  assert.throws(() => llmCacheKey({ ...base, messages: [{ role: "user", content: "\ud800" }] }), CacheKeyError);
  assert.throws(() => llmCacheKey(base, { recipe: "v3" }), CacheKeyError);
});
