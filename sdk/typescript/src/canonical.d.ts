export declare const MAX_NESTING: number;
export declare class CanonicalError extends Error {}
/** RFC 8785 canonical JSON text of a JSON value. */
export declare function canonicalJson(value: unknown): string;
/** RFC 8785 canonical UTF-8 bytes of a JSON value. */
export declare function canonicalBytes(value: unknown): Uint8Array;
