"""Redacted user bundles (seed 001): payloads dropped or masked by a named policy, still verifiable."""

from __future__ import annotations

import json

import pytest

from runs.protocol.bundle import check_bundle
from runs.protocol.canonical import canonical_bytes, parse_json, sha256_hex
from runs.protocol.errors import ErrorCode, ProtocolError
from runs.protocol.redaction import MASK, METADATA_KEY, POLICIES, redact_bundle, redaction_of

NAMES = [
    "model_io_usage_cost_multi_currency",
    "tool_calls_varied_payloads",
    "artifact_patch_each_op",
    "linear_completed",
]


def _bundle(conformance_dir, name):
    return parse_json((conformance_dir / "valid" / f"{name}.json").read_bytes())


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", NAMES)
def test_redacted_bundle_verifies_on_its_own_and_names_its_policy(conformance_dir, policy, name):
    full = _bundle(conformance_dir, name)
    redacted = redact_bundle(full, policy)
    result = check_bundle(canonical_bytes(redacted))
    assert result.ok, result.message
    note = redaction_of(redacted)
    assert note["policy"] == policy and note["sourceSha256"] == full["integrity"]["sha256"]
    assert "engine" not in redacted and set(redacted["run"]["metadata"]) == {METADATA_KEY}
    assert redacted["integrity"]["sha256"] != full["integrity"]["sha256"]
    assert _bundle(conformance_dir, name) == full  # the source is untouched


@pytest.mark.parametrize("policy", POLICIES)
def test_payloads_are_gone_and_their_hashes_listed(conformance_dir, policy):
    full = _bundle(conformance_dir, "tool_calls_varied_payloads")
    redacted = redact_bundle(full, policy)
    for event in redacted["trace"]:
        assert "args" not in event and "result" not in event and "payload" not in event
    listed = {item["where"]: item["sha256"] for item in redaction_of(redacted)["redacted"]}
    for i, event in enumerate(full["trace"]):
        for key in ("args", "result"):
            if key in event:
                assert listed[f"trace[{i}].{key}"] == sha256_hex(canonical_bytes(event[key]))


def test_mask_and_drop_treat_artifact_data(conformance_dir):
    full = _bundle(conformance_dir, "artifact_patch_each_op")
    masked = redact_bundle(full, "mask")
    dropped = redact_bundle(full, "drop")
    kept = redact_bundle(full, "user")
    assert all(a.get("data") == MASK for a in masked["artifacts"] if "data" in a)
    assert all("data" not in a for a in dropped["artifacts"])
    assert [a.get("data") for a in kept["artifacts"]] == [a.get("data") for a in full["artifacts"]]
    for bundle in (masked, dropped):
        for event in bundle["trace"]:
            for op in event.get("patch", []):
                assert op.get("value", MASK) == MASK
    secret_texts = json.dumps([a.get("data") for a in full["artifacts"]])
    assert secret_texts not in canonical_bytes(masked).decode()


def test_unknown_policy_is_a_coded_error(conformance_dir):
    with pytest.raises(ProtocolError) as info:
        redact_bundle(_bundle(conformance_dir, "linear_completed"), "everything")
    assert info.value.code == ErrorCode.INVALID_INPUT


def test_redact_events_redacts_appended_events_like_a_bundle_trace():
    from runs.protocol.redaction import redact_events

    events = [
        {"type": "model_io", "direction": "response", "summary": "s", "payload": {"secret": 1}},
        {"type": "tool_call", "name": "t", "args": {"a": 1}, "result": 2},
        {
            "type": "artifact_written",
            "artifact": {"artifactKey": "k", "typeId": "t", "version": 1, "data": {"x": 1}},
        },
    ]
    user = redact_events(events, "user")
    assert user[0] == {"type": "model_io", "direction": "response", "summary": "s"}
    assert user[1] == {"type": "tool_call", "name": "t"}
    assert user[2]["artifact"]["data"] == {"x": 1}  # the user policy keeps artifact data
    assert redact_events(events, "mask")[2]["artifact"]["data"] == "[REDACTED]"
    assert "payload" in events[0]  # copies: the input is not changed
