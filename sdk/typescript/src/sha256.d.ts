/** The SHA-256 digest of `data` (a Uint8Array, or a string hashed as UTF-8) as lowercase hex. */
export declare function sha256Hex(data: Uint8Array | string): string;
