export * from "./canonical.js";
export * from "./cachekey.js";
export * from "./client.js";
