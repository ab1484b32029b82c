/** A price row: prices per million tokens (numbers or decimal strings). */
export interface PriceRow {
  input?: number | string; output?: number | string;
  cache_read?: number | string; cacheRead?: number | string;
  cache_write?: number | string; cacheWrite?: number | string;
  cache_write_1h?: number | string; cacheWrite1h?: number | string;
  currency?: string; source?: string;
}
/** {"provider:model" or "model": row} (the server's GET /api/prices answer works as it is). */
export type PriceTable = Record<string, PriceRow> | Map<string, PriceRow>;
export interface Usage { inputTokens: number; outputTokens: number; totalTokens?: number; cachedInputTokens?: number; reasoningTokens?: number }
export interface Cost { amount: number; currency: string }
export declare function priceFor(prices: PriceTable | null | undefined, provider: string, model: string | null | undefined): PriceRow | null;
export declare function costAmount(usage: Usage, price: PriceRow, opts?: { cacheWriteTokens?: number; cacheWrite1hTokens?: number }): number | null;
export declare function costOf(usage: Usage | null | undefined, price: PriceRow | null | undefined, opts?: { cacheWriteTokens?: number; cacheWrite1hTokens?: number }): Cost | null;
