from __future__ import annotations

import copy

import orjson
import pytest

from runs.protocol import migrations
from runs.protocol.bundle import check_bundle, check_bundle_file
from runs.protocol.canonical import canonical_bytes
from runs.protocol.errors import ErrorCode
from runs.protocol.integrity import seal_bundle
from tests.protocol.test_validate import _bundle


def _text(bundle: dict) -> bytes:
    return orjson.dumps(bundle, option=orjson.OPT_INDENT_2)


def test_valid_signed_bundle(tmp_path) -> None:
    signed = seal_bundle(_bundle())
    result = check_bundle(_text(signed))
    assert (result.ok, result.code, result.integrity, result.message) == (True, None, "valid", None)
    assert result.bundle == signed
    path = tmp_path / "b.json"
    path.write_bytes(canonical_bytes(signed))
    assert check_bundle_file(path).ok


@pytest.mark.parametrize(
    ("data", "code"),
    [
        (b"this is not json {", ErrorCode.INVALID_JSON),
        # an array is an object to JavaScript: the reference sends it to migration first
        (b"[1, 2]", ErrorCode.UNSUPPORTED_PROTOCOL_VERSION),
        (b"null", ErrorCode.INVALID_RUN_BUNDLE),
        (b'"text"', ErrorCode.INVALID_RUN_BUNDLE),
        (b"3", ErrorCode.INVALID_RUN_BUNDLE),
    ],
)
def test_unparsable(data: bytes, code: str) -> None:
    result = check_bundle(data)
    assert (result.ok, result.code, result.integrity, result.bundle) == (False, code, "unchecked", None)


def test_added_unknown_key_is_a_mismatch() -> None:
    signed = seal_bundle(_bundle())
    signed["run"]["addedByAttacker"] = "x"
    result = check_bundle(_text(signed))
    assert (result.code, result.integrity) == (ErrorCode.INTEGRITY_MISMATCH, "mismatch")


def test_missing_integrity() -> None:
    result = check_bundle(_text(_bundle()))
    assert (result.code, result.integrity) == (ErrorCode.MISSING_INTEGRITY, "missing")


def test_schema_before_integrity_and_integrity_before_structure() -> None:
    broken = seal_bundle(_bundle())
    broken["trace"][0]["ts"] = "yesterday"
    assert check_bundle(_text(broken)).code == ErrorCode.INVALID_RUN_BUNDLE
    cyclic = _bundle()
    cyclic["run"]["workflowSnapshot"]["edges"].append({"id": "e9", "from": "b", "to": "a"})
    tampered = seal_bundle(_bundle())
    tampered["run"] = cyclic["run"]
    assert check_bundle(_text(tampered)).code == ErrorCode.INTEGRITY_MISMATCH
    result = check_bundle(_text(seal_bundle(cyclic)))
    assert (result.code, result.integrity) == (ErrorCode.INVALID_WORKFLOW, "valid")


@pytest.mark.parametrize("version", [None, "2.0.0"])
def test_unsupported_protocol_version(version: str | None) -> None:
    bundle = seal_bundle(_bundle())
    if version is None:
        del bundle["protocolVersion"]
    else:
        bundle["protocolVersion"] = version
    assert check_bundle(_text(bundle)).code == ErrorCode.UNSUPPORTED_PROTOCOL_VERSION


@pytest.mark.parametrize("literal", [b"1e400", b'"\\ud800"'])
def test_values_without_canonical_form_are_refused(literal: bytes) -> None:
    bundle = seal_bundle(_bundle())
    bundle["run"]["metadata"] = {"v": "metadata-slot"}
    text = _text(bundle).replace(b'"metadata-slot"', literal)
    result = check_bundle(text)
    assert (result.ok, result.code) == (False, ErrorCode.INVALID_RUN_BUNDLE)
    assert "canonical" in result.message


def test_unsafe_integers_hash_and_parse_as_doubles() -> None:
    bundle = _bundle()
    bundle["run"]["metadata"] = {"big": 9007199254740993}
    # The reference parses 9007199254740993 as 9007199254740992 and hashes that.
    signed = seal_bundle(copy.deepcopy(bundle))
    result = check_bundle(_text(signed))
    assert result.ok, result.message
    assert result.bundle["run"]["metadata"]["big"] == 9007199254740992.0


def test_migrated_bundle_is_checked_and_re_signed() -> None:
    @migrations.register("0.9.0", "1.0.0")
    def identity(bundle: dict) -> dict:
        return bundle

    try:
        old = seal_bundle({**_bundle(), "protocolVersion": "0.9.0"})
        result = check_bundle(_text(old))
        assert (result.ok, result.migrated, result.integrity) == (True, True, "valid")
        assert result.bundle["protocolVersion"] == "1.0.0"
        old["trace"][0]["stepId"] = "b"
        assert check_bundle(_text(old)).code == ErrorCode.INTEGRITY_MISMATCH
    finally:
        migrations.unregister("0.9.0")
