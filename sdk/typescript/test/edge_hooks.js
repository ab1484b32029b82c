// Module hooks for test/edge_runtime.js: every `node:` (or bare built-in) import is refused,
// except those of the harness itself, as on an edge runtime that has no Node modules.
import { isBuiltin } from "node:module";

let allowed = "";

export async function initialize(data) {
  allowed = data.allowed;
}

export async function resolve(specifier, context, next) {
  if ((specifier.startsWith("node:") || isBuiltin(specifier)) && context.parentURL !== allowed) {
    const err = new Error(`edge runtime: no module '${specifier}' (imported by ${context.parentURL})`);
    err.code = "ERR_EDGE_NO_NODE_MODULES";
    throw err;
  }
  return next(specifier, context);
}
