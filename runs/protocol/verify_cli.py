"""``workbench-verify`` (and ``manage.py bundle check``): verify run bundles, nothing else.

Start-up matters as much as the check for a command a user runs on one file: this module
imports only the protocol package (no Django, no settings, no URL loading, no system
checks), so the process costs the check plus about a tenth of a second. ``manage.py`` hands
``bundle check`` here before Django is set up, and the management command uses the same
function, so both print the same lines and exit with the same status.

    workbench-verify [--json] FILE...

One line per file: ``FILE: ok (integrity valid)`` or ``FILE: FAILED CODE (integrity ...) message``;
with ``--json`` one object per line ``{file, ok, code, integrity, message}``. Exit status 1 when
any file fails (0 otherwise, 2 for bad usage).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from runs.protocol.bundle import check_bundle_file


def check_line(name: str) -> dict[str, Any]:
    """The verdict on one file, as the CLI reports it."""
    try:
        result = check_bundle_file(name)
    except OSError as exc:
        return {
            "file": name,
            "ok": False,
            "code": "INVALID_INPUT",
            "integrity": "unchecked",
            "message": str(exc),
        }
    return {
        "file": name,
        "ok": result.ok,
        "code": result.code,
        "integrity": result.integrity,
        "message": result.message,
    }


def format_line(line: dict[str, Any], *, as_json: bool) -> str:
    if as_json:
        return json.dumps(line, ensure_ascii=False)
    status = "ok" if line["ok"] else f"FAILED {line['code']}"
    return f"{line['file']}: {status} (integrity {line['integrity']}) {line['message'] or ''}".rstrip()


def check_files(files: Sequence[str], *, as_json: bool, write: Callable[[str], Any]) -> bool:
    """Check each file in turn, writing one line per file; whether all passed."""
    all_ok = True
    for name in files:
        line = check_line(name)
        all_ok = all_ok and line["ok"]
        write(format_line(line, as_json=as_json))
    return all_ok


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="workbench-verify", description="Verify protocol 1.0.0 run bundles.")
    p.add_argument("files", nargs="+", help="bundle files")
    p.add_argument("--json", action="store_true", help="one JSON line per file")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)

    def write(text: str) -> None:
        sys.stdout.write(text + "\n")

    ok = check_files(args.files, as_json=args.json, write=write)
    sys.stdout.flush()
    return 0 if ok else 1


def fast_path(argv: Sequence[str]) -> int | None:
    """For ``manage.py``: the exit status of ``bundle check ARGS`` run here without Django,
    or ``None`` when ``argv`` is something else (or carries options only Django knows)."""
    if len(argv) < 3 or argv[1] != "bundle" or argv[2] != "check":
        return None
    rest = list(argv[3:])
    if any(arg.startswith("-") and arg != "--json" for arg in rest):
        return None  # --help, --settings, --traceback ...: let Django's command handle them
    if not any(not arg.startswith("-") for arg in rest):
        return None
    return main(rest)


if __name__ == "__main__":
    sys.exit(main())
