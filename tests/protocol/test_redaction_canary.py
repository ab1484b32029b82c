"""Canaries in every free-text field of every event type: where each may still appear after redaction.

``user`` (the reference's profile) keeps every canary but those of ``run.metadata``,
``model_io.payload`` and ``tool_call.args``/``result``; ``mask`` and ``drop`` keep none, while
the structure (ids, usage, cost, model names, decisions) stays and the bundle still verifies.
The ways out (REST, page, MCP, CLI, OTLP, transcripts) are in tests/api/test_redaction_ways_out.py.
"""

from __future__ import annotations

import pytest

from runs.protocol.bundle import check_bundle
from runs.protocol.canonical import canonical_bytes, sha256_hex
from runs.protocol.otel import trace_events_to_otel_spans
from runs.protocol.redaction import MASK, POLICIES, redact_bundle, redact_events, redaction_of
from runs.protocol.transcript import StoredEvent, transcript_lines
from tests.protocol import canary


def expected(policy: str) -> set[str]:
    return canary.kept_by_user() if policy == "user" else set()


@pytest.fixture
def full() -> dict:
    return canary.build()


def test_the_canary_bundle_covers_every_event_type_and_verifies(full):
    from runs.protocol.validate import EVENT_TYPES

    assert {event["type"] for event in full["trace"]} == set(EVENT_TYPES)
    assert check_bundle(canonical_bytes(full)).ok
    assert canary.found(canonical_bytes(full)) == set(canary.CANARIES)  # every canary is there


@pytest.mark.parametrize("policy", POLICIES)
def test_each_canary_appears_only_where_the_policy_keeps_it(full, policy):
    redacted = redact_bundle(full, policy)
    data = canonical_bytes(redacted)
    got = canary.found(data)
    assert got == expected(policy), sorted(canary.CANARIES[c] for c in got ^ expected(policy))
    result = check_bundle(data)
    assert result.ok and result.integrity == "valid", result.message


@pytest.mark.parametrize("policy", ["mask", "drop"])
def test_structure_stays_so_a_reviewer_still_reads_and_totals_the_run(full, policy):
    redacted = redact_bundle(full, policy)
    assert [e["id"] for e in redacted["trace"]] == [e["id"] for e in full["trace"]]
    assert [e["type"] for e in redacted["trace"]] == [e["type"] for e in full["trace"]]
    assert [e.get("stepId") for e in redacted["trace"]] == [e.get("stepId") for e in full["trace"]]
    assert [e["ts"] for e in redacted["trace"]] == [e["ts"] for e in full["trace"]]
    response = redacted["trace"][4]
    assert (response["usage"], response["cost"], response["model"], response["provider"]) == (
        full["trace"][4]["usage"], full["trace"][4]["cost"], "gpt-canary", "openai",
    )  # fmt: skip
    resolved = redacted["trace"][14]
    assert (resolved["decision"], resolved["gate"]) == ("edited", "PAUSE_AFTER")
    started = redacted["trace"][0]["attributes"]
    assert set(started) == set(full["trace"][0]["attributes"])  # every key stays
    assert started["gen_ai.request.model"] == "gpt-canary" and started["gen_ai.usage.input_tokens"] == 12
    assert started["gen_ai.prompt"] == MASK and started["app.notes"] == MASK
    assert redacted["trace"][17]["attributes"]["gen_ai.usage.output_tokens"] == 5
    assert redacted["trace"][11]["code"] == "TOOL_FAILED" and redacted["trace"][11]["message"] == MASK
    assert redacted["run"]["workflowSnapshot"]["steps"][0]["gatePolicy"] == "PAUSE_AFTER"
    assert redacted["run"]["subject"] == full["run"]["subject"] and redacted["run"]["tags"] == ["canary"]
    assert "hostExtra" not in redacted["trace"][0] and "hostExtra" not in redacted["trace"][1]
    rule = redacted["ruleSets"][0]["rules"][0]
    assert (rule["id"], rule["priority"], rule["enabled"], rule["payload"]) == ("rule-1", 1, True, MASK)


def test_mask_keeps_optional_text_fields_as_a_mask_drop_removes_them(full):
    masked, dropped = redact_bundle(full, "mask"), redact_bundle(full, "drop")
    assert masked["run"]["workflowSnapshot"]["title"] == MASK
    assert "title" not in dropped["run"]["workflowSnapshot"]
    assert masked["trace"][4]["summary"] == MASK and "summary" not in dropped["trace"][4]
    assert masked["trace"][14]["note"] == MASK and "note" not in dropped["trace"][14]
    assert masked["artifacts"][0]["data"] == MASK and "data" not in dropped["artifacts"][0]
    for bundle in (masked, dropped):  # what the protocol requires is masked, never removed
        assert bundle["trace"][10]["text"] == MASK
        assert bundle["trace"][16]["error"] == {"message": MASK, "code": "REVIEW_FAILED"}
        assert bundle["trace"][7]["patch"][0]["value"] == MASK


@pytest.mark.parametrize("policy", ["mask", "drop"])
def test_every_removed_value_is_listed_with_its_hash(full, policy):
    note = redaction_of(redact_bundle(full, policy))
    listed = {item["where"]: item["sha256"] for item in note["redacted"]}
    assert note["version"] == 2
    assert listed["run.workflowSnapshot.title"] == sha256_hex(
        canonical_bytes(full["run"]["workflowSnapshot"]["title"])
    )
    assert listed["trace[10].text"] == sha256_hex(canonical_bytes(full["trace"][10]["text"]))
    assert listed["trace[0].attributes.gen_ai.prompt"] == sha256_hex(
        canonical_bytes(full["trace"][0]["attributes"]["gen_ai.prompt"])
    )
    assert listed["trace[0].hostExtra"]  # an unknown key is listed too
    assert "trace[0].attributes.gen_ai.request.model" not in listed


def test_redacting_a_redacted_bundle_again_changes_nothing_it_holds(full):
    once = redact_bundle(full, "mask")
    twice = redact_bundle(once, "mask")
    assert twice["trace"] == once["trace"] and twice["artifacts"] == once["artifacts"]
    # only the old note itself went (the metadata): nothing masked twice
    assert [item["where"] for item in redaction_of(twice)["redacted"]] == ["run.metadata"]


@pytest.mark.parametrize("policy", POLICIES)
def test_events_and_run_document_views_match_the_bundle(full, policy):
    # Here, not at the top: the module's other tests must run (and fail) on the code before it.
    from runs.protocol.redaction import redact_run_doc

    bundle = redact_bundle(full, policy)
    assert redact_events(full["trace"], policy) == bundle["trace"]
    doc = redact_run_doc(full["run"], policy)
    assert {k: v for k, v in doc.items() if k != "metadata"} == {
        k: v for k, v in bundle["run"].items() if k != "metadata"
    }
    # the pure transcript and OTel mappings of the views hold what the bundle holds, no more
    lines = transcript_lines(doc, [StoredEvent(i + 1, e) for i, e in enumerate(bundle["trace"])], [])
    assert canary.found(b"".join(str(line).encode() for line in lines)) <= expected(policy)
    spans = trace_events_to_otel_spans(doc, bundle["trace"])
    assert canary.found(str(spans)) <= expected(policy)
