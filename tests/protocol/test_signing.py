"""Signed, attributed bundles (issue 25): envelope, keys, verdicts, forgeries, golden vectors,
and agreement with an independent Node verifier (bench/verify_signature.mjs)."""

from __future__ import annotations

import base64
import copy
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from runs.protocol.bundle import check_bundle
from runs.protocol.canonical import canonical_bytes
from runs.protocol.integrity import compute_integrity, seal_bundle
from runs.protocol.signing import (
    PAYLOAD_TYPE,
    KeySetError,
    attach,
    build_jwks,
    jwk_thumbprint,
    load_keys,
    pae,
    private_key_from_seed,
    public_jwk,
    sign_bundle_attestation,
    sign_envelope,
    verify_attestations,
)
from tests.conftest import REPO

VECTORS = Path(__file__).resolve().parent / "signing_vectors"
NODE = shutil.which("node")
KEY = private_key_from_seed(bytes(range(32)))
OTHER = private_key_from_seed(bytes(range(1, 33)))


def _load(name: str) -> dict:
    return json.loads((VECTORS / name).read_text())


def _keys() -> tuple[dict, dict]:
    return _load("jwks.json"), _load("validity.json")


def _signed(key=KEY, at="2026-06-01T00:00:00Z") -> dict:
    base = _load("base.json")
    actors = {e["id"]: "user:alice" for e in base["trace"] if e["type"] == "human_gate_resolved"}
    envelope = sign_bundle_attestation(
        base,
        private_key=key,
        instance="https://wb.example",
        workspace="demo",
        exported_by="token:ci",
        at=at,
        redaction=None,
        actors=actors,
    )
    return attach(base, envelope)


def _statement(bundle: dict) -> dict:
    return json.loads(base64.b64decode(bundle["integrity"]["attestations"][0]["payload"]))


def _replace_statement(bundle: dict, statement: dict) -> dict:
    """The bundle with its envelope's payload swapped for ``statement`` (the signature kept)."""
    out = copy.deepcopy(bundle)
    out["integrity"]["attestations"][0]["payload"] = base64.b64encode(canonical_bytes(statement)).decode()
    return out


def _verify(bundle: dict, **kw) -> str | None:
    return verify_attestations(bundle, build_jwks([KEY]), **kw).code


# ---------------------------------------------------------------- building blocks


def test_pae_is_the_dsse_v1_encoding():
    # the example of the DSSE protocol document
    assert pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )
    assert pae("t", "é".encode()) == b"DSSEv1 1 t 2 " + "é".encode()  # byte lengths


def test_kid_is_the_rfc_7638_thumbprint():
    # RFC 8037 appendix A.3: the thumbprint of the example Ed25519 key
    jwk = {"crv": "Ed25519", "kty": "OKP", "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}
    assert jwk_thumbprint(jwk) == "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
    seed = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
    assert public_jwk(private_key_from_seed(seed))["x"] == jwk["x"]
    assert public_jwk(private_key_from_seed(seed))["kid"] == "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"


def test_attestation_leaves_the_hash_and_the_hash_check_alone():
    bundle = _signed()
    assert (
        bundle["integrity"]["sha256"]
        == _load("base.json")["integrity"]["sha256"]
        == compute_integrity(bundle)
    )
    assert check_bundle(canonical_bytes(bundle)).ok
    envelope = bundle["integrity"]["attestations"][0]
    assert (
        envelope["payloadType"] == PAYLOAD_TYPE
        and envelope["signatures"][0]["keyid"] == public_jwk(KEY)["kid"]
    )
    statement = _statement(bundle)
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["subject"] == [
        {"name": f"runbundle:demo/{bundle['run']['id']}", "digest": {"sha256": bundle["integrity"]["sha256"]}}
    ]
    predicate = statement["predicate"]
    assert (predicate["workspace"], predicate["exportedBy"], predicate["redaction"]) == (
        "demo",
        "token:ci",
        None,
    )
    gates = [(i + 1, e) for i, e in enumerate(bundle["trace"]) if e["type"] == "human_gate_resolved"]
    assert [(a["seq"], a["eventId"], a["decision"], a["at"]) for a in predicate["approvals"]] == [
        (seq, e["id"], e["decision"], e["ts"]) for seq, e in gates
    ]


def test_signing_refuses_a_bundle_without_hash_or_with_another_redaction():
    base = _load("base.json")
    kw = dict(
        private_key=KEY,
        instance="i",
        workspace="w",
        exported_by="token:x",
        at="2026-01-01T00:00:00Z",
        actors={},
    )
    with pytest.raises(ValueError, match="integrity"):
        sign_bundle_attestation({k: v for k, v in base.items() if k != "integrity"}, redaction=None, **kw)
    with pytest.raises(ValueError, match="redaction"):
        sign_bundle_attestation(base, redaction="user", **kw)
    with pytest.raises(ValueError, match="not a human_gate_resolved"):
        sign_bundle_attestation(base, redaction=None, gate_indices=[0], **kw)


def test_gate_indices_hint_gives_the_same_envelope():
    base = _load("base.json")
    indices = [i for i, e in enumerate(base["trace"]) if e["type"] == "human_gate_resolved"]
    kw = dict(
        private_key=KEY, instance="i", workspace="w", exported_by="token:x", at="2026-01-01T00:00:00Z",
        redaction=None, actors={},
    )  # fmt: skip
    assert sign_bundle_attestation(base, gate_indices=indices, **kw) == sign_bundle_attestation(base, **kw)
    assert check_bundle(canonical_bytes(base)).gate_resolved == indices


def test_key_set_documents():
    jwks = build_jwks([KEY])
    assert set(jwks["keys"][0]) == {"kty", "crv", "x", "kid", "alg", "use"}
    bad_kid = {"keys": [{**jwks["keys"][0], "kid": "nope"}]}
    with pytest.raises(KeySetError, match="thumbprint"):
        load_keys(bad_kid)
    with pytest.raises(KeySetError):
        load_keys({"keys": [{**jwks["keys"][0], "d": "secret"}]})
    with pytest.raises(KeySetError):
        load_keys([])
    # other key types are skipped; validity may sit on the JWK or beside it: the strictest wins
    kid = jwks["keys"][0]["kid"]
    keys = load_keys(
        {
            "keys": [
                {"kty": "RSA", "n": "x", "e": "AQAB"},
                {**jwks["keys"][0], "revokedAt": "2026-05-01T00:00:00Z"},
            ]
        },
        {"keys": [{"kid": kid, "revokedAt": "2026-04-01T00:00:00Z"}]},
    )
    assert list(keys.keys) == [kid]
    assert keys.bounds[kid].revoked_at[0] == "2026-04-01T00:00:00Z"


@pytest.mark.parametrize("member", ["notBefore", "notAfter", "revokedAt"])
def test_validity_instant_that_is_no_timestamp_is_refused_when_loaded(member):
    # Was accepted with no instant, and a later bound or a verification then raised TypeError.
    jwks = build_jwks([KEY])
    kid = jwks["keys"][0]["kid"]
    validity = {"keys": [{"kid": kid, member: "next tuesday"}, {"kid": kid, member: "2026-01-01T00:00:00Z"}]}
    with pytest.raises(KeySetError, match=f"{member} is not an ISO 8601 date-time"):
        load_keys(jwks, validity)


# ---------------------------------------------------------------- verdicts and forgeries


def test_signed_unsigned_and_required():
    verdict = verify_attestations(_signed(), build_jwks([KEY]))
    assert (verdict.ok, verdict.status, verdict.code, verdict.kid) == (
        True,
        "signed",
        None,
        public_jwk(KEY)["kid"],
    )
    assert verdict.summary().startswith(
        f"signed by key {verdict.kid} (instance https://wb.example, workspace demo)"
    )
    assert "5 approvals: user:alice approved intake, user:alice edited draft" in verdict.summary()
    unsigned = _load("base.json")
    assert verify_attestations(unsigned, build_jwks([KEY])).summary() == "unsigned (integrity hash only)"
    assert verify_attestations(unsigned, build_jwks([KEY])).ok
    assert _verify(unsigned, require_signature=True) == "UNSIGNED"


def test_trace_byte_changed_and_hash_recomputed_is_a_subject_digest_mismatch():
    forged = _signed()
    forged["trace"][1]["decision"] = "rejected"  # one byte of a trace event ...
    forged["integrity"]["sha256"] = compute_integrity(forged)  # ... and a fresh hash, envelope kept
    assert check_bundle(canonical_bytes(forged)).ok  # the hash alone cannot tell
    assert _verify(forged) == "SUBJECT_DIGEST_MISMATCH"
    # without a fresh hash the content no longer matches its own hash
    stale = _signed()
    stale["trace"][1]["decision"] = "rejected"
    assert _verify(stale) == "INTEGRITY_MISMATCH"


def test_changed_approver_is_a_signature_failure():
    bundle = _signed()
    statement = _statement(bundle)
    statement["predicate"]["approvals"][0]["by"] = "user:mallory"
    assert _verify(_replace_statement(bundle, statement)) == "SIGNATURE_INVALID"


def test_unknown_key_revoked_key_and_validity_window():
    assert _verify(_signed(key=OTHER)) == "UNKNOWN_KEY"
    kid = public_jwk(KEY)["kid"]
    jwks = build_jwks([KEY])
    bundle = _signed(at="2026-06-01T00:00:00Z")
    revoked = {"keys": [{"kid": kid, "revokedAt": "2026-05-01T00:00:00Z"}]}
    assert verify_attestations(bundle, jwks, revoked).code == "KEY_REVOKED"
    later = {"keys": [{"kid": kid, "revokedAt": "2026-06-01T00:00:00.001Z"}]}
    assert verify_attestations(bundle, jwks, later).ok  # signed before the revocation
    at_the_instant = {"keys": [{"kid": kid, "revokedAt": "2026-06-01T00:00:00Z"}]}
    assert verify_attestations(bundle, jwks, at_the_instant).code == "KEY_REVOKED"
    early = {"keys": [{"kid": kid, "notBefore": "2026-07-01T00:00:00Z"}]}
    assert verify_attestations(bundle, jwks, early).code == "KEY_REVOKED"
    expired = {"keys": [{"kid": kid, "notAfter": "2026-05-31T00:00:00Z"}]}
    assert verify_attestations(bundle, jwks, expired).code == "KEY_REVOKED"


def test_payload_type_swapped_or_relabelled():
    bundle = _signed()
    swapped = copy.deepcopy(bundle)
    swapped["integrity"]["attestations"][0]["payloadType"] = "application/json"
    assert _verify(swapped) == "PAYLOAD_TYPE_MISMATCH"
    # signed under another type, relabelled as in-toto: the type is inside the signed bytes
    other = sign_envelope(
        base64.b64decode(bundle["integrity"]["attestations"][0]["payload"]), KEY, "text/plain"
    )
    other["payloadType"] = PAYLOAD_TYPE
    assert _verify(attach(_load("base.json"), other)) == "SIGNATURE_INVALID"


def test_approvals_cross_checked_against_the_trace():
    base = _load("base.json")

    def resigned(edit) -> dict:
        bundle = _signed()
        statement = _statement(bundle)
        edit(statement["predicate"]["approvals"])
        return attach(base, sign_envelope(canonical_bytes(statement), KEY))

    assert _verify(resigned(lambda a: a.pop())) == "APPROVAL_MISMATCH"  # an unapproved gate
    assert _verify(resigned(lambda a: a[0].update(decision="rejected"))) == "APPROVAL_MISMATCH"
    assert _verify(resigned(lambda a: a[0].update(eventId="evt_nope"))) == "APPROVAL_MISMATCH"
    assert _verify(resigned(lambda a: a[0].update(seq=a[0]["seq"] + 1))) == "APPROVAL_MISMATCH"
    assert _verify(resigned(lambda a: a.append(dict(a[0])))) == "APPROVAL_MISMATCH"  # twice
    assert _verify(resigned(lambda a: None)) is None


def test_detached_envelope():
    bundle = _signed()
    envelope = bundle["integrity"]["attestations"][0]
    base = _load("base.json")
    assert verify_attestations(base, build_jwks([KEY]), detached=envelope).signed
    assert verify_attestations(base, build_jwks([KEY]), detached={"payloadType": PAYLOAD_TYPE}).code == (
        "SIGNATURE_INVALID"
    )
    # a detached envelope of another content
    other = copy.deepcopy(base)
    other["run"]["tags"] = ["other"]
    other = seal_bundle(other)
    assert verify_attestations(other, build_jwks([KEY]), detached=envelope).code == "SUBJECT_DIGEST_MISMATCH"


def test_statement_must_be_ours_and_name_this_run():
    bundle = _signed()
    statement = _statement(bundle)
    statement["predicateType"] = "https://slsa.dev/provenance/v1"
    assert _verify(attach(bundle, sign_envelope(canonical_bytes(statement), KEY))) == "STATEMENT_INVALID"
    statement = _statement(bundle)
    statement["predicate"]["at"] = "yesterday"  # a string, but no date-time: was a TypeError
    revoked = {"keys": [{"kid": public_jwk(KEY)["kid"], "revokedAt": "2026-05-01T00:00:00Z"}]}
    resigned = attach(bundle, sign_envelope(canonical_bytes(statement), KEY))
    assert verify_attestations(resigned, build_jwks([KEY]), revoked).code == "STATEMENT_INVALID"
    assert _verify(resigned) == "STATEMENT_INVALID"
    statement = _statement(bundle)
    statement["subject"][0]["name"] = "runbundle:demo/run_other"
    assert (
        _verify(attach(bundle, sign_envelope(canonical_bytes(statement), KEY))) == "SUBJECT_DIGEST_MISMATCH"
    )


# ---------------------------------------------------------------- golden vectors and Node


def test_golden_vectors_are_reproducible_and_verify_as_expected():
    import importlib.util

    spec = importlib.util.spec_from_file_location("signing_vectors_generate", VECTORS / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    built = module.build()
    for name, data in built.items():
        assert (VECTORS / name).read_bytes() == data, name
    jwks, validity = _keys()
    for name, want in _load("expected.json").items():
        detached = _load(want["detached"]) if want["detached"] else None
        verdict = verify_attestations(_load(name), jwks, validity, require_signature=True, detached=detached)
        assert (verdict.ok, verdict.status, verdict.code, verdict.kid) == (
            want["ok"], want["status"], want["code"], want["kid"],
        ), name  # fmt: skip
        assert [[a["eventId"], a["by"], a["decision"]] for a in verdict.approvals] == want["approvals"]
        result = check_bundle((VECTORS / name).read_bytes())
        assert result.ok and result.integrity == "valid", name


def _node(*args: str) -> subprocess.CompletedProcess:
    if NODE is None:
        pytest.skip("node is not installed")
    return subprocess.run([NODE, *args], capture_output=True, text=True, cwd=REPO, timeout=60)


def _forgeries(tmp_path: Path) -> list[tuple[Path, dict]]:
    """(file, keyword arguments of verify_attestations) of forged or odd bundles."""
    jwks, validity = _keys()
    plain = _load("plain.json")
    out: list[tuple[dict, dict]] = []
    forged = copy.deepcopy(plain)
    forged["trace"][1]["decision"] = "rejected"
    forged["integrity"]["sha256"] = compute_integrity(forged)
    out.append((forged, {}))
    statement = _statement(plain)
    statement["predicate"]["approvals"][0]["by"] = "user:mallory"
    out.append((_replace_statement(plain, statement), {}))
    swapped = copy.deepcopy(plain)
    swapped["integrity"]["attestations"][0]["payloadType"] = "application/json"
    out.append((swapped, {}))
    out.append((attach(_load("base.json"), _signed(key=OTHER)["integrity"]["attestations"][0]), {}))
    out.append((_load("base.json"), {"require_signature": True}))
    out.append((_load("base.json"), {}))
    files = []
    for i, (bundle, kw) in enumerate(out):
        path = tmp_path / f"forged{i}.json"
        path.write_bytes(canonical_bytes(bundle))
        files.append((path, kw))
    return files


def _node_verdict(path: Path, *, detached: Path | None = None, require: bool = False) -> dict:
    args = [str(REPO / "bench" / "verify_signature.mjs"), str(path), "--keys", str(VECTORS / "jwks.json")]
    args += ["--validity", str(VECTORS / "validity.json")]
    if detached:
        args += ["--detached", str(detached)]
    if require:
        args.append("--require-signature")
    proc = _node(*args)
    report = json.loads(proc.stdout)
    assert proc.returncode == (0 if report["ok"] else 1), proc.stderr
    return report


def test_node_verifier_agrees_on_vectors_and_forgeries(tmp_path):
    jwks, validity = _keys()
    cases: list[tuple[Path, Path | None, bool]] = []
    for name, want in _load("expected.json").items():
        cases.append((VECTORS / name, VECTORS / want["detached"] if want["detached"] else None, True))
    cases += [(path, None, kw.get("require_signature", False)) for path, kw in _forgeries(tmp_path)]
    codes = set()
    for path, detached, require in cases:
        bundle = json.loads(path.read_text())
        verdict = verify_attestations(
            bundle,
            jwks,
            validity,
            require_signature=require,
            detached=_load(detached.name) if detached else None,
        )
        node = _node_verdict(path, detached=detached, require=require)
        assert (node["ok"], node["status"], node["code"], node["kid"]) == (
            verdict.ok, verdict.status, verdict.code, verdict.kid,
        ), path.name  # fmt: skip
        if verdict.signed:
            assert node["exportedBy"] == verdict.exported_by and node["approvals"] == verdict.approvals
        codes.add(verdict.code)
    assert codes >= {
        None, "KEY_REVOKED", "SUBJECT_DIGEST_MISMATCH", "SIGNATURE_INVALID", "PAYLOAD_TYPE_MISMATCH",
        "UNKNOWN_KEY", "UNSIGNED",
    }  # fmt: skip


def test_reference_style_verifier_still_finds_the_signed_bundles_valid():
    for name in ("plain.json", "redacted.json", "rotated.json"):
        proc = _node(str(REPO / "bench" / "verify.mjs"), str(VECTORS / name))
        report = json.loads(proc.stdout)
        assert report["integrity"] == "valid", name
        assert report["sha256"] == _load(name)["integrity"]["sha256"]
