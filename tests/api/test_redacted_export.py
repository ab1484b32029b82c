"""GET /api/runs/{id}/bundle?redact=POLICY and `bundle export --redact`: redacted user bundles."""

from __future__ import annotations

import json

from runs.protocol.bundle import check_bundle
from runs.protocol.redaction import redaction_of


def test_redacted_export_verifies_and_imports_elsewhere(api, conformance_dir):
    source = (conformance_dir / "valid" / "tool_calls_varied_payloads.json").read_bytes()
    run_id = json.loads(source)["run"]["id"]
    assert api.client.generic(
        "POST", "/api/bundles", data=source, content_type="application/json",
        headers={"Authorization": f"Bearer {api.token}"},
    ).status_code == 201  # fmt: skip
    got = api.get(f"/api/runs/{run_id}/bundle", redact="mask")
    assert got.status_code == 200
    result = check_bundle(got.content)
    assert result.ok, result.message
    assert redaction_of(result.bundle)["policy"] == "mask"
    assert all("args" not in e and "result" not in e for e in result.bundle["trace"])
    full = api.get(f"/api/runs/{run_id}/bundle")
    assert check_bundle(full.content).ok and full.content != got.content
    # a redacted bundle is a bundle: it imports (under a new id here, the full run exists)
    again = api.client.generic(
        "POST", "/api/bundles?as_new_id=true", data=got.content, content_type="application/json",
        headers={"Authorization": f"Bearer {api.token}"},
    )  # fmt: skip
    assert again.status_code == 201, again.content


def test_unknown_policy_is_400(api, started_run):
    response = api.get(f"/api/runs/{started_run}/bundle", redact="nope")
    assert response.status_code == 400
    assert response.json()["code"] == "INVALID_INPUT"
