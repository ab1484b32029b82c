"""NUL (U+0000) inside protocol strings: PostgreSQL's text and jsonb cannot hold it, the protocol can.

Every string of the reference's valid bundles gets a NUL (ids, step ids, artifact keys, type
ids, rule set ids, tags, subject, currencies, parent run ids, payloads ...): import then export
gives back the same bytes, on SQLite and on PostgreSQL. Run ids are the exception the project
makes for every control character (runs.ids: ``INVALID_RUN_ID``); asking for such a run is a
plain "not found", never a server error.
"""

from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.core.management import call_command

from runs.models import Run
from runs.protocol.canonical import canonical_bytes, parse_json, wire_bytes
from runs.protocol.integrity import seal_bundle

NUL = "\u0000"
# Values the protocol constrains (enums, timestamps, hashes): they stay as they are.
_ENUMS = {
    *("AUTO", "PAUSE_BEFORE", "PAUSE_AFTER", "CHECKPOINT", "running", "completed", "failed", "cancelled"),
    *("pending", "approved", "rejected", "edited", "request", "response", "stream_chunk", "internal"),
    *("client", "server", "producer", "consumer", "ok", "error", "inline", "external", "1.0.0"),
    *("add", "remove", "replace", "move", "copy", "test"),
}
_FIXED = re.compile(r"\d{4}-\d\d-\d\dT.*|[0-9a-f]{64}")
_RUN_IDS = {"runId"}  # and run.id


def _with_nul(value, key=None, tail=NUL):
    """``value`` with ``tail`` added to every free string (consistently, so references hold)."""
    if isinstance(value, dict):
        if "op" in value:  # a JSON Patch operation: its pointers must still point
            return {k: v if k in ("op", "path", "from") else _with_nul(v, k, tail) for k, v in value.items()}
        return {k: _with_nul(v, k, tail) for k, v in value.items()}
    if isinstance(value, list):
        if key in ("stepStatus", "gateState", "idempotency"):
            return [[_with_nul(pair[0], None, tail), _with_nul(pair[1], key, tail)] for pair in value]
        return [_with_nul(v, key, tail) for v in value]
    if isinstance(value, str):
        if key in _RUN_IDS or key == "type" or value in _ENUMS or _FIXED.fullmatch(value):
            return value
        return value + tail
    return value


def _bundles(conformance_dir):
    manifest = json.loads((conformance_dir / "manifest.json").read_text())["files"]
    for entry in manifest:
        if entry["category"] == "valid" and not entry["file"].endswith(".canonical.json"):
            yield entry["file"]


@pytest.mark.django_db
@pytest.mark.parametrize("tail", [NUL, NUL + "\uffff0" + "x" * 400], ids=["nul", "nul-escape-long"])
def test_nul_in_every_string_round_trips(conformance_dir, tmp_path, tail):
    """Also strings longer than their filter columns, and U+FFFF (the columns' escape) itself."""
    names = list(_bundles(conformance_dir))
    assert names
    for name in names:
        bundle = json.loads((conformance_dir / name).read_text())
        bundle.pop("integrity", None)
        run_id = bundle["run"]["id"]
        changed = _with_nul(bundle, tail=tail)
        changed["run"]["id"] = run_id
        signed = seal_bundle(changed)
        assert NUL in signed["run"]["workflowId"]
        source = tmp_path / "in.json"
        source.write_bytes(wire_bytes(signed))
        call_command("bundle", "import", str(source), "--workspace", "nul", stdout=StringIO())
        out = tmp_path / "out.json"
        call_command("bundle", "export", run_id, "-o", str(out))
        exported = parse_json(out.read_bytes())
        assert len(exported["integrity"].pop("attestations")) == 1, name  # the instance's signature
        assert canonical_bytes(exported) == canonical_bytes(signed), name
        assert Run.objects.get(run_id=run_id).last_seq == len(signed["trace"])
