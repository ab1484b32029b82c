// RFC 8785 (JCS) canonical JSON: the same bytes as workbench_sdk._canonical.canonical_bytes.
// Keys sorted by UTF-16 code units (JavaScript's default string order), numbers as
// Number::toString, strings with JSON.stringify's minimal escapes; lone surrogates,
// non-finite numbers and non-JSON values throw CanonicalError.

export const MAX_NESTING = 512;

export class CanonicalError extends Error {
  constructor(message) {
    super(message);
    this.name = "CanonicalError";
  }
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function str(text) {
  if (LONE_SURROGATE.test(text)) {
    throw new CanonicalError("a string holds a lone UTF-16 surrogate; it has no canonical form");
  }
  return JSON.stringify(text);
}

function nest(depth) {
  if (depth + 1 > MAX_NESTING) {
    throw new CanonicalError(`value is nested deeper than ${MAX_NESTING} arrays and objects`);
  }
  return depth + 1;
}

function write(value, out, depth) {
  if (value === null) out.push("null");
  else if (value === true || value === false) out.push(value ? "true" : "false");
  else if (typeof value === "string") out.push(str(value));
  else if (typeof value === "number") {
    if (!Number.isFinite(value)) throw new CanonicalError(`${value} has no canonical JSON (RFC 8785) form`);
    out.push(Object.is(value, -0) ? "0" : String(value));
  } else if (Array.isArray(value)) {
    const inner = nest(depth);
    out.push("[");
    value.forEach((item, i) => {
      if (i) out.push(",");
      write(item, out, inner);
    });
    out.push("]");
  } else if (typeof value === "object" && Object.getPrototypeOf(value) === Object.prototype) {
    const inner = nest(depth);
    const keys = Object.keys(value).sort();
    out.push("{");
    keys.forEach((key, i) => {
      if (i) out.push(",");
      out.push(str(key), ":");
      write(value[key], out, inner);
    });
    out.push("}");
  } else {
    throw new CanonicalError(`value of type ${typeof value} has no canonical JSON form`);
  }
}

/** RFC 8785 canonical JSON text of a JSON value. */
export function canonicalJson(value) {
  const out = [];
  write(value, out, 0);
  return out.join("");
}

/** RFC 8785 canonical UTF-8 bytes of a JSON value. */
export function canonicalBytes(value) {
  return new TextEncoder().encode(canonicalJson(value));
}
