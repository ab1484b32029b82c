"""Golden vectors of signed bundles (issue 25): deterministic, regenerate with

    .venv/bin/python tests/protocol/signing_vectors/generate.py

``base.json`` is the reference runtime's export ``conformance/valid/gates_full_flow_completed_no_engine.json``
(5 ``human_gate_resolved`` events), copied here so the vectors stand alone. Two Ed25519 keys
from fixed seeds (SHA-256 of a label): ``old`` (valid from 2026-01-01, revoked 2026-05-01, still
listed after the rotation) and ``new`` (valid from 2026-05-01). Files (canonical JSON, as the
server exports):

* ``plain.json`` -- the full bundle signed by ``new`` after the rotation;
* ``redacted.json`` -- the ``user`` redaction of it (runs.protocol.redaction), signed by ``new``;
* ``rotated.json`` -- signed by ``old`` before its revocation: still valid after the rotation;
* ``revoked.json`` -- signed by ``old`` after its revocation: ``KEY_REVOKED``;
* ``detached.json`` + ``detached.json.dsse.json`` -- the bundle untouched, the envelope beside it;
* ``jwks.json`` (both keys, no validity members) and ``validity.json`` (the sibling document);
* ``expected.json`` -- the verdict of each file with ``jwks.json`` + ``validity.json``.

Ed25519 signatures are deterministic (RFC 8032), so the same inputs give the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from runs.protocol.canonical import canonical_bytes  # noqa: E402
from runs.protocol.redaction import redact_bundle  # noqa: E402
from runs.protocol.signing import (  # noqa: E402
    KeyValidity,
    attach,
    build_jwks,
    build_validity,
    key_id,
    private_key_from_seed,
    sign_bundle_attestation,
    verify_attestations,
)

INSTANCE = "https://workbench.example"
WORKSPACE = "demo"
OLD_SEED = hashlib.sha256(b"workbench signing vector: old key").digest()
NEW_SEED = hashlib.sha256(b"workbench signing vector: new key").digest()
ROTATED_AT = "2026-05-01T00:00:00Z"
BEFORE_ROTATION = "2026-03-02T10:00:00Z"
AFTER_ROTATION = "2026-06-01T09:30:00.250Z"


def keys():
    return private_key_from_seed(OLD_SEED), private_key_from_seed(NEW_SEED)


def actors_of(bundle: dict) -> dict[str, str]:
    """Who resolved each gate: alice and bob in turn (what Event.actor holds on a server)."""
    gates = [e["id"] for e in bundle["trace"] if e["type"] == "human_gate_resolved"]
    return {event_id: ("user:alice", "user:bob")[i % 2] for i, event_id in enumerate(gates)}


def build() -> dict[str, bytes]:
    old, new = keys()
    base = json.loads((HERE / "base.json").read_text())
    redacted = redact_bundle(base, "user")

    def sign(bundle, key, at, exported_by="token:ci", redaction=None):
        return sign_bundle_attestation(
            bundle,
            private_key=key,
            instance=INSTANCE,
            workspace=WORKSPACE,
            exported_by=exported_by,
            at=at,
            redaction=redaction,
            actors=actors_of(bundle),
        )

    files = {
        "plain.json": attach(base, sign(base, new, AFTER_ROTATION)),
        "redacted.json": attach(redacted, sign(redacted, new, AFTER_ROTATION, "user:alice", "user")),
        "rotated.json": attach(base, sign(base, old, BEFORE_ROTATION)),
        "revoked.json": attach(base, sign(base, old, AFTER_ROTATION)),
        "detached.json": base,
        "detached.json.dsse.json": sign(base, new, AFTER_ROTATION, "user:bob"),
        "jwks.json": build_jwks([old, new]),
        "validity.json": build_validity(
            [
                KeyValidity(key_id(old), not_before="2026-01-01T00:00:00Z", revoked_at=ROTATED_AT),
                KeyValidity(key_id(new), not_before=ROTATED_AT),
            ]
        ),
    }
    expected = {}
    for name in ("plain.json", "redacted.json", "rotated.json", "revoked.json", "detached.json"):
        detached = files["detached.json.dsse.json"] if name == "detached.json" else None
        verdict = verify_attestations(
            files[name], files["jwks.json"], files["validity.json"], require_signature=True, detached=detached
        )
        expected[name] = {
            "detached": f"{name}.dsse.json" if detached else None,
            "ok": verdict.ok,
            "status": verdict.status,
            "code": verdict.code,
            "kid": verdict.kid,
            "exportedBy": verdict.exported_by,
            "at": verdict.at,
            "redaction": verdict.redaction,
            "approvals": [[a["eventId"], a["by"], a["decision"]] for a in verdict.approvals],
        }
    out = {name: canonical_bytes(doc) for name, doc in files.items()}
    out["expected.json"] = json.dumps(expected, indent=2).encode() + b"\n"
    return out


def main() -> None:
    for name, data in build().items():
        (HERE / name).write_bytes(data)
        print(f"wrote {name} ({len(data)} bytes)")


if __name__ == "__main__":
    main()
