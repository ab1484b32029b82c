from __future__ import annotations

import copy

import pytest

from runs.protocol.canonical import canonical_bytes, parse_json, sha256_hex
from runs.protocol.integrity import compute_integrity, hash_input, seal_bundle, verify_integrity
from tests.conftest import CONFORMANCE


def _bundle(engine: bool = True) -> dict:
    bundle = {
        "protocolVersion": "1.0.0",
        "run": {"id": "r1", "metadata": {"x": 1.5}},
        "trace": [{"id": "e1", "text": "héllo 😀"}],
        "artifacts": [],
        "ruleSets": [],
    }
    if engine:
        bundle["engine"] = {"revision": 0, "stepStatus": [], "gateState": [], "idempotency": []}
    return bundle


def test_hash_input_covers_exactly_the_protocol_parts() -> None:
    bundle = seal_bundle(_bundle())
    assert set(hash_input(bundle)) == {"run", "trace", "artifacts", "ruleSets", "engine"}
    assert set(hash_input(seal_bundle(_bundle(engine=False)))) == {"run", "trace", "artifacts", "ruleSets"}


def test_sign_and_verify() -> None:
    bundle = _bundle()
    signed = seal_bundle(bundle)
    assert "integrity" not in bundle
    assert signed["integrity"]["sha256"] == sha256_hex(canonical_bytes(hash_input(bundle)))
    assert compute_integrity(signed) == signed["integrity"]["sha256"]
    assert verify_integrity(signed) == "valid"
    assert verify_integrity(bundle) == "missing"


def test_protocol_version_and_integrity_are_not_covered() -> None:
    signed = seal_bundle(_bundle())
    signed["protocolVersion"] = "9.9.9"
    signed["somethingTopLevel"] = True
    assert verify_integrity(signed) == "valid"


@pytest.mark.parametrize(
    "tamper",
    [
        lambda b: b["run"].__setitem__("extra", None),  # unknown key: the reference would still accept
        lambda b: b["trace"][0].__setitem__("text", "hello"),
        lambda b: b.pop("engine"),
        lambda b: b["run"]["metadata"].__setitem__("x", 1.25),
    ],
)
def test_any_change_to_covered_json_is_a_mismatch(tamper) -> None:
    signed = seal_bundle(_bundle())
    tampered = copy.deepcopy(signed)
    tamper(tampered)
    assert verify_integrity(tampered) == "mismatch"


def test_reference_hash_reproduced() -> None:
    path = CONFORMANCE / "valid" / "linear_completed.json"
    if not path.exists():
        pytest.skip("conformance corpus absent")
    bundle = parse_json(path.read_bytes())
    assert compute_integrity(bundle) == "ab2fac52212207f3d9c2200902fbf39e9cf8b22096bbd4553ca2511e70aa99a9"
