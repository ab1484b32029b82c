export type Recipe = "v1" | "v2";
export declare const RECIPES: Recipe[];
export declare const V2_RECIPE_NAME: string;
export declare class CacheKeyError extends Error {
  code: "INVALID_INPUT";
  path: string;
}
export interface CacheKeyRequest {
  provider: string;
  model: string;
  messages: Array<{ role: string; content: string | unknown[]; [k: string]: unknown }>;
  tools?: Array<{ name: string; description?: string; parameters?: Record<string, unknown> }>;
  temperature?: number;
  topP?: number;
  topK?: number;
  responseFormat?: Record<string, unknown>;
  maxOutputTokens?: number;
  seed?: number;
  stop?: string | string[];
  safetySettings?: Record<string, unknown>[];
  providerOptions?: Record<string, unknown>;
}
export declare function cacheKeyInput(request: CacheKeyRequest, opts?: { recipe?: Recipe }): Record<string, unknown>;
/** Lowercase hex SHA-256 of the RFC 8785 form of cacheKeyInput (same as the Python SDK). */
export declare function llmCacheKey(request: CacheKeyRequest, opts?: { recipe?: Recipe }): string;
export declare function llmCacheKeys(request: CacheKeyRequest): { v1: string; v2: string };
/** The cache-key input of a provider wire body (Anthropic Messages, OpenAI Chat Completions). */
export declare function requestFromWire(provider: string, model: string | null | undefined, body: Record<string, unknown>): CacheKeyRequest;
