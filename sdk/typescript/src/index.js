export * from "./canonical.js";
export * from "./cachekey.js";
export * from "./client.js";
export * from "./pricing.js";
export * from "./traced.js";
export * from "./observe.js";
export { traceTools, workbenchMiddleware } from "./aisdk.js";
