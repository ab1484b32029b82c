// The LLM cache key: a port of workbench_sdk.cachekey (byte-equal keys, pinned by
// test/vectors.json which the Python side generates). v1 and v2 (default) recipes, RFC 8785
// canonical JSON hashed with SHA-256 as lowercase hex (src/sha256.js: synchronous and without
// node:crypto, so edge runtimes compute the same keys). Bad input throws CacheKeyError
// (code INVALID_INPUT, with the JSON path), never hashed.
import { CanonicalError, canonicalBytes } from "./canonical.js";
import { sha256Hex } from "./sha256.js";

export const RECIPES = ["v1", "v2"];
export const V2_RECIPE_NAME = "openwop-semantic-request-v2";
const NUMBER_FIELDS = ["temperature", "topP", "topK"];

export class CacheKeyError extends Error {
  constructor(message, path = "") {
    super(path ? `${path}: ${message}` : message);
    this.name = "CacheKeyError";
    this.code = "INVALID_INPUT";
    this.path = path;
  }
}

const isObject = (v) => v !== null && typeof v === "object" && !Array.isArray(v);
const isNumber = (v) => typeof v === "number";
const given = (v) => v !== undefined && v !== null;
const bad = (path, message) => new CacheKeyError(message, path);

function byUtf16(a, b) {
  return a < b ? -1 : a > b ? 1 : 0;
}

function tools(value) {
  if (!Array.isArray(value)) throw bad("tools", "tools must be a list of tool definitions");
  const out = value.map((tool, i) => {
    if (!isObject(tool) || typeof tool.name !== "string" || !tool.name) {
      throw bad(`tools[${i}]`, "each tool needs a non-empty name");
    }
    const entry = { name: tool.name };
    if (given(tool.description)) {
      if (typeof tool.description !== "string") {
        throw bad(`tools[${i}].description`, "a tool description must be a string");
      }
      entry.description = tool.description;
    }
    const parameters = given(tool.parameters) ? tool.parameters : {};
    if (!isObject(parameters)) {
      throw bad(`tools[${i}].parameters`, "tool parameters must be a JSON Schema object");
    }
    entry.parameters = parameters;
    return entry;
  });
  return out.sort((a, b) => byUtf16(a.name, b.name));
}

function messages(value) {
  if (!Array.isArray(value)) throw bad("messages", "messages must be a list");
  value.forEach((message, i) => {
    if (!isObject(message) || typeof message.role !== "string") {
      throw bad(`messages[${i}]`, "each message must be an object with a role");
    }
    if (typeof message.content !== "string" && !Array.isArray(message.content)) {
      throw bad(`messages[${i}].content`, "message content must be a string or a list of blocks");
    }
  });
  return value;
}

function common(request) {
  if (!isObject(request)) throw bad("", "a cache key request must be a JSON object");
  const { provider, model } = request;
  if (typeof provider !== "string" || !provider.trim()) {
    throw bad("provider", "provider must be a non-empty string");
  }
  if (typeof model !== "string" || !model) throw bad("model", "model must be a non-empty string");
  const identity = { provider: provider.trim().toLowerCase(), model };
  const fields = { messages: messages(request.messages) };
  if (given(request.tools)) fields.tools = tools(request.tools);
  for (const name of NUMBER_FIELDS) {
    if (given(request[name])) {
      if (!isNumber(request[name])) throw bad(name, `${name} must be a number`);
      fields[name] = request[name];
    }
  }
  if (given(request.responseFormat)) {
    if (!isObject(request.responseFormat)) throw bad("responseFormat", "responseFormat must be an object");
    fields.responseFormat = request.responseFormat;
  }
  return [identity, fields];
}

function v2Extras(request) {
  const extras = {};
  const max = request.maxOutputTokens;
  if (given(max)) {
    if (!Number.isInteger(max) || max < 0) {
      throw bad("maxOutputTokens", "maxOutputTokens must be a non-negative integer");
    }
    extras.maxOutputTokens = max;
  }
  if (given(request.seed)) {
    if (!isNumber(request.seed)) throw bad("seed", "seed must be a number");
    extras.seed = request.seed;
  }
  let stop = request.stop;
  if (given(stop)) {
    stop = typeof stop === "string" ? [stop] : stop;
    if (!Array.isArray(stop) || !stop.every((s) => typeof s === "string")) {
      throw bad("stop", "stop must be a string or a list of strings");
    }
    extras.stop = stop;
  }
  const safety = request.safetySettings;
  if (given(safety)) {
    if (!Array.isArray(safety) || !safety.every(isObject)) {
      throw bad("safetySettings", "safetySettings must be a list of objects");
    }
    extras.safetySettings = safety;
  }
  return extras;
}

/** The object that is canonicalized and hashed for `recipe`. */
export function cacheKeyInput(request, { recipe = "v2" } = {}) {
  const [identity, fields] = common(request);
  if (recipe === "v1") return { ...identity, ...fields };
  if (recipe !== "v2") {
    throw bad("recipe", `unknown cache key recipe '${recipe}'; choose from ${RECIPES.join(", ")}`);
  }
  const body = { recipe: V2_RECIPE_NAME, ...identity, request: { ...fields, ...v2Extras(request) } };
  if (given(request.providerOptions)) {
    if (!isObject(request.providerOptions)) throw bad("providerOptions", "providerOptions must be an object");
    body.providerOptions = request.providerOptions;
  }
  return body;
}

/** Lowercase hex SHA-256 of the RFC 8785 form of cacheKeyInput (same as the Python SDK). */
export function llmCacheKey(request, { recipe = "v2" } = {}) {
  let data;
  try {
    data = canonicalBytes(cacheKeyInput(request, { recipe }));
  } catch (err) {
    if (err instanceof CanonicalError) throw new CacheKeyError(err.message);
    throw err;
  }
  return sha256Hex(data);
}

/** Both keys of one request: {v1, v2}. */
export function llmCacheKeys(request) {
  return { v1: llmCacheKey(request, { recipe: "v1" }), v2: llmCacheKey(request, { recipe: "v2" }) };
}

// Provider wire bodies (Anthropic Messages, OpenAI Chat Completions) -> the cache-key input: a
// port of workbench_sdk.cachekey.request_from_wire (the server computes the same from a recorded
// model_io request).
const TRANSPORT_KEYS = new Set([
  "stream", "stream_options", "metadata", "user", "service_tier", "store", "n", "logprobs", "top_logprobs",
]);
const WIRE_FIELDS = {
  temperature: "temperature",
  top_p: "topP",
  top_k: "topK",
  max_tokens: "maxOutputTokens",
  max_completion_tokens: "maxOutputTokens",
  max_output_tokens: "maxOutputTokens",
  seed: "seed",
  stop: "stop",
  stop_sequences: "stop",
  safety_settings: "safetySettings",
};

function wireTool(tool) {
  if (!isObject(tool)) return tool;
  if (tool.type === "function" && isObject(tool.function)) {
    const fn = tool.function;
    const out = { name: fn.name, parameters: fn.parameters || {} };
    if (given(fn.description)) out.description = fn.description;
    return out;
  }
  const out = { name: tool.name, parameters: tool.input_schema || tool.parameters || {} };
  if (given(tool.description)) out.description = tool.description;
  return out;
}

function wireResponseFormat(body) {
  const fmt = body.response_format;
  if (!isObject(fmt)) return undefined;
  if (fmt.type === "json_schema" && isObject(fmt.json_schema)) return { type: "json", schema: fmt.json_schema.schema || {} };
  if (fmt.type === "json_object") return { type: "json" };
  if (fmt.type === "text") return { type: "text" };
  return fmt;
}

/** The cache-key input of a provider wire body (same as the Python SDK's request_from_wire). */
export function requestFromWire(provider, model, body) {
  if (!isObject(body)) throw bad("", "a provider request body must be a JSON object");
  const out = { provider, model: model || body.model };
  let msgs = [...(body.messages || [])];
  if (given(body.system)) msgs = [{ role: "system", content: body.system }, ...msgs];
  out.messages = msgs;
  if (given(body.tools)) out.tools = Array.isArray(body.tools) ? body.tools.map(wireTool) : body.tools;
  const fmt = wireResponseFormat(body);
  if (fmt !== undefined) out.responseFormat = fmt;
  const options = {};
  for (const [key, value] of Object.entries(body)) {
    if (["model", "messages", "system", "tools", "response_format"].includes(key) || TRANSPORT_KEYS.has(key)) continue;
    if (key in WIRE_FIELDS) {
      if (given(value)) out[WIRE_FIELDS[key]] = value;
      continue;
    }
    options[key] = value;
  }
  if (Object.keys(options).length) out.providerOptions = options;
  return out;
}
