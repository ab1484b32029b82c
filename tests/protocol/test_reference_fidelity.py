"""Bundles the reference runtime accepts or refuses, and with which code (PROTOCOL.md).

Each case changes one thing in a real export of the reference and re-signs it, so the only
question left is the one the case asks.
"""

from __future__ import annotations

import copy
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runs.protocol.bundle import check_bundle
from runs.protocol.canonical import MAX_NESTING, canonical_bytes, wire_bytes
from runs.protocol.errors import ErrorCode
from runs.protocol.integrity import seal_bundle
from runs.protocol.timestamps import epoch_ms, format_epoch_ms, to_datetime, to_utc_iso

HEX = "ab" * 32
RB = ErrorCode.INVALID_RUN_BUNDLE


@pytest.fixture
def base(conformance_dir) -> dict:
    return json.loads((conformance_dir / "valid" / "linear_completed.json").read_text())


def _nest(depth: int):
    value: object = "leaf"
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


def _first_written(bundle: dict) -> tuple[dict, dict]:
    event = next(e for e in bundle["trace"] if e["type"] == "artifact_written")
    return event, bundle["artifacts"][0]


def _check(bundle: dict, *, sign: bool = True):
    return check_bundle(wire_bytes(seal_bundle(bundle) if sign else bundle))


def _event(bundle: dict, **fields) -> dict:
    event = {"id": "evt_extra", "runId": bundle["run"]["id"], "ts": "2026-04-01T12:00:00.000Z", **fields}
    bundle["trace"].append(event)
    return event


# ------------------------------------------------------------------ accepted


@pytest.mark.parametrize("depth", [256, 300, MAX_NESTING - 8])
def test_deeply_nested_artifact_data_is_accepted(base, depth):
    _, artifact = _first_written(base)
    artifact["data"] = _nest(depth)
    result = _check(base)
    assert result.ok, result.message


def test_nesting_beyond_the_stated_limit_is_a_coded_error(base):
    _, artifact = _first_written(base)
    artifact["data"] = "@@"
    text = wire_bytes(seal_bundle(base)).replace(b'"@@"', b"[" * 2000 + b"]" * 2000)
    result = check_bundle(text)
    assert (result.ok, result.code) == (False, RB)
    assert f"nested deeper than {MAX_NESTING}" in result.message


@pytest.mark.parametrize(
    "pointer",
    [
        {"kind": "inline", "sha256": HEX},  # legacy inline pointer
        {"kind": "inline", "sha256": "not-a-digest"},  # the alias was never constrained
        {"kind": "inline", "payloadHash": HEX, "byteLength": 12},
        {"kind": "inline", "payloadHash": HEX, "sha256": HEX},
        {"kind": "inline", "payloadHash": HEX, "sha256": ""},
        {"kind": "external", "ref": "s3://bucket/key", "payloadHash": HEX, "byteLength": 5},
    ],
)
def test_artifact_pointers_of_every_generation_are_accepted(base, pointer):
    event, artifact = _first_written(base)
    artifact["pointer"] = pointer
    event["artifact"]["pointer"] = copy.deepcopy(pointer)
    result = _check(base)
    assert result.ok, result.message


@pytest.mark.parametrize(
    "pointer",
    [
        {"kind": "external"},
        {"kind": "external", "ref": ""},
        {"kind": "inline", "payloadHash": "AB" * 32},
        {"kind": "inline", "payloadHash": HEX, "sha256": "cd" * 32},
        {"kind": "inline", "byteLength": 2**53},
        {"kind": "pasted"},
    ],
)
def test_bad_pointers_are_refused(base, pointer):
    _first_written(base)[1]["pointer"] = pointer
    assert _check(base).code == RB


ACCEPTED_TIMESTAMPS = [
    "2026-04-01T12:00:00+05:30",
    "2026-04-01T12:00:00-00:00",
    "2026-04-01T12:00:00+23:59",
    "2026-04-01T12:00:00.1Z",
    "2026-04-01T12:00:00.12345Z",
    "2026-04-01T12:00:00.123456789Z",
    "2026-04-01T12:00Z",
    "2026-04-01T12:00-03:00",
    "2024-02-29T00:00:00Z",
    "2000-02-29T00:00:00Z",
    "0000-01-01T00:00:00Z",
    "0000-02-29T12:00:00.5+00:01",
]


@pytest.mark.parametrize("ts", ACCEPTED_TIMESTAMPS)
def test_every_timestamp_form_of_the_reference_is_accepted(base, ts):
    base["run"]["startedAt"] = ts
    base["run"]["endedAt"] = ts
    base["trace"][0]["ts"] = ts
    _first_written(base)[1]["createdAt"] = ts
    result = _check(base)
    assert result.ok, result.message


@pytest.mark.parametrize(
    "ts",
    [
        "2023-02-29T00:00:00Z",
        "1900-02-29T00:00:00Z",
        "2026-04-31T00:00:00Z",
        "2026-04-01T24:00:00Z",
        "2026-04-01T12:00:60Z",
        "2026-04-01T12:00:00+24:00",
        "2026-04-01T12:00:00+0530",
        "2026-04-01T12:00:00.Z",
        "2026-04-01T12:00:00z",
        "2026-04-01 12:00:00Z",
        "2026-04-01T12:00:00",
    ],
)
def test_timestamps_the_reference_refuses(base, ts):
    base["trace"][0]["ts"] = ts
    assert _check(base).code == RB


def test_run_forked_event_may_list_parents_in_another_order(base):
    _event(base, type="run_forked", parentRunId="parent_a", parentRunIds=["parent_b", "parent_a"])
    result = _check(base)
    assert result.ok, result.message


def test_run_context_parent_lists_must_agree(base):
    base["run"]["context"] = {"parentRunId": "parent_a", "parentRunIds": ["parent_b", "parent_a"]}
    assert _check(base).code == RB


def test_events_may_share_ids_and_name_the_empty_step(base):
    base["trace"][1]["id"] = base["trace"][0]["id"]
    _event(base, type="tool_call", name="lookup", stepId="")
    result = _check(base)
    assert result.ok, result.message


# ------------------------------------------------------------------ precedence


@pytest.mark.parametrize(
    ("change", "code"),
    [
        (lambda b: b["integrity"].update(sha256=""), RB),
        (lambda b: b.update(integrity={"sha256": 5}), RB),
    ],
)
def test_integrity_member_is_schema_checked_first(base, change, code):
    signed = seal_bundle(base)
    change(signed)
    assert check_bundle(wire_bytes(signed)).code == code


def test_empty_run_id_is_a_schema_error_not_a_mismatch(base):
    base["run"]["id"] = ""
    for event in base["trace"]:
        event["runId"] = ""
    assert _check(base).code == RB


@pytest.mark.parametrize("tokens", [2**53, 2**53 + 2, 2**64])
def test_token_counts_beyond_safe_integers_are_schema_errors(base, tokens):
    _event(base, type="model_io", direction="response", usage={"inputTokens": tokens})
    result = _check(base)
    assert (result.code, result.integrity) == (RB, "unchecked")


def test_largest_safe_token_count_is_accepted(base):
    _event(base, type="model_io", direction="response", usage={"inputTokens": 2**53 - 1})
    assert _check(base).ok


@pytest.mark.parametrize(
    ("text", "code"),
    [
        (b"[]", ErrorCode.UNSUPPORTED_PROTOCOL_VERSION),
        (b'[{"protocolVersion": "1.0.0"}]', ErrorCode.UNSUPPORTED_PROTOCOL_VERSION),
        (b"null", RB),
        (b"false", RB),
        (b"0", RB),
        (b'""', RB),
        (b'{"protocolVersion": 1}', ErrorCode.UNSUPPORTED_PROTOCOL_VERSION),
    ],
)
def test_non_objects_and_migration(text, code):
    assert check_bundle(text).code == code


@pytest.mark.parametrize(
    "path",
    [
        ("run", "workflowId"),
        ("run", "workflowSnapshot", "id"),
        ("run", "workflowSnapshot", "steps", 0, "id"),
        ("trace", 0, "id"),
        ("artifacts", 0, "typeId"),
        ("ruleSets", 0, "ruleSchemaId"),
    ],
)
def test_identifiers_must_be_non_empty(base, path):
    target = base
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = ""
    assert _check(base).code == RB


# ------------------------------------------------------------------ import-stage invariants


@pytest.mark.parametrize("member", ["stepStatus", "gateState"])
def test_engine_maps_naming_a_step_twice_are_refused(base, member):
    base["engine"][member].append(copy.deepcopy(base["engine"][member][0]))
    result = _check(base)
    assert (result.code, result.integrity) == (RB, "valid")
    assert "duplicate key" in result.message


def test_idempotency_map_naming_a_key_twice_is_refused(base):
    ref = {"artifactKey": "raw", "version": 1}
    base["engine"]["idempotency"] = [["k", ref], ["k", copy.deepcopy(ref)]]
    assert _check(base).code == RB


def test_rule_ids_repeated_inside_a_rule_set_are_refused(base):
    rules = base["ruleSets"][0]["rules"]
    rules.append(copy.deepcopy(rules[0]))
    assert _check(base).code == RB


# ------------------------------------------------------------------ timestamps and JSON text


def test_timestamp_instants():
    assert to_utc_iso("2026-04-01T12:00:00.123456789+05:30") == "2026-04-01T06:30:00.123Z"
    assert to_utc_iso("2026-04-01T00:10-00:00") == "2026-04-01T00:10:00.000Z"
    assert to_utc_iso("0000-01-01T00:00:00+00:01") == "-000001-12-31T23:59:00.000Z"
    assert epoch_ms("1970-01-01T00:00:00.001Z") == 1
    assert epoch_ms("not a time") is None
    assert to_datetime("0000-02-29T00:00:00Z").year == 1  # clamped for a column


@given(st.datetimes(), st.integers(0, 999))
def test_already_utc_timestamps_take_the_short_path_to_the_same_text(moment, millis):
    text = f"{moment.year:04d}-" + moment.strftime("%m-%dT%H:%M:%S") + f".{millis:03d}Z"
    assert to_utc_iso(text) == format_epoch_ms(epoch_ms(text)) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1000.0, b"1000"),
        (1e-6, b"0.000001"),
        (1e-7, b"1e-7"),
        (-0.0, b"0"),
        (9007199254740992.0, b"9007199254740992"),
        (2**64, b"18446744073709552000"),
        (1e21, b"1e+21"),
        ({"b": 1, "a": [0.5, 2.0]}, b'{"b":1,"a":[0.5,2]}'),
    ],
)
def test_wire_json_spells_numbers_as_ecmascript(value, text):
    assert wire_bytes(value) == text


def test_wire_json_keeps_member_order_and_goes_deep():
    deep = _nest(400)
    assert json.loads(wire_bytes({"z": deep, "a": 1})) == {"z": deep, "a": 1}
    assert wire_bytes({"z": 1, "a": 2}) == b'{"z":1,"a":2}'
    assert canonical_bytes({"z": deep, "a": 1.0}).startswith(b'{"a":1,"z":')
