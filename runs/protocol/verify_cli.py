"""``workbench-verify`` (and ``manage.py bundle check``): verify run bundles, nothing else.

Start-up matters as much as the check for a command a user runs on one file: this module
imports only the protocol package (no Django, no settings, no URL loading, no system
checks), so the process costs the check plus a few hundredths of a second. ``manage.py`` hands
``bundle check`` here before Django is set up, and the management command uses the same
function, so both print the same lines and exit with the same status.

    workbench-verify [--json] [--keys JWKS [--validity FILE] [--require-signature]
                     [--detached FILE.dsse.json]] FILE...

One line per file: ``FILE: ok (integrity valid)`` or ``FILE: FAILED CODE (integrity ...) message``;
with ``--json`` one object per line ``{file, ok, code, integrity, message, signature}``.

Signatures (issue 25, :mod:`runs.protocol.signing`): with ``--keys`` (a JWKS; key validity in
its JWKs or in a sibling ``--validity`` document) each bundle that passed the check has its
``integrity.attestations`` (and the ``--detached`` envelope, one bundle only) verified, and
the line reads::

    FILE: ok: integrity valid; signed by key K (instance I, workspace W); exported by E at T; 2 approvals: ...
    FILE: ok: integrity valid; unsigned (integrity hash only)
    FILE: FAILED SIGNATURE_INVALID: integrity valid; <why>

``--require-signature`` refuses unsigned bundles. Without ``--keys`` a bundle that carries an
envelope is reported as carrying one, not as signed (nothing was verified). ``--json`` adds
``signature: {status: signed|unsigned|invalid|unverified, code, kid, instance, workspace,
exportedBy, at, redaction, approvals}``.

Exit status (of the first file that fails):

    0  every file passed
    1  the bundle check failed (INVALID_JSON, INTEGRITY_MISMATCH, ... or an unreadable file)
    2  bad usage, or a --keys/--validity file that cannot be read as a key set
    3  UNSIGNED (with --require-signature)
    4  SIGNATURE_INVALID          5  UNKNOWN_KEY          6  KEY_REVOKED
    7  SUBJECT_DIGEST_MISMATCH    8  APPROVAL_MISMATCH    9  PAYLOAD_TYPE_MISMATCH
    10 STATEMENT_INVALID

``cryptography`` is imported only when a signature is to be verified, so the plain check
starts as fast as before.

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

EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
# the exit status of each signature verdict code (runs.protocol.signing.VerdictCode)
SIGNATURE_EXIT = {
    "UNSIGNED": 3,
    "SIGNATURE_INVALID": 4,
    "UNKNOWN_KEY": 5,
    "KEY_REVOKED": 6,
    "SUBJECT_DIGEST_MISMATCH": 7,
    "APPROVAL_MISMATCH": 8,
    "PAYLOAD_TYPE_MISMATCH": 9,
    "STATEMENT_INVALID": 10,
}


class Signing:
    """What ``--keys``/``--validity``/``--require-signature``/``--detached`` ask for, loaded once."""

    def __init__(self, keys: Any, *, require_signature: bool = False, detached: Any = None) -> None:
        self.keys = keys  # a runs.protocol.signing.KeySet
        self.require_signature = require_signature
        self.detached = detached


def _read_json_file(name: str) -> Any:
    import json

    with open(name, "rb") as handle:
        return json.loads(handle.read())


def load_signing(
    keys: str, validity: str | None = None, *, require_signature: bool = False, detached: str | None = None
) -> Signing:
    """A :class:`Signing` from the option files; ``ValueError`` (with the reason) when a key or
    validity file cannot be read as one. A detached envelope that is not JSON is kept as its
    text: it then fails verification as a malformed envelope (``SIGNATURE_INVALID``)."""
    # Deferred: signing imports cryptography; a plain integrity check must not pay for it.
    from runs.protocol.signing_keys import KeySetError, load_keys

    try:
        key_set = load_keys(_read_json_file(keys), _read_json_file(validity) if validity else None)
    except (OSError, ValueError) as exc:  # JSONDecodeError and KeySetError are ValueErrors
        kind = "key set" if not isinstance(exc, KeySetError) else "JWKS/validity document"
        raise ValueError(f"cannot read the {kind}: {exc}") from exc
    envelope: Any = None
    if detached is not None:
        try:
            envelope = _read_json_file(detached)
        except OSError as exc:
            raise ValueError(f"cannot read the detached envelope: {exc}") from exc
        except ValueError:
            envelope = "(not JSON)"
    return Signing(key_set, require_signature=require_signature, detached=envelope)


def _signature_json(result: CheckResult) -> dict[str, Any]:
    """The ``signature`` member when no key set was given: the signature is not verified, but
    an attestation whose subject digest is not this bundle's hash is refused (no key needed)."""
    integrity = result.bundle.get("integrity") if result.bundle else None
    if isinstance(integrity, dict) and integrity.get("attestations"):
        # Deferred: signing imports cryptography; only a bundle with an attestation pays for it.
        from runs.protocol.signing import check_subjects_without_keys

        refused = check_subjects_without_keys(result.bundle or {})
        if refused is not None:
            return refused.to_json()
        return {
            "status": "unverified",
            "message": "signature not checked (no keys); give --keys to verify it",
        }
    return {"status": "unsigned"}


def check_line(
    name: str, keep: list[CheckResult] | None = None, signing: Signing | None = None
) -> dict[str, Any]:
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
            "signature": None,
        }
    if keep is not None:
        keep.append(result)
    line = {
        "file": name,
        "ok": result.ok,
        "code": result.code,
        "integrity": result.integrity,
        "message": result.message,
        "signature": None,
    }
    if not result.ok or result.bundle is None:
        return line
    if signing is None:
        signature = _signature_json(result)
        line["signature"] = signature
        if signature["status"] == "invalid":
            line.update(ok=False, code=signature["code"], message=signature["message"])
        return line
    # Deferred: cryptography only when a signature is checked (see above).
    from runs.protocol.signing import verify_attestations

    verdict = verify_attestations(
        result.bundle,
        signing.keys,
        require_signature=signing.require_signature,
        detached=signing.detached,
        integrity_checked=True,
        gate_indices=result.gate_resolved,
    )
    line["signature"] = verdict.to_json()
    line["summary"] = verdict.summary()
    if not verdict.ok:
        line.update(ok=False, code=verdict.code, message=verdict.message)
    return line


def exit_status(line: dict[str, Any]) -> int:
    """The exit status a line calls for (0 when it passed; see the module doc)."""
    if line["ok"]:
        return 0
    return SIGNATURE_EXIT.get(line["code"], EXIT_CHECK_FAILED)


def format_line(line: dict[str, Any], *, as_json: bool) -> str:
    if as_json:
        import json  # only here: plain lines need no json module at start-up

        return json.dumps({k: v for k, v in line.items() if k != "summary"}, ensure_ascii=False)
    if "summary" in line:  # a key set was given and the bundle check passed
        status = "ok" if line["ok"] else f"FAILED {line['code']}"
        what = line["summary"] if line["ok"] else line["message"]
        if not line["ok"] and line["code"] == "UNSIGNED":
            what = "unsigned (integrity hash only), and --require-signature was given"
        return f"{line['file']}: {status}: integrity valid; {what}"
    status = "ok" if line["ok"] else f"FAILED {line['code']}"
    text = f"{line['file']}: {status} (integrity {line['integrity']}) {line['message'] or ''}".rstrip()
    if (line.get("signature") or {}).get("status") == "unverified":
        text += "; signature not checked (no keys)"
    return text


def check_files(
    files: Sequence[str],
    *,
    as_json: bool,
    write: Callable[[str], Any],
    keep: list[CheckResult] | None = None,
    signing: Signing | None = None,
    statuses: list[int] | None = None,
) -> bool:
    """Check each file in turn, writing one line per file; whether all passed.

    ``keep`` (for :func:`run`) holds the last file's result when this returns; each earlier
    one is dropped before the next file is read, so at most one tree is alive at a time.
    ``statuses`` receives each file's exit status (:func:`exit_status`).
    """
    all_ok = True
    for name in files:
        if keep:
            keep.clear()
        line = check_line(name, keep, signing)
        all_ok = all_ok and line["ok"]
        if statuses is not None:
            statuses.append(exit_status(line))
        write(format_line(line, as_json=as_json))
    return all_ok


_EPILOG = """exit status (of the first file that fails): 0 all passed; 1 bundle check failed
(INVALID_JSON, INTEGRITY_MISMATCH, ..., unreadable file); 2 bad usage or unreadable key set;
3 UNSIGNED (--require-signature); 4 SIGNATURE_INVALID; 5 UNKNOWN_KEY; 6 KEY_REVOKED;
7 SUBJECT_DIGEST_MISMATCH; 8 APPROVAL_MISMATCH; 9 PAYLOAD_TYPE_MISMATCH; 10 STATEMENT_INVALID"""


def parser() -> Any:
    import argparse

    p = argparse.ArgumentParser(
        prog="workbench-verify",
        description="Verify protocol 1.0.0 run bundles (integrity, and with --keys their signatures).",
        epilog=_EPILOG,
    )
    p.add_argument("files", nargs="+", help="bundle files")
    p.add_argument("--json", action="store_true", help="one JSON line per file")
    p.add_argument("--keys", metavar="JWKS", help="JWKS of the signing keys: verify each bundle's signature")
    p.add_argument(
        "--validity",
        metavar="FILE",
        help="key validity document {keys: [{kid, notBefore, notAfter, revokedAt}]} (needs --keys)",
    )
    p.add_argument("--require-signature", action="store_true", help="refuse unsigned bundles (needs --keys)")
    p.add_argument(
        "--detached", metavar="FILE", help="a detached DSSE envelope (FILE.dsse.json) for the one bundle"
    )
    return p


def main(argv: Sequence[str] | None = None, keep: list[CheckResult] | None = None) -> int:
    """The exit status of ``workbench-verify ARGV`` (in-process: the caller goes on)."""
    p = parser()
    args = p.parse_args(argv)
    signing: Signing | None = None
    if args.keys is None and (args.validity or args.require_signature or args.detached):
        p.error("--validity, --require-signature and --detached need --keys")
    if args.detached and len(args.files) != 1:
        p.error("--detached goes with exactly one bundle file")
    if args.keys is not None:
        try:
            signing = load_signing(
                args.keys, args.validity, require_signature=args.require_signature, detached=args.detached
            )
        except ValueError as exc:
            sys.stderr.write(f"workbench-verify: {exc}\n")
            return EXIT_USAGE

    def write(text: str) -> None:
        sys.stdout.write(text + "\n")

    statuses: list[int] = []
    check_files(args.files, as_json=args.json, write=write, keep=keep, signing=signing, statuses=statuses)
    sys.stdout.flush()
    return next((status for status in statuses if status), 0)


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


# the options `manage.py bundle check` passes to workbench-verify before Django starts
FAST_OPTIONS = ("--json", "--keys", "--validity", "--require-signature", "--detached")


def fast_path(argv: Sequence[str]) -> None:
    """For ``manage.py``: run ``bundle check ARGS`` here without Django (the process ends),
    or return when ``argv`` is something else (or carries options only Django knows)."""
    if len(argv) < 3 or argv[1] != "bundle" or argv[2] != "check":
        return
    rest = list(argv[3:])
    if any(arg.startswith("-") and arg.split("=", 1)[0] not in FAST_OPTIONS for arg in rest):
        return  # --help, --settings, --traceback ...: let Django's command handle them
    if not any(not arg.startswith("-") for arg in rest):
        return
    run(rest)


if __name__ == "__main__":
    run()
