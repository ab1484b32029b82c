"""workbench-verify and `manage.py bundle check`: the protocol-only start-up path."""

from __future__ import annotations

import json
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from runs.protocol.verify_cli import fast_path, main
from tests.conftest import REPO


def _manifest(conformance_dir: Path) -> list[dict]:
    entries = json.loads((conformance_dir / "manifest.json").read_text())["files"]
    return [e for e in entries if e["category"] in ("valid", "tampered", "invalid")]


def test_console_entry_point_matches_the_manifest(conformance_dir, capsys):
    entries = _manifest(conformance_dir)
    files = [str(conformance_dir / e["file"]) for e in entries]
    status = main(["--json", *files])
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["code"] for line in lines] == [e.get("expectedErrorCode") for e in entries]
    assert status == (0 if all(e.get("expectedErrorCode") is None for e in entries) else 1)


def test_manage_py_checks_without_setting_up_django(conformance_dir):
    """The real command line: Django is never imported for `bundle check`, the lines are
    flushed before the process leaves (os._exit) and the status says a file failed."""
    valid = str(conformance_dir / "valid" / "linear_completed.json")
    tampered = str(conformance_dir / "tampered" / "cost_amount_changed.json")
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "manage.py", "bundle", "check", "--json", valid, tampered],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    out = proc.stdout.splitlines()
    assert json.loads(out[0])["ok"] is True
    assert json.loads(out[1])["code"] == "INTEGRITY_MISMATCH"
    assert proc.returncode == 1
    imported = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line]
    assert "runs.protocol.bundle" in imported
    assert not [m for m in imported if m == "django" or m.startswith("django.")]


def test_console_script_process_flushes_and_exits_with_the_status(conformance_dir, tmp_path):
    valid = str(conformance_dir / "valid" / "linear_completed.json")
    script = Path(sys.executable).parent / "workbench-verify"
    argv = [str(script)] if script.exists() else [sys.executable, "-m", "runs.protocol.verify_cli"]
    ok = subprocess.run([*argv, valid], cwd=REPO, capture_output=True, text=True)
    assert (ok.returncode, ok.stdout) == (0, f"{valid}: ok (integrity valid)\n")
    missing = subprocess.run(
        [*argv, valid, str(tmp_path / "nope.json")], cwd=REPO, capture_output=True, text=True
    )
    assert missing.returncode == 1
    assert missing.stdout.splitlines()[1].startswith(f"{tmp_path / 'nope.json'}: FAILED INVALID_INPUT")
    usage = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
    assert usage.returncode == 2 and "usage:" in usage.stderr


def test_same_lines_through_django_and_the_fast_path(conformance_dir, capsys):
    files = [
        str(conformance_dir / "valid" / "linear_completed.json"),
        str(conformance_dir / "invalid" / "json_truncated.json"),
    ]
    assert main(files) == 1  # what fast_path runs before it ends the process
    fast = capsys.readouterr().out
    out = StringIO()
    with pytest.raises(SystemExit):
        call_command("bundle", "check", *files, stdout=out)
    assert out.getvalue() == fast


def test_other_commands_and_django_options_are_left_to_django():
    assert fast_path(["manage.py", "migrate"]) is None
    assert fast_path(["manage.py", "bundle", "import", "x.json"]) is None
    assert fast_path(["manage.py", "bundle", "check", "--help"]) is None
    assert fast_path(["manage.py", "bundle", "check", "--settings=x", "a.json"]) is None
    assert fast_path(["manage.py", "bundle", "check"]) is None


def test_missing_file_is_a_coded_failure(tmp_path, capsys):
    assert main(["--json", str(tmp_path / "nope.json")]) == 1
    line = json.loads(capsys.readouterr().out)
    assert (line["ok"], line["code"], line["integrity"]) == (False, "INVALID_INPUT", "unchecked")
