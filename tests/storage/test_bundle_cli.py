"""`manage.py bundle check|import|export` against the reference's conformance corpus."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from runs.models import Event, Run
from runs.protocol.canonical import canonical_bytes, parse_json


def _manifest(conformance_dir: Path) -> list[dict]:
    return json.loads((conformance_dir / "manifest.json").read_text())["files"]


def _check(path: Path) -> dict:
    out = StringIO()
    try:
        call_command("bundle", "check", "--json", str(path), stdout=out)
    except SystemExit:
        pass
    return json.loads(out.getvalue().strip().splitlines()[-1])


def test_check_matches_manifest(conformance_dir):
    for entry in _manifest(conformance_dir):
        if entry["category"] not in ("valid", "tampered", "invalid"):
            continue
        line = _check(conformance_dir / entry["file"])
        expected = entry.get("expectedErrorCode")
        assert line["code"] == expected, (entry["file"], line)
        assert line["ok"] is (expected is None)
        assert set(line) == {"file", "ok", "code", "integrity", "message", "signature"}


@pytest.mark.django_db
def test_import_export_round_trip_is_byte_identical(conformance_dir, tmp_path):
    for entry in _manifest(conformance_dir):
        if entry["category"] != "valid":
            continue
        source = conformance_dir / entry["file"]
        call_command("bundle", "import", str(source), "--workspace", "conf", stdout=StringIO())
        bundle = parse_json(source.read_bytes())
        out = tmp_path / "out.json"
        call_command("bundle", "export", bundle["run"]["id"], "-o", str(out))
        signed = parse_json(out.read_bytes())
        # The export is signed (integrity.attestations, outside the hashed body); without the
        # signature its bytes are the reference's own, byte for byte.
        assert len(signed["integrity"].pop("attestations")) == 1, entry["file"]
        exported = canonical_bytes(signed)
        # the reference's own serialization of the same bundle (with or without an engine)
        reference = source.with_name(source.name.removesuffix(".json") + ".canonical.json")
        assert reference.exists(), reference
        assert exported == reference.read_bytes(), entry["file"]
        assert exported == canonical_bytes(bundle), entry["file"]
        reparsed = parse_json(exported)
        assert reparsed["integrity"]["sha256"] == bundle["integrity"]["sha256"] or "engine" not in bundle
        assert _check(out)["ok"]


@pytest.mark.django_db
def test_failed_import_leaves_nothing(conformance_dir):
    for entry in _manifest(conformance_dir):
        if entry["category"] in ("tampered", "invalid"):
            with pytest.raises(SystemExit):
                call_command(
                    "bundle",
                    "import",
                    str(conformance_dir / entry["file"]),
                    "--workspace",
                    "conf",
                    stdout=StringIO(),
                    stderr=StringIO(),
                )
    assert Run.objects.count() == 0 and Event.objects.count() == 0


@pytest.mark.django_db
def test_collision_and_as_new_id(conformance_dir):
    source = conformance_dir / "valid" / "linear_completed.json"
    call_command("bundle", "import", str(source), "--workspace", "conf", stdout=StringIO())
    with pytest.raises(SystemExit):
        err = StringIO()
        call_command("bundle", "import", str(source), "--workspace", "conf", stdout=StringIO(), stderr=err)
    assert "RUN_ID_COLLISION" in err.getvalue()
    call_command("bundle", "import", str(source), "--workspace", "conf", "--as-new-id", stdout=StringIO())
    assert Run.objects.count() == 2
