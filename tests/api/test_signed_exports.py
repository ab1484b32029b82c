"""Every way out of a bundle is signed (issue 25): REST, the run page, MCP (tool and resource), the CLI.

Each export is verified the way an outsider would: with the public documents the instance
publishes at /.well-known/jwks.json and /.well-known/workbench-keys.json, through
runs.protocol.signing alone. Forgeries go through POST /api/bundles/verify and the importer.
"""

from __future__ import annotations

import base64
import copy
import io
import json
import os
import shutil
import subprocess

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.models import ApiToken
from accounts.principals import Principal
from runs import actions
from runs.engine import commands as c
from runs.mcp import operations as ops
from runs.models import Run, SigningKey
from runs.protocol.canonical import canonical_bytes
from runs.protocol.integrity import compute_integrity
from runs.protocol.signing import jwk_thumbprint, verify_attestations
from tests.api.conftest import BearerClient
from tests.conftest import REPO
from tests.pages.conftest import login

NODE = shutil.which("node")


def _gated_run(workspace, workflow, run_id: str = "run_signed") -> str:
    """A run whose review gate bob approved (the actor stored beside the event)."""
    actions.do_start_run(workspace=workspace, workflow=workflow, actor="user:alice", run_id=run_id)
    for command, actor in (
        (c.BeginStep(step_id="parse"), "user:alice"),
        (c.CompleteStep(step_id="parse"), "user:alice"),
        (c.ResolveGate(step_id="review", gate="PAUSE_BEFORE", decision="approved"), "user:bob"),
    ):
        actions.do_command(workspace=workspace, run_id=run_id, command=command, actor=actor)
    return run_id


def _published(anonymous: BearerClient) -> tuple[dict, dict]:
    jwks = anonymous.get("/.well-known/jwks.json")
    validity = anonymous.get("/.well-known/workbench-keys.json")
    assert jwks.status_code == 200 and validity.status_code == 200
    return jwks.json(), validity.json()


def _verdict(bundle: dict, anonymous: BearerClient, **kw):
    jwks, validity = _published(anonymous)
    return verify_attestations(bundle, jwks, validity, require_signature=True, **kw)


def _approvals(verdict) -> list[tuple]:
    return [(a["by"], a["decision"], a["stepId"], a["gate"]) for a in verdict.approvals]


@pytest.fixture
def gated(workspace, workflow) -> str:
    return _gated_run(workspace, workflow)


# ---------------------------------------------------------------- every way out


def test_rest_export_is_signed_for_the_calling_token(api, anonymous, gated, full_token, workspace):
    response = api.get(f"/api/runs/{gated}/bundle")
    assert response.status_code == 200
    bundle = json.loads(response.content)
    verdict = _verdict(bundle, anonymous)
    assert verdict.ok and verdict.signed, verdict.to_json()
    token = ApiToken.objects.get(workspace=workspace)
    assert verdict.exported_by == f"token:{token.key_id}"
    assert verdict.workspace == "acme" and verdict.instance == "workbench" and verdict.redaction is None
    assert _approvals(verdict) == [("user:bob", "approved", "review", "PAUSE_BEFORE")]
    assert verdict.kid == SigningKey.objects.get().kid
    assert "signed by key" in verdict.summary() and "user:bob approved review" in verdict.summary()


def test_rest_detached_signature_verifies_the_unsigned_bytes(api, anonymous, gated):
    response = api.get(f"/api/runs/{gated}/bundle?detached=true")
    assert response.status_code == 200
    assert (
        response["Content-Disposition"].endswith('.bundle.json.dsse.json"')
        or ".dsse.json" in response["Content-Disposition"]
    )
    envelope = json.loads(response.content)
    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    hash_only = json.loads(api.get(f"/api/runs/{gated}/bundle").content)
    hash_only["integrity"].pop("attestations")
    verdict = _verdict(hash_only, anonymous, detached=envelope)
    assert verdict.ok and verdict.signed


def test_redacted_export_is_signed_over_what_it_holds_and_names_its_policy(api, anonymous, gated):
    bundle = json.loads(api.get(f"/api/runs/{gated}/bundle?redact=user").content)
    assert bundle["run"]["metadata"]["workbench.redaction"]["policy"] == "user"
    assert bundle["integrity"]["sha256"] == compute_integrity(bundle)
    verdict = _verdict(bundle, anonymous)
    assert verdict.ok and verdict.redaction == "user"
    assert _approvals(verdict) == [("user:bob", "approved", "review", "PAUSE_BEFORE")]


def test_page_export_is_signed_for_the_signed_in_user(client, alice, anonymous, gated):
    login(client, alice)
    response = client.get(f"/runs/{gated}/export/")
    assert response.status_code == 200
    verdict = _verdict(json.loads(response.content), anonymous)
    assert verdict.ok and verdict.exported_by == "user:alice"
    detached = client.get(f"/runs/{gated}/export/?detached=1")
    assert json.loads(detached.content)["signatures"][0]["keyid"] == verdict.kid
    page = client.get(f"/runs/{gated}/").content.decode()
    assert "Export signed bundle" in page and "?detached=1" in page


def test_mcp_tool_and_resource_exports_are_signed_for_the_token(workspace, anonymous, gated):
    principal = Principal(workspace=workspace, actor="token:mcpkey", scopes=frozenset({"read"}))
    data, bundle = ops.export_bundle(principal, run_id=gated)  # the tool and runs:// resource both call it
    assert json.loads(data) == bundle
    verdict = _verdict(bundle, anonymous)
    assert verdict.ok and verdict.exported_by == "token:mcpkey"
    checked = ops.verify_run_integrity(principal, run_id=gated)
    assert checked["ok"] and checked["integrity"] == "valid" and checked["signature"]["status"] == "signed"
    hash_only = copy.deepcopy(bundle)
    hash_only["integrity"].pop("attestations")
    validated = ops.validate_run_bundle(principal, bundle=canonical_bytes(hash_only).decode())
    assert validated["ok"] and validated["signature"]["status"] == "unsigned"


def test_cli_export_is_signed_with_detached_envelope(tmp_path, anonymous, gated):
    out, env = tmp_path / "run.bundle.json", tmp_path / "run.bundle.json.dsse.json"
    call_command(
        "bundle", "export", gated, "-o", str(out), "--detached", str(env), "--exported-by", "cli:ops"
    )
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    bundle = json.loads(out.read_bytes())
    verdict = _verdict(bundle, anonymous)
    assert verdict.ok and verdict.exported_by == "cli:ops"
    assert json.loads(env.read_bytes()) == bundle["integrity"]["attestations"][0]


def test_cli_bundle_check_passes_the_verify_options(tmp_path, anonymous, gated):
    out = tmp_path / "b.json"
    call_command("bundle", "export", gated, "-o", str(out))
    jwks_file, validity_file = tmp_path / "jwks.json", tmp_path / "keys.json"
    call_command("signing_key", "publish", "--jwks", str(jwks_file), "--validity", str(validity_file))
    stdout = io.StringIO()
    call_command(
        "bundle", "check", str(out), "--keys", str(jwks_file), "--validity", str(validity_file),
        "--require-signature", stdout=stdout,
    )  # fmt: skip
    assert (
        "signed by key" in stdout.getvalue() and "1 approval: user:bob approved review" in stdout.getvalue()
    )
    bundle = json.loads(out.read_bytes())
    bundle["integrity"].pop("attestations")
    unsigned = tmp_path / "unsigned.json"
    unsigned.write_bytes(canonical_bytes(bundle))
    with pytest.raises(SystemExit) as exited:
        call_command("bundle", "check", str(unsigned), "--keys", str(jwks_file), "--require-signature")
    assert exited.value.code == 3  # UNSIGNED


@pytest.mark.slow  # starts node
def test_reference_style_verifier_still_finds_an_exported_signed_bundle_valid(api, gated, tmp_path):
    if NODE is None:
        pytest.skip("node is not installed")
    data = api.get(f"/api/runs/{gated}/bundle").content
    path = tmp_path / "signed.json"
    path.write_bytes(data)
    proc = subprocess.run(
        [NODE, str(REPO / "bench" / "verify.mjs"), str(path)], capture_output=True, text=True, timeout=60
    )
    report = json.loads(proc.stdout)
    assert report["integrity"] == "valid", proc.stdout
    assert report["sha256"] == json.loads(data)["integrity"]["sha256"]


# ---------------------------------------------------------------- keys and documents


def test_jwks_document_shape_and_cache_control(api, anonymous, gated):
    api.get(f"/api/runs/{gated}/bundle")
    response = anonymous.get("/.well-known/jwks.json")
    assert "public" in response["Cache-Control"] and "max-age=" in response["Cache-Control"]
    (jwk,) = response.json()["keys"]
    assert jwk["kty"] == "OKP" and jwk["crv"] == "Ed25519"
    assert len(base64.urlsafe_b64decode(jwk["x"] + "=")) == 32
    assert jwk["kid"] == jwk_thumbprint(jwk)  # RFC 7638
    assert "d" not in jwk and set(jwk) <= {"kty", "crv", "x", "kid", "alg", "use"}
    validity = anonymous.get("/.well-known/workbench-keys.json")
    assert "max-age=" in validity["Cache-Control"]
    (entry,) = validity.json()["keys"]
    assert entry["kid"] == jwk["kid"] and "notBefore" in entry and "revokedAt" not in entry


def test_key_created_on_first_use_into_the_key_dir_0600(settings, api, gated):
    assert not SigningKey.objects.exists()
    api.get(f"/api/runs/{gated}/bundle")
    row = SigningKey.objects.get()
    seed_file = settings.WORKBENCH_SIGNING_KEY_DIR / f"{row.kid}.seed"
    assert oct(seed_file.stat().st_mode & 0o777) == "0o600"
    assert oct(os.stat(settings.WORKBENCH_SIGNING_KEY_DIR).st_mode & 0o077) == "0o0"
    api.get(f"/api/runs/{gated}/bundle")
    assert SigningKey.objects.count() == 1  # the same key signs again


def test_nothing_exported_nothing_created(settings, anonymous, gated, client, alice):
    """Nobody exported: reading the key documents, the run page or verifying creates no key."""
    assert anonymous.get("/.well-known/jwks.json").json() == {"keys": []}
    assert anonymous.get("/.well-known/workbench-keys.json").json() == {"keys": []}
    login(client, alice)
    client.get(f"/runs/{gated}/")
    assert not SigningKey.objects.exists()
    assert list(settings.WORKBENCH_SIGNING_KEY_DIR.iterdir()) == []


def test_operator_key_from_the_environment(settings, api, anonymous, gated, tmp_path):
    seed = bytes(range(32))
    settings.WORKBENCH_SIGNING_KEY = base64.b64encode(seed).decode()
    bundle = json.loads(api.get(f"/api/runs/{gated}/bundle").content)
    row = SigningKey.objects.get()
    assert row.source == "env" and _verdict(bundle, anonymous).kid == row.kid
    assert list(settings.WORKBENCH_SIGNING_KEY_DIR.iterdir()) == []  # nothing written to disk
    path = tmp_path / "seed"
    path.write_bytes(seed)
    settings.WORKBENCH_SIGNING_KEY = str(path)  # a path to the seed works the same
    again = json.loads(api.get(f"/api/runs/{gated}/bundle").content)
    assert _verdict(again, anonymous).kid == row.kid
    settings.WORKBENCH_SIGNING_KEY = "not a key"
    failed = api.get(f"/api/runs/{gated}/bundle")
    assert failed.status_code == 400 and failed.json()["code"] == "SIGNING_KEY_ERROR"
    assert "not a key" not in failed.content.decode()


def test_rotation_and_revocation_through_the_command(api, anonymous, gated):
    before = json.loads(api.get(f"/api/runs/{gated}/bundle").content)
    first = SigningKey.objects.get().kid
    out = io.StringIO()
    call_command("signing_key", "rotate", stdout=out)
    second = SigningKey.objects.exclude(kid=first).get().kid
    assert second in out.getvalue()
    after = json.loads(api.get(f"/api/runs/{gated}/bundle").content)
    jwks, validity = _published(anonymous)
    assert {k["kid"] for k in jwks["keys"]} == {first, second}  # the old key stays listed
    assert "notAfter" in next(e for e in validity["keys"] if e["kid"] == first)
    assert _verdict(before, anonymous).kid == first and _verdict(after, anonymous).kid == second
    # Revoked from a moment before the second export: it fails, the first still verifies.
    # "--" first: a thumbprint may begin with "-" (base64url), which argparse would take for an option
    call_command("signing_key", "revoke", "--at", "2000-01-01T00:00:00Z", "--", second, stdout=io.StringIO())
    refused = api.post("/api/bundles/verify", raw=canonical_bytes(after)).json()
    assert refused["ok"] is False and refused["code"] == "KEY_REVOKED"
    assert refused["signature"]["status"] == "invalid"
    assert (
        api.post("/api/bundles/verify", raw=canonical_bytes(before)).json()["signature"]["status"] == "signed"
    )
    # The revoked key signs nothing more: the next export is signed with a new instance key.
    third = _verdict(json.loads(api.get(f"/api/runs/{gated}/bundle").content), anonymous)
    assert third.ok and third.kid not in (first, second)
    listing = io.StringIO()
    call_command("signing_key", "list", stdout=listing)
    assert "revoked" in listing.getvalue() and "retired" in listing.getvalue()
    assert "seed" not in listing.getvalue()


def test_a_key_id_that_begins_with_a_dash_can_be_revoked(api, gated):
    """RFC 7638 thumbprints are base64url: one in 64 begins with "-"."""
    api.get(f"/api/runs/{gated}/bundle")
    key = SigningKey.objects.get()
    SigningKey.objects.filter(pk=key.pk).update(kid="-" + key.kid[1:])
    call_command("signing_key", "revoke", "--", "-" + key.kid[1:], stdout=io.StringIO())
    assert SigningKey.objects.get().revoked_at is not None


def test_bad_key_commands_change_nothing(api, gated):
    api.get(f"/api/runs/{gated}/bundle")
    with pytest.raises(CommandError, match="UNKNOWN_KEY"):
        call_command("signing_key", "revoke", "nope")
    with pytest.raises(CommandError, match="INVALID_INPUT"):
        call_command("signing_key", "revoke", "--at", "yesterday", "--", SigningKey.objects.get().kid)
    with pytest.raises(CommandError, match="active already"):
        call_command("signing_key", "create")
    assert SigningKey.objects.get().revoked_at is None


def test_workspace_key_signs_that_workspace_only(api, anonymous, gated, workspace, other_workspace, workflow):
    call_command("signing_key", "create", "--workspace", "acme", stdout=io.StringIO())
    own = SigningKey.objects.get(workspace=workspace).kid
    assert _verdict(json.loads(api.get(f"/api/runs/{gated}/bundle").content), anonymous).kid == own
    _gated_run(other_workspace, workflow, "run_other")
    principal = Principal(workspace=other_workspace, actor="token:g", scopes=frozenset({"read"}))
    _data, other = ops.export_bundle(principal, run_id="run_other")
    assert _verdict(other, anonymous).kid != own


# ---------------------------------------------------------------- forgeries and import


def test_forgeries_refused_through_the_verify_endpoint_and_the_importer(api, gated):
    bundle = json.loads(api.get(f"/api/runs/{gated}/bundle").content)
    assert (
        api.post("/api/bundles/verify", raw=canonical_bytes(bundle)).json()["signature"]["status"] == "signed"
    )
    # One byte of a trace event changed, the integrity hash recomputed, the envelope kept.
    forged = copy.deepcopy(bundle)
    forged["trace"][0]["ts"] = forged["trace"][0]["ts"][:-2] + (
        "1Z" if forged["trace"][0]["ts"][-2] != "1" else "2Z"
    )
    forged["integrity"]["sha256"] = compute_integrity(forged)
    answer = api.post("/api/bundles/verify", raw=canonical_bytes(forged)).json()
    assert answer["ok"] is False and answer["code"] == "SUBJECT_DIGEST_MISMATCH"
    assert answer["integrity"] == "valid"  # the hash alone is fooled; the signature is not
    # The approver changed inside the signed statement: the signature no longer verifies.
    changed = copy.deepcopy(bundle)
    envelope = changed["integrity"]["attestations"][0]
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"]["approvals"][0]["by"] = "user:mallory"
    envelope["payload"] = base64.b64encode(canonical_bytes(statement)).decode()
    answer = api.post("/api/bundles/verify", raw=canonical_bytes(changed)).json()
    assert answer["ok"] is False and answer["code"] == "SIGNATURE_INVALID"
    assert answer["signature"]["exportedBy"] is None  # nothing of an unverified statement is reported
    # The importer refuses both, and stores nothing.
    Run.objects.filter(run_id=gated).delete()
    for data, code in ((forged, "SUBJECT_DIGEST_MISMATCH"), (changed, "SIGNATURE_INVALID")):
        refused = api.post("/api/bundles", raw=canonical_bytes(data))
        assert refused.status_code == 400 and refused.json()["code"] == code
    assert not Run.objects.filter(run_id=gated).exists()


def test_require_signature_on_the_verify_endpoint(api, gated):
    bundle = json.loads(api.get(f"/api/runs/{gated}/bundle").content)
    bundle["integrity"].pop("attestations")
    plain = api.post("/api/bundles/verify", raw=canonical_bytes(bundle)).json()
    assert plain["ok"] is True and plain["signature"]["status"] == "unsigned"
    assert "signed by" not in plain["signature"]["summary"]
    required = api.post("/api/bundles/verify?require_signature=true", raw=canonical_bytes(bundle)).json()
    assert required["ok"] is False and required["code"] == "UNSIGNED"


def test_imported_signed_bundle_shows_who_signed_exported_and_approved(
    api, gated, workspace, other_workspace, client, charlie
):
    data = api.get(f"/api/runs/{gated}/bundle").content
    run = actions.do_import_bundle(workspace=other_workspace, data=data, actor="user:charlie")
    login(client, charlie)
    page = client.get(f"/runs/{run.run_id}/").content.decode()
    assert 'id="import-provenance"' in page and 'data-status="signed"' in page
    assert "token:" in page and "user:bob" in page and "approved" in page
    assert "did not sign anything themselves" in page
    # Re-exported from here: bob stays the approver (from the verified signature), not the importer.
    principal = Principal(workspace=other_workspace, actor="token:globex", scopes=frozenset({"read"}))
    _data, again = ops.export_bundle(principal, run_id=run.run_id)
    statement = json.loads(base64.b64decode(again["integrity"]["attestations"][0]["payload"]))
    assert [a["by"] for a in statement["predicate"]["approvals"]] == ["user:bob"]
    assert statement["predicate"]["exportedBy"] == "token:globex"


def test_imported_hash_only_bundle_never_shows_signed(api, gated, other_workspace, client, charlie):
    bundle = json.loads(api.get(f"/api/runs/{gated}/bundle").content)
    bundle["integrity"].pop("attestations")
    run = actions.do_import_bundle(
        workspace=other_workspace, data=canonical_bytes(bundle), actor="user:charlie"
    )
    login(client, charlie)
    page = client.get(f"/runs/{run.run_id}/").content.decode()
    assert 'data-status="unsigned"' in page and "integrity hash only" in page
    assert 'check-ok">signed' not in page
    # Re-exported, nobody here vouches for who approved the imported gate (not the importer either).
    principal = Principal(workspace=other_workspace, actor="token:globex", scopes=frozenset({"read"}))
    _data, again = ops.export_bundle(principal, run_id=run.run_id)
    statement = json.loads(base64.b64decode(again["integrity"]["attestations"][0]["payload"]))
    assert [a["by"] for a in statement["predicate"]["approvals"]] == [None]


def test_import_page_reports_the_verdict(api, gated, other_workspace, client, charlie):
    bundle = json.loads(api.get(f"/api/runs/{gated}/bundle").content)
    login(client, charlie)
    signed = client.post("/import/", {"bundle": _upload(canonical_bytes(bundle))})
    text = signed.content.decode()
    assert signed.status_code == 200 and 'data-status="signed"' in text and "user:bob" in text
    changed = copy.deepcopy(bundle)
    envelope = changed["integrity"]["attestations"][0]
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"]["exportedBy"] = "user:someone-else"
    envelope["payload"] = base64.b64encode(canonical_bytes(statement)).decode()
    forged = client.post("/import/", {"bundle": _upload(canonical_bytes(changed))})
    text = forged.content.decode()
    assert forged.status_code == 422
    assert '<span class="check-bad">signature invalid</span>' in text and "SIGNATURE_INVALID" in text
    assert 'name="token"' not in text  # nothing to confirm
    bundle["integrity"].pop("attestations")
    plain = client.post("/import/", {"bundle": _upload(canonical_bytes(bundle))}).content.decode()
    assert 'data-status="unsigned"' in plain and 'check-ok">signed' not in plain


def _upload(data: bytes):
    from django.core.files.uploadedfile import SimpleUploadedFile

    return SimpleUploadedFile("run.bundle.json", data, content_type="application/json")
