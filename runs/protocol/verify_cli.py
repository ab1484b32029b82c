"""``workbench-verify`` (and ``manage.py bundle check``): verify run bundles, nothing else.

Start-up matters as much as the check for a command a user runs on one file: this module
imports only the protocol package (no Django, no settings, no URL loading, no system
checks), so the process costs the check plus a few hundredths of a second. ``manage.py`` hands
``bundle check`` here before Django is set up, and the management command uses the same
function, so both print the same lines and exit with the same status.

    workbench-verify [--json] FILE...

One line per file: ``FILE: ok (integrity valid)`` or ``FILE: FAILED CODE (integrity ...) message``;
with ``--json`` one object per line ``{file, ok, code, integrity, message}``. Exit status 1 when
any file fails (0 otherwise, 2 for bad usage).

As a process (:func:`run`, the console script and ``manage.py``'s fast path) it leaves with
``os._exit`` once its lines are flushed: the last bundle's tree (millions of objects for a
100 MB bundle) is handed back to the OS in one go instead of being freed object by object
(about 0.1 s), and the interpreter's own teardown is skipped. Nothing else is pending then:
no atexit handler, no thread, no open file of ours.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from runs.protocol.bundle import CheckResult, check_bundle_file


def check_line(name: str, keep: list[CheckResult] | None = None) -> dict[str, Any]:
    """The verdict on one file, as the CLI reports it (``keep`` receives the full result)."""
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
    if keep is not None:
        keep.append(result)
    return {
        "file": name,
        "ok": result.ok,
        "code": result.code,
        "integrity": result.integrity,
        "message": result.message,
    }


def format_line(line: dict[str, Any], *, as_json: bool) -> str:
    if as_json:
        import json  # only here: plain lines need no json module at start-up

        return json.dumps(line, ensure_ascii=False)
    status = "ok" if line["ok"] else f"FAILED {line['code']}"
    return f"{line['file']}: {status} (integrity {line['integrity']}) {line['message'] or ''}".rstrip()


def check_files(
    files: Sequence[str],
    *,
    as_json: bool,
    write: Callable[[str], Any],
    keep: list[CheckResult] | None = None,
) -> bool:
    """Check each file in turn, writing one line per file; whether all passed.

    ``keep`` (for :func:`run`) holds the last file's result when this returns; each earlier
    one is dropped before the next file is read, so at most one tree is alive at a time.
    """
    all_ok = True
    for name in files:
        if keep:
            keep.clear()
        line = check_line(name, keep)
        all_ok = all_ok and line["ok"]
        write(format_line(line, as_json=as_json))
    return all_ok


def parser() -> Any:
    import argparse

    p = argparse.ArgumentParser(prog="workbench-verify", description="Verify protocol 1.0.0 run bundles.")
    p.add_argument("files", nargs="+", help="bundle files")
    p.add_argument("--json", action="store_true", help="one JSON line per file")
    return p


def main(argv: Sequence[str] | None = None, keep: list[CheckResult] | None = None) -> int:
    """The exit status of ``workbench-verify ARGV`` (in-process: the caller goes on)."""
    args = parser().parse_args(argv)

    def write(text: str) -> None:
        sys.stdout.write(text + "\n")

    ok = check_files(args.files, as_json=args.json, write=write, keep=keep)
    sys.stdout.flush()
    return 0 if ok else 1


def run(argv: Sequence[str] | None = None) -> NoReturn:
    """The console script: :func:`main`, then leave the process at once (see the module doc)."""
    keep: list[CheckResult] = []
    try:
        status = main(argv, keep)
    except SystemExit as exc:  # argparse: usage errors and --help
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    except BrokenPipeError:  # the reader went away (`| head`): no traceback, a failure status
        status = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:
            status = status or 1
    os._exit(status)


def fast_path(argv: Sequence[str]) -> None:
    """For ``manage.py``: run ``bundle check ARGS`` here without Django (the process ends),
    or return when ``argv`` is something else (or carries options only Django knows)."""
    if len(argv) < 3 or argv[1] != "bundle" or argv[2] != "check":
        return
    rest = list(argv[3:])
    if any(arg.startswith("-") and arg != "--json" for arg in rest):
        return  # --help, --settings, --traceback ...: let Django's command handle them
    if not any(not arg.startswith("-") for arg in rest):
        return
    run(rest)


if __name__ == "__main__":
    run()
