"""`bundle import` then `bundle export` gives back the reference's bytes for bundles it accepts
at the edges of the protocol (deep data, legacy pointers, every timestamp form, ...)."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command

from runs.models import Run
from runs.protocol.canonical import canonical_bytes, parse_json, wire_bytes
from runs.protocol.integrity import seal_bundle


def _nest(depth: int):
    value: object = {"leaf": 1.5}
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


def _written(bundle: dict) -> tuple[dict, dict]:
    return next(e for e in bundle["trace"] if e["type"] == "artifact_written"), bundle["artifacts"][0]


def _deep(b):
    _written(b)[1]["data"] = _nest(256)
    _written(b)[0]["artifact"]["data"] = _nest(256)


def _pointers(b):
    event, artifact = _written(b)
    artifact["pointer"] = {"kind": "inline", "sha256": "ab" * 32}
    event["artifact"]["pointer"] = {
        "kind": "external",
        "ref": "s3://b/k",
        "payloadHash": "cd" * 32,
        "byteLength": 3,
    }


def _times(b):
    b["run"]["startedAt"] = "0000-02-29T00:00:00+23:59"
    b["run"]["endedAt"] = "9999-12-31T23:59-00:01"
    for i, ts in enumerate(
        ["2026-04-01T12:00:00.123456789+05:30", "2026-04-01T12:00Z", "2024-02-29T00:00:00.1-00:00"]
    ):
        b["trace"][i]["ts"] = ts
    b["trace"][3]["ts"] = "2026-04-01T12:00:00." + "9" * 60 + "Z"  # longer than the ts column


def _lineage(b):
    run_id = b["run"]["id"]
    b["trace"].append(
        {
            "id": "evt_f",
            "runId": run_id,
            "ts": "2026-04-01T12:00:00Z",
            "type": "run_forked",
            "parentRunId": "a",
            "parentRunIds": ["b", "a"],
        }
    )
    b["trace"].append(
        {
            "id": "evt_f",
            "runId": run_id,
            "ts": "2026-04-01T12:00:00Z",
            "type": "tool_call",
            "name": "t",
            "stepId": "",
        }
    )
    b["trace"].append(
        {
            "id": "x" * 300,
            "runId": run_id,
            "ts": "2026-04-01T12:00:00Z",
            "type": "annotation",
            "text": "long id",
            "correlationId": "c" * 300,
        }
    )


@pytest.mark.django_db
@pytest.mark.parametrize("change", [_deep, _pointers, _times, _lineage], ids=lambda f: f.__name__)
def test_import_then_export_is_byte_identical(conformance_dir, tmp_path, change):
    bundle = json.loads((conformance_dir / "valid" / "linear_completed.json").read_text())
    bundle["run"]["id"] = f"run_{change.__name__}"
    for event in bundle["trace"]:
        event["runId"] = bundle["run"]["id"]
    change(bundle)
    signed = seal_bundle(bundle)
    source = tmp_path / "in.json"
    source.write_bytes(wire_bytes(signed))
    call_command("bundle", "import", str(source), "--workspace", "edges", stdout=StringIO())
    out = tmp_path / "out.json"
    call_command("bundle", "export", signed["run"]["id"], "-o", str(out))
    exported = parse_json(out.read_bytes())
    assert len(exported["integrity"].pop("attestations")) == 1  # this instance's signature, beside the hash
    assert canonical_bytes(exported) == canonical_bytes(signed)
    assert Run.objects.get(run_id=signed["run"]["id"]).last_seq == len(signed["trace"])
