"""workbench-verify with signatures (issue 25): lines, --json, exit status per verdict code."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

from runs.protocol.canonical import canonical_bytes
from runs.protocol.integrity import compute_integrity
from runs.protocol.verify_cli import SIGNATURE_EXIT, main
from tests.conftest import REPO

VECTORS = Path(__file__).resolve().parent / "signing_vectors"
KEYS = ["--keys", str(VECTORS / "jwks.json"), "--validity", str(VECTORS / "validity.json")]


def _run(capsys, *argv: str) -> tuple[int, str]:
    status = main(list(argv))
    return status, capsys.readouterr().out


def test_signed_bundle_line(capsys):
    path = str(VECTORS / "plain.json")
    status, out = _run(capsys, *KEYS, path)
    expected = json.loads((VECTORS / "expected.json").read_text())["plain.json"]
    assert status == 0
    assert out == (
        f"{path}: ok: integrity valid; signed by key {expected['kid']} (instance https://workbench.example, "
        "workspace demo); exported by token:ci at 2026-06-01T09:30:00.250Z; 5 approvals: "
        "user:alice approved intake, user:bob edited draft, user:alice approved review, "
        "user:bob approved review, user:alice approved review\n"
    )


def test_unsigned_bundle_never_reads_signed(capsys):
    path = str(VECTORS / "base.json")
    status, out = _run(capsys, *KEYS, path)
    assert (status, out) == (0, f"{path}: ok: integrity valid; unsigned (integrity hash only)\n")
    status, out = _run(capsys, *KEYS, "--require-signature", path)
    assert status == SIGNATURE_EXIT["UNSIGNED"] == 3
    assert out.startswith(f"{path}: FAILED UNSIGNED: integrity valid; unsigned")
    # no --keys: the old line, and a signed bundle is not called signed
    status, out = _run(capsys, path, str(VECTORS / "plain.json"))
    assert status == 0
    lines = out.splitlines()
    assert lines[0] == f"{path}: ok (integrity valid)"
    assert "signed by" not in lines[1] and lines[1].endswith("signature not checked (no keys)")


def test_json_fields(capsys):
    status, out = _run(capsys, "--json", *KEYS, str(VECTORS / "redacted.json"))
    line = json.loads(out)
    assert status == 0 and line["ok"] and line["code"] is None
    sig = line["signature"]
    assert (sig["status"], sig["workspace"], sig["exportedBy"], sig["redaction"]) == (
        "signed",
        "demo",
        "user:alice",
        "user",
    )
    assert len(sig["approvals"]) == 5 and {"eventId", "seq", "by", "at"} <= set(sig["approvals"][0])


def test_exit_status_per_failure(capsys, tmp_path):
    plain = json.loads((VECTORS / "plain.json").read_text())
    forged = copy.deepcopy(plain)
    forged["trace"][1]["decision"] = "rejected"
    forged["integrity"]["sha256"] = compute_integrity(forged)
    swapped = copy.deepcopy(plain)
    swapped["integrity"]["attestations"][0]["payloadType"] = "application/json"
    bad_sig = copy.deepcopy(plain)
    sig = bad_sig["integrity"]["attestations"][0]["signatures"][0]
    sig["sig"] = ("A" if sig["sig"][0] != "A" else "B") + sig["sig"][1:]
    cases = {"forged": (forged, 7), "swapped": (swapped, 9), "bad_sig": (bad_sig, 4)}
    for name, (bundle, want) in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_bytes(canonical_bytes(bundle))
        status, out = _run(capsys, *KEYS, str(path))
        assert status == want, (name, out)
        assert "signed by" not in out
    status, out = _run(capsys, *KEYS, str(VECTORS / "revoked.json"))
    assert status == 6 and "FAILED KEY_REVOKED" in out
    only_old = tmp_path / "jwks.json"
    jwks = json.loads((VECTORS / "jwks.json").read_text())
    only_old.write_text(json.dumps({"keys": jwks["keys"][:1]}))
    status, out = _run(capsys, "--keys", str(only_old), str(VECTORS / "plain.json"))
    assert status == 5 and "FAILED UNKNOWN_KEY" in out
    # an integrity failure stays status 1, before any signature
    stale = copy.deepcopy(plain)
    stale["trace"][1]["decision"] = "rejected"
    (tmp_path / "stale.json").write_bytes(canonical_bytes(stale))
    status, out = _run(capsys, *KEYS, str(tmp_path / "stale.json"))
    assert status == 1 and "FAILED INTEGRITY_MISMATCH" in out
    # several files: the first failure's status
    status, _ = _run(
        capsys,
        *KEYS,
        str(VECTORS / "plain.json"),
        str(VECTORS / "revoked.json"),
        str(tmp_path / "forged.json"),
    )
    assert status == 6


def test_edited_and_rehashed_bundle_fails_without_keys(capsys, tmp_path):
    """No key is needed to see that the attestation's subject is another content (issue 54)."""
    forged = json.loads((VECTORS / "plain.json").read_text())
    forged["trace"][1]["decision"] = "rejected"
    forged["integrity"]["sha256"] = compute_integrity(forged)
    path = tmp_path / "forged.json"
    path.write_bytes(canonical_bytes(forged))
    status, out = _run(capsys, str(path))
    assert status == SIGNATURE_EXIT["SUBJECT_DIGEST_MISMATCH"] == 7, out
    assert out.startswith(f"{path}: FAILED SUBJECT_DIGEST_MISMATCH") and "ok" not in out.split(":")[1]
    status, out = _run(capsys, "--json", str(path))
    line = json.loads(out)
    assert (status, line["ok"], line["code"]) == (7, False, "SUBJECT_DIGEST_MISMATCH")
    assert line["signature"]["status"] == "invalid"
    # the untouched bundle: its signature is not checked, and the line says so
    status, out = _run(capsys, str(VECTORS / "plain.json"))
    assert status == 0 and out.rstrip().endswith("signature not checked (no keys)")


def test_detached_envelope_and_usage(capsys, tmp_path):
    bundle = str(VECTORS / "detached.json")
    status, out = _run(capsys, *KEYS, "--detached", str(VECTORS / "detached.json.dsse.json"), bundle)
    assert status == 0 and "signed by key" in out and "exported by user:bob" in out
    (tmp_path / "junk.dsse.json").write_text("not json")
    status, out = _run(capsys, *KEYS, "--detached", str(tmp_path / "junk.dsse.json"), bundle)
    assert status == 4
    status, _ = _run(capsys, "--keys", str(tmp_path / "missing.json"), bundle)
    assert status == 2
    (tmp_path / "bad_jwks.json").write_text(
        '{"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "AA", "kid": "x"}]}'
    )
    status, _ = _run(capsys, "--keys", str(tmp_path / "bad_jwks.json"), bundle)
    assert status == 2


def test_help_documents_exit_codes_and_process_does_not_import_django():
    proc = subprocess.run(
        [sys.executable, "-m", "runs.protocol.verify_cli", "--help"], cwd=REPO, capture_output=True, text=True
    )
    assert (
        proc.returncode == 0
        and "SUBJECT_DIGEST_MISMATCH" in proc.stdout
        and "--require-signature" in proc.stdout
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-m",
            "runs.protocol.verify_cli",
            *KEYS,
            str(VECTORS / "plain.json"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and "signed by key" in proc.stdout
    imported = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line]
    assert "runs.protocol.signing" in imported
    assert not [m for m in imported if m == "django" or m.startswith("django.")]
