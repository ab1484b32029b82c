"""Every conformance sample of the reference behaves as its manifest says."""

from __future__ import annotations

import json

import pytest

from runs.protocol.bundle import check_bundle_file
from runs.protocol.canonical import canonical_bytes, parse_json
from runs.protocol.integrity import hash_input
from tests.conftest import CONFORMANCE

if not (CONFORMANCE / "manifest.json").exists():
    pytest.skip(
        f"conformance corpus not found at {CONFORMANCE} (set WORKBENCH_CONFORMANCE_DIR)",
        allow_module_level=True,
    )

MANIFEST = json.loads((CONFORMANCE / "manifest.json").read_text())
ENTRIES = {e["file"]: e for e in MANIFEST["files"] if (CONFORMANCE / e["file"]).exists()}
BUNDLES = sorted(f for f, e in ENTRIES.items() if e["category"] in ("valid", "tampered", "invalid"))
CANONICAL = sorted(f for f, e in ENTRIES.items() if e["category"] == "canonical")
HASH_INPUTS = sorted(p.name for p in (CONFORMANCE / "expected").glob("*.hash_input.canonical.json"))


def expected_code(entry: dict) -> str | None:
    code = entry.get("expectedErrorCode")
    if entry["category"] == "tampered" and code is None:
        # The reference accepts some tampering (it drops unknown keys before hashing);
        # we verify the JSON as received, so any tampered file fails integrity here.
        assert entry.get("expectedVerify") is False
        return "INTEGRITY_MISMATCH"
    return code


def test_corpus_is_present() -> None:
    assert {ENTRIES[f]["category"] for f in BUNDLES} == {"valid", "tampered", "invalid"}


@pytest.mark.parametrize("name", BUNDLES)
def test_bundle_check_matches_manifest(name: str) -> None:
    entry = ENTRIES[name]
    result = check_bundle_file(CONFORMANCE / name)
    code = expected_code(entry)
    assert result.code == code, result.message
    assert result.ok is (code is None)
    if entry["category"] == "valid":
        assert result.integrity == "valid"
    if code in ("INTEGRITY_MISMATCH", "MISSING_INTEGRITY"):
        assert result.integrity == {"INTEGRITY_MISMATCH": "mismatch", "MISSING_INTEGRITY": "missing"}[code]


@pytest.mark.parametrize("name", CANONICAL)
def test_canonical_serialization_is_byte_identical(name: str) -> None:
    source = CONFORMANCE / name.replace(".canonical.json", ".json")
    assert canonical_bytes(parse_json(source.read_bytes())) == (CONFORMANCE / name).read_bytes()


@pytest.mark.parametrize("name", HASH_INPUTS)
def test_hash_input_is_byte_identical(name: str) -> None:
    source = CONFORMANCE / "valid" / name.replace(".hash_input.canonical.json", ".json")
    expected = (CONFORMANCE / "expected" / name).read_bytes()
    assert canonical_bytes(hash_input(parse_json(source.read_bytes()))) == expected
