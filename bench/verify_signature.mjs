// Independent verifier of signed run bundles (issue 25), written from the specifications alone:
// DSSE v1.0.2 (envelope + PAE), in-toto Statement v1, RFC 8037 (Ed25519 JWK), RFC 7638 (thumbprint).
// No npm packages: node:crypto only. The integrity hash is computed as bench/verify.mjs does.
//
// Usage: node bench/verify_signature.mjs BUNDLE --keys JWKS [--validity FILE] [--detached FILE]
//        [--require-signature]
// Prints one JSON line {integrity, ok, status, code, kid, exportedBy, at, redaction, approvals}
// and exits 0 when ok, 1 otherwise.
import { readFileSync } from "node:fs";
import { createHash, createPublicKey, verify } from "node:crypto";

const PAYLOAD_TYPE = "application/vnd.in-toto+json";
const STATEMENT_TYPE = "https://in-toto.io/Statement/v1";
const PREDICATE_TYPE = "https://workbench.dev/attestations/run-bundle/v1";

// Canonical JSON, as in bench/verify.mjs.
function canonical(value) {
  if (value === null || typeof value !== "object") {
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) {
    return "[" + value.map((v) => (v === undefined ? "null" : canonical(v))).join(",") + "]";
  }
  const keys = Object.keys(value).filter((k) => value[k] !== undefined).sort();
  return "{" + keys.map((k) => JSON.stringify(k) + ":" + canonical(value[k])).join(",") + "}";
}

function integrityOf(bundle) {
  const input = { run: bundle.run, trace: bundle.trace, artifacts: bundle.artifacts, ruleSets: bundle.ruleSets };
  if (bundle.engine !== undefined) input.engine = bundle.engine;
  return createHash("sha256").update(canonical(input), "utf8").digest("hex");
}

// DSSE: PAE(type, body) = "DSSEv1" SP LEN(type) SP type SP LEN(body) SP body (LEN in bytes).
function pae(type, body) {
  const t = Buffer.from(type, "utf8");
  return Buffer.concat([
    Buffer.from(`DSSEv1 ${t.length} `, "utf8"),
    t,
    Buffer.from(` ${body.length} `, "utf8"),
    body,
  ]);
}

// RFC 7638: SHA-256 over the required members in lexicographic order, no whitespace.
function thumbprint(jwk) {
  const text = `{"crv":${JSON.stringify(jwk.crv)},"kty":${JSON.stringify(jwk.kty)},"x":${JSON.stringify(jwk.x)}}`;
  return createHash("sha256").update(text, "utf8").digest("base64url");
}

function fail(code, message) {
  const e = new Error(message);
  e.code = code;
  return e;
}

function loadKeys(jwks, validity) {
  const keys = new Map();
  const bounds = new Map();
  const merge = (kid, entry) => {
    const b = bounds.get(kid) || {};
    const stricter = (name, pick) => {
      if (typeof entry[name] !== "string") return;
      const t = Date.parse(entry[name]);
      b[name] = b[name] === undefined ? t : pick(b[name], t);
    };
    stricter("notBefore", Math.max);
    stricter("notAfter", Math.min);
    stricter("revokedAt", Math.min);
    bounds.set(kid, b);
  };
  for (const jwk of jwks.keys) {
    if (jwk.kty !== "OKP" || jwk.crv !== "Ed25519") continue;
    const kid = thumbprint(jwk);
    if (jwk.kid !== undefined && jwk.kid !== kid) throw new Error(`kid ${jwk.kid} is not the thumbprint ${kid}`);
    keys.set(kid, createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: jwk.x }, format: "jwk" }));
    merge(kid, jwk);
  }
  if (validity) for (const entry of validity.keys) merge(entry.kid, entry);
  return { keys, bounds };
}

function openEnvelope(env, keySet) {
  if (env === null || typeof env !== "object" || Array.isArray(env)) throw fail("SIGNATURE_INVALID", "not an object");
  if (env.payloadType !== PAYLOAD_TYPE) throw fail("PAYLOAD_TYPE_MISMATCH", `payloadType ${env.payloadType}`);
  if (typeof env.payload !== "string") throw fail("SIGNATURE_INVALID", "payload is not a string");
  const payload = Buffer.from(env.payload, "base64");
  if (!Array.isArray(env.signatures) || env.signatures.length === 0) throw fail("SIGNATURE_INVALID", "no signatures");
  const message = pae(env.payloadType, payload);
  let known = null;
  for (const s of env.signatures) {
    if (s === null || typeof s !== "object") throw fail("SIGNATURE_INVALID", "signature is not an object");
    const candidates = keySet.keys.has(s.keyid) ? [s.keyid] : s.keyid ? [] : [...keySet.keys.keys()];
    if (typeof s.sig !== "string") throw fail("SIGNATURE_INVALID", "sig is not a string");
    const sig = Buffer.from(s.sig, "base64");
    for (const kid of candidates) {
      known = known || kid;
      if (verify(null, message, keySet.keys.get(kid), sig)) {
        // only now is the payload read
        let statement;
        try {
          statement = JSON.parse(payload.toString("utf8"));
        } catch {
          throw Object.assign(fail("STATEMENT_INVALID", "payload is not JSON"), { kid });
        }
        return { kid, statement };
      }
    }
  }
  if (known === null) throw fail("UNKNOWN_KEY", "no signature by a known key");
  throw Object.assign(fail("SIGNATURE_INVALID", "no signature verifies"), { kid: known });
}

function checkOne(bundle, env, keySet, declared, result) {
  const { kid, statement } = openEnvelope(env, keySet);
  result.kid = kid;
  const withKid = (code, message) => Object.assign(fail(code, message), { kid });
  if (!statement || statement._type !== STATEMENT_TYPE || statement.predicateType !== PREDICATE_TYPE)
    throw withKid("STATEMENT_INVALID", "not our in-toto statement");
  const p = statement.predicate;
  if (!Array.isArray(statement.subject) || statement.subject.length !== 1 || !p || !Array.isArray(p.approvals))
    throw withKid("STATEMENT_INVALID", "statement shape");
  Object.assign(result, { exportedBy: p.exportedBy, at: p.at, redaction: p.redaction ?? null, approvals: p.approvals });
  const at = Date.parse(p.at);
  if (Number.isNaN(at)) throw withKid("STATEMENT_INVALID", "predicate.at");
  const b = keySet.bounds.get(kid) || {};
  if (b.revokedAt !== undefined && at >= b.revokedAt) throw withKid("KEY_REVOKED", "revoked before the export");
  if (b.notBefore !== undefined && at < b.notBefore) throw withKid("KEY_REVOKED", "not yet valid");
  if (b.notAfter !== undefined && at > b.notAfter) throw withKid("KEY_REVOKED", "expired");
  const subject = statement.subject[0];
  if (!subject || !subject.digest || subject.digest.sha256 !== declared) throw withKid("SUBJECT_DIGEST_MISMATCH", "digest");
  if (subject.name !== `runbundle:${p.workspace}/${bundle.run && bundle.run.id}`) throw withKid("SUBJECT_DIGEST_MISMATCH", "name");
  const metadata = bundle.run && bundle.run.metadata;
  const note = metadata && metadata["workbench.redaction"];
  const noted = note && typeof note === "object" ? note.policy ?? null : null;
  if ((p.redaction ?? null) !== noted) throw withKid("STATEMENT_INVALID", "redaction");
  const trace = bundle.trace;
  const covered = new Set();
  for (const a of p.approvals) {
    const event = Number.isInteger(a.seq) && a.seq >= 1 && a.seq <= trace.length ? trace[a.seq - 1] : undefined;
    if (!event || event.id !== a.eventId || event.type !== "human_gate_resolved")
      throw withKid("APPROVAL_MISMATCH", `no gate resolution ${a.eventId} at seq ${a.seq}`);
    if (a.stepId !== event.stepId || a.gate !== event.gate || a.decision !== event.decision || a.at !== event.ts)
      throw withKid("APPROVAL_MISMATCH", `approval differs from event ${event.id}`);
    if (!(a.by === null || typeof a.by === "string")) throw withKid("APPROVAL_MISMATCH", "by");
    // a machine decision's delegation policy: an object naming the approval's judge
    if (a.policy !== undefined && (a.policy === null || typeof a.policy !== "object" || Array.isArray(a.policy) || a.policy.judge !== a.by))
      throw withKid("APPROVAL_MISMATCH", "policy");
    if (covered.has(a.seq)) throw withKid("APPROVAL_MISMATCH", "duplicate");
    covered.add(a.seq);
  }
  trace.forEach((e, i) => {
    if (e.type === "human_gate_resolved" && !covered.has(i + 1)) throw withKid("APPROVAL_MISMATCH", `unapproved ${e.id}`);
  });
}

function main(argv) {
  const opts = { files: [] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--keys" || a === "--validity" || a === "--detached") opts[a.slice(2)] = argv[++i];
    else if (a === "--require-signature") opts.require = true;
    else opts.files.push(a);
  }
  const bundle = JSON.parse(readFileSync(opts.files[0], "utf8"));
  const readJson = (f) => JSON.parse(readFileSync(f, "utf8"));
  const keySet = loadKeys(readJson(opts.keys), opts.validity ? readJson(opts.validity) : null);
  let detached = null;
  if (opts.detached) {
    try {
      detached = readJson(opts.detached);
    } catch {
      detached = "(not JSON)";
    }
  }
  const digest = integrityOf(bundle);
  const declared = bundle.integrity && bundle.integrity.sha256;
  const integrity = declared === undefined ? "missing" : declared === digest ? "valid" : "mismatch";
  const result = { integrity, ok: false, status: "invalid", code: null, kid: null, exportedBy: null, at: null, redaction: null, approvals: [] };
  if (integrity !== "valid") {
    result.code = integrity === "missing" ? "MISSING_INTEGRITY" : "INTEGRITY_MISMATCH";
    return result;
  }
  let envelopes = bundle.integrity.attestations ?? [];
  if (!Array.isArray(envelopes)) envelopes = [envelopes];
  if (detached !== null) envelopes = [detached, ...envelopes];
  if (envelopes.length === 0) {
    Object.assign(result, { status: "unsigned", ok: !opts.require, code: opts.require ? "UNSIGNED" : null });
    return result;
  }
  let first = null;
  for (const env of envelopes) {
    const r = { ...result };
    try {
      checkOne(bundle, env, keySet, declared, r);
    } catch (e) {
      if (!e.code) throw e;
      return { ...r, kid: e.kid ?? r.kid, code: e.code, message: e.message };
    }
    first = first || { ...r, ok: true, status: "signed" };
  }
  return first;
}

const result = main(process.argv.slice(2));
console.log(JSON.stringify(result));
process.exitCode = result.ok ? 0 : 1;
