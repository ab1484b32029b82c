"""Bundles over HTTP: signed export, atomic import, verification without writing."""

from __future__ import annotations

import json

from workbench_sdk.client import make_event

from runs.models import Run
from runs.protocol.bundle import check_bundle
from runs.protocol.canonical import canonical_bytes


def _manifest(conformance_dir):
    return json.loads((conformance_dir / "manifest.json").read_text())["files"]


def test_export_is_a_signed_canonical_bundle(api, started_run):
    api.post(
        f"/api/runs/{started_run}/events",
        {"events": [make_event(started_run, "step_started", stepId="parse")]},
    )
    response = api.get(f"/api/runs/{started_run}/bundle")
    assert response.status_code == 200 and response["Content-Type"].startswith("application/json")
    data = response.content
    result = check_bundle(data)
    assert result.ok and result.integrity == "valid"
    assert canonical_bytes(json.loads(data)) == data
    assert response["ETag"] == '"1"'


def test_import_every_valid_sample_and_export_it_again(api, conformance_dir):
    valid = [
        f for f in _manifest(conformance_dir) if f["category"] == "valid" and f["expectedErrorCode"] is None
    ]
    assert valid
    for entry in valid:
        data = (conformance_dir / entry["file"]).read_bytes()
        response = api.post("/api/bundles", raw=data)
        assert response.status_code == 201, (entry["file"], response.content)
        run_id = response.json()["runId"]
        assert response.json()["lastSeq"] == entry["traceEventCount"]
        exported = api.get(f"/api/runs/{run_id}/bundle").content
        assert check_bundle(exported).ok, entry["file"]
        integrity = json.loads(exported)["integrity"]
        assert integrity["sha256"] == json.loads(data)["integrity"]["sha256"], entry["file"]
        assert [a["payloadType"] for a in integrity["attestations"]] == ["application/vnd.in-toto+json"]
    again = api.post("/api/bundles", raw=(conformance_dir / valid[0]["file"]).read_bytes())
    assert again.status_code == 409 and again.json()["code"] == "RUN_ID_COLLISION"
    first = (conformance_dir / valid[0]["file"]).read_bytes()
    renamed = api.post("/api/bundles?as_new_id=true", raw=first)
    assert renamed.status_code == 201 and renamed.json()["runId"] != json.loads(first)["run"]["id"]


def test_invalid_and_tampered_bundles_are_refused_with_their_code_and_nothing_stored(api, conformance_dir):
    bad = [f for f in _manifest(conformance_dir) if f["category"] in ("invalid", "tampered")]
    assert bad
    for entry in bad:
        data = (conformance_dir / entry["file"]).read_bytes()
        response = api.post("/api/bundles", raw=data)
        assert response.status_code == 400, (entry["file"], response.content)
        assert response.json()["code"] == entry["expectedErrorCode"], entry["file"]
        verify = api.post("/api/bundles/verify", raw=data)
        assert verify.status_code == 200
        assert verify.json()["ok"] is False and verify.json()["code"] == entry["expectedErrorCode"], entry[
            "file"
        ]
    assert Run.objects.count() == 0


def test_verify_writes_nothing(api, reader, conformance_dir):
    entry = next(f for f in _manifest(conformance_dir) if f["category"] == "valid")
    data = (conformance_dir / entry["file"]).read_bytes()
    result = reader.post("/api/bundles/verify", raw=data)
    assert result.status_code == 200
    answer = result.json()
    assert {k: answer[k] for k in ("ok", "code", "integrity", "message")} == {
        "ok": True,
        "code": None,
        "integrity": "valid",
        "message": None,
    }
    assert answer["signature"]["status"] == "unsigned" and answer["signature"]["ok"] is True
    assert Run.objects.count() == 0
    assert api.post("/api/bundles/verify", raw=b"").json()["code"] == "INVALID_JSON"
    assert api.post("/api/bundles/verify", raw=b"{oops").json()["code"] == "INVALID_JSON"


def test_import_is_atomic(api, conformance_dir):
    entry = next(
        f for f in _manifest(conformance_dir) if f["category"] == "valid" and f.get("traceEventCount", 0) > 3
    )
    bundle = json.loads((conformance_dir / entry["file"]).read_bytes())
    bundle["trace"][-1]["stepId"] = "no-such-step"
    bundle.pop("integrity")
    from runs.protocol.integrity import seal_bundle

    response = api.post("/api/bundles", raw=canonical_bytes(seal_bundle(bundle)))
    assert response.status_code == 400 and response.json()["code"] == "INVALID_RUN_BUNDLE"
    assert not Run.objects.filter(run_id=bundle["run"]["id"]).exists()
