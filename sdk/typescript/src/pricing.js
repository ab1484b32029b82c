// Cost of a model call from its usage and a price table of plain data: a port of
// workbench_sdk.pricing. A table maps "provider:model" or "model" to a row of prices per million
// tokens ({input, output, cache_read|cacheRead, cache_write|cacheWrite, cache_write_1h, currency};
// numbers or decimal strings; the server's GET /api/prices rows work as they are). A price that
// a call needs and the row lacks makes the cost unknown (null), never 0.

const FIELDS = {
  input: ["input"],
  output: ["output"],
  cache_read: ["cache_read", "cacheRead"],
  cache_write: ["cache_write", "cacheWrite"],
  cache_write_1h: ["cache_write_1h", "cacheWrite1h"],
};

function field(row, name) {
  for (const key of FIELDS[name] || [name]) {
    const value = row?.[key];
    if (value !== undefined && value !== null) return value;
  }
  return undefined;
}

function perMillion(value) {
  if (value === undefined) return undefined;
  if (typeof value === "boolean") throw new TypeError("a price must be a number, not a bool");
  const n = Number(value);
  if (!Number.isFinite(n)) throw new TypeError(`a price must be a number: ${value}`);
  return n;
}

/** The row of `prices` for this call: "provider:model" first, then "model"; else null. */
export function priceFor(prices, provider, model) {
  if (!prices || !model) return null;
  const get = (k) => (prices instanceof Map ? prices.get(k) : Object.hasOwn(prices, k) ? prices[k] : undefined);
  return get(`${provider}:${model}`) ?? get(model) ?? null;
}

/** The amount of a protocol model_io.usage at a price row, or null when a needed price is missing. */
export function costAmount(usage, price, { cacheWriteTokens = 0, cacheWrite1hTokens = 0 } = {}) {
  const input = usage.inputTokens || 0;
  const read = usage.cachedInputTokens || 0;
  const hour = Math.min(cacheWrite1hTokens, cacheWriteTokens);
  const parts = [
    [Math.max(0, input - read - cacheWriteTokens), "input"],
    [usage.outputTokens || 0, "output"],
    [read, "cache_read"],
    [cacheWriteTokens - hour, "cache_write"],
    [hour, "cache_write_1h"],
  ];
  let total = 0;
  for (const [tokens, name] of parts) {
    if (!tokens) continue;
    const rate = perMillion(field(price, name));
    if (rate === undefined) return null;
    total += (tokens * rate) / 1_000_000;
  }
  return total;
}

/** model_io.cost ({amount, currency}) from a usage and a price row; null if either is unknown. */
export function costOf(usage, price, opts = {}) {
  if (!usage || !price) return null;
  const amount = costAmount(usage, price, opts);
  if (amount === null) return null;
  const currency = String(field(price, "currency") || "").trim().toUpperCase() || "USD";
  return { amount, currency };
}
