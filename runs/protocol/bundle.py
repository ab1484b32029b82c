"""Bundle check: everything a bundle import does except writing.

Order (the reference's, so the same error codes come out): parse JSON -> protocol version
and migration -> schema -> integrity -> structural invariants.

* not JSON: ``INVALID_JSON``; JSON with a non-finite number (``1e400``), a lone surrogate or
  more than ``canonical.MAX_NESTING`` (512) nested arrays/objects cannot be canonicalized or
  hashed here: ``INVALID_RUN_BUNDLE`` (the reference would hash ``1e400`` as ``null``; we
  refuse rather than accept what cannot round-trip);
* ``protocolVersion`` missing or without a migration path: ``UNSUPPORTED_PROTOCOL_VERSION``
  (a JSON array too: the reference hands it to migration; other non-objects are
  ``INVALID_RUN_BUNDLE``);
* schema: ``INVALID_RUN_BUNDLE`` with the JSON path;
* no ``integrity``: ``MISSING_INTEGRITY``; hash differs: ``INTEGRITY_MISMATCH``. The hash
  covers the JSON exactly as received (an added unknown key is a mismatch, unlike the
  reference). A migrated bundle is verified as received, before migration;
* structural: ``INVALID_WORKFLOW`` for the graph, ``INVALID_RUN_BUNDLE`` for the rest.
"""

from __future__ import annotations

import hmac
import threading
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any, Literal

from runs.protocol.canonical import (
    UnrepresentableJSON,
    UnsafePlaces,
    canonical_form,
    canonical_text_sha256,
    gc_paused,
    has_text_accelerator,
    load_json_exact,
    round_unsafe_integers,
    sha256_hex,
)
from runs.protocol.errors import ErrorCode, ProtocolError
from runs.protocol.integrity import HASHED_KEYS, declared_integrity, hash_input
from runs.protocol.migrations import migrate_bundle
from runs.protocol.validate import check_bundle_invariants, validate_bundle_schema

CheckIntegrity = Literal["valid", "mismatch", "missing", "unchecked"]


@dataclass
class CheckResult:
    """Outcome of :func:`check_bundle`.

    ``code`` is ``None`` when ``ok``; ``integrity`` is ``"unchecked"`` when the check
    stopped before integrity (unparsable, unsupported version, schema failure);
    ``message`` is the error (``CODE at path: message``); ``bundle`` is the parsed (and
    migrated) bundle whenever it parsed, with JavaScript number semantics applied.
    """

    ok: bool
    code: str | None
    integrity: CheckIntegrity
    message: str | None
    bundle: dict[str, Any] | None
    migrated: bool = False
    # indices of the trace's ``human_gate_resolved`` events, gathered by the schema pass (set
    # whenever the schema passed): lets runs.protocol.signing check approvals without a walk
    gate_resolved: list[int] | None = None


def check_bundle(data: bytes | str) -> CheckResult:
    """Check a run bundle's text as an import would, without writing anything."""
    with gc_paused(promote=len(data) >= OVERLAP_MIN_BYTES):
        return _check([data])


def check_bundle_file(path: str | PathLike[str]) -> CheckResult:
    """:func:`check_bundle` of a file's bytes (``OSError`` if it cannot be read).

    The file's bytes are released as soon as they are parsed and hashed (lower peak memory).
    """
    holder: list[bytes | str] = [Path(path).read_bytes()]
    with gc_paused(promote=len(holder[0]) >= OVERLAP_MIN_BYTES):
        return _check(holder)


# Texts from this size on are canonicalized in a thread while orjson parses them.
OVERLAP_MIN_BYTES = 1 << 20
_HASHED_MEMBERS = (*HASHED_KEYS, "engine")


class _TextDigest:
    """The integrity hash computed from the received text, beside the parse.

    Large texts go to a thread: the C canonicalizer releases the GIL, so it runs on a
    second core while orjson builds the tree, and it hashes as it writes, so it adds a
    few MB, not the canonical form's size, to the parse's peak. ``result()`` is ``None``
    when the text path is unavailable or refused the text; the tree path then decides.
    """

    def __init__(self, data: bytes | str) -> None:
        self._data: bytes | bytearray | None = None
        self._result: tuple[str, bool, UnsafePlaces | None] | None = None
        self._thread: threading.Thread | None = None
        if not has_text_accelerator() or not isinstance(data, bytes | bytearray):
            return
        if len(data) >= OVERLAP_MIN_BYTES:
            self._thread = threading.Thread(target=self._run, args=(data,), name="bundle-canonical")
            self._thread.start()
        else:
            self._data = data

    def _run(self, data: bytes | bytearray) -> None:
        self._result = canonical_text_sha256(data, _HASHED_MEMBERS)

    def result(self) -> tuple[str, bool, UnsafePlaces | None] | None:
        """The hex digest, whether the text held unsafe integers and where (asked once)."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        elif self._data is not None:
            self._run(self._data)
            self._data = None
        result, self._result = self._result, None
        return result

    def discard(self) -> None:
        """Drop whatever was not asked for; waits for a running thread."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._data = self._result = None


def _round_unsafe_integers(bundle: dict[str, Any], places: UnsafePlaces | None) -> None:
    """JavaScript's reading of integers beyond +-(2**53 - 1), applied where the text path saw
    them (a few events rather than a walk of the whole tree), or everywhere without places."""
    if places is None:
        round_unsafe_integers(bundle)
        return
    for member, index in places:
        if member is None:  # outside the hashed members
            for key, value in bundle.items():
                if key not in _HASHED_MEMBERS:
                    bundle[key] = round_unsafe_integers(value)
        elif index < 0:
            bundle[member] = round_unsafe_integers(bundle[member])
        else:
            bundle[member][index] = round_unsafe_integers(bundle[member][index])


def _failure(
    error: ProtocolError,
    integrity: CheckIntegrity,
    bundle: Any,
    migrated: bool = False,
    gate_resolved: list[int] | None = None,
) -> CheckResult:
    return CheckResult(
        ok=False,
        code=error.code,
        integrity=integrity,
        message=str(error),
        bundle=bundle if isinstance(bundle, dict) else None,
        migrated=migrated,
        gate_resolved=gate_resolved,
    )


def _check(holder: list[bytes | str]) -> CheckResult:
    text = _TextDigest(holder[-1])  # starts before the parse; holds the text until done
    try:
        return _check_parsed(holder, text)
    finally:
        text.discard()


def _check_parsed(holder: list[bytes | str], text: _TextDigest) -> CheckResult:
    try:
        received = load_json_exact(holder.pop())  # our reference to the text goes once parsed
    except UnrepresentableJSON as exc:
        return _failure(ProtocolError(ErrorCode.INVALID_RUN_BUNDLE, exc.message), "unchecked", None)
    except ProtocolError as exc:
        return _failure(exc, "unchecked", None)
    if type(received) is list:
        # As in the reference: an array is an object to JavaScript, so it reaches the
        # migration step, which finds no protocolVersion. Other non-objects fail the schema.
        error = ProtocolError(
            ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
            "run bundle is an array, not an object: it has no `protocolVersion` and cannot be migrated",
            "protocolVersion",
        )
        return _failure(error, "unchecked", None)
    if type(received) is not dict:
        error = ProtocolError(ErrorCode.INVALID_RUN_BUNDLE, "run bundle must be a JSON object")
        return _failure(error, "unchecked", None)

    try:
        bundle, migrated = migrate_bundle(received)
    except ProtocolError as exc:
        return _failure(exc, "unchecked", received)

    try:
        facts = validate_bundle_schema(bundle)
        if migrated:
            validate_bundle_schema(received)  # the hash is checked over what was received
    except ProtocolError as exc:
        return _failure(exc, "unchecked", bundle, migrated)

    declared = declared_integrity(received)
    if declared is None:
        error = ProtocolError(ErrorCode.MISSING_INTEGRITY, "run bundle has no integrity.sha256", "integrity")
        return _failure(error, "missing", bundle, migrated, facts.gate_resolved)
    from_text = text.result()
    unsafe_places: UnsafePlaces | None = None
    if from_text is not None:
        actual, unsafe_ints, unsafe_places = from_text
    else:
        try:
            canonical, unsafe_ints = canonical_form(hash_input(received))
            # the members outside the hash, as the text path sees them: JSON numbers, nesting
            rest = {key: value for key, value in received.items() if key not in _HASHED_MEMBERS}
            unsafe_ints = canonical_form(rest)[1] or unsafe_ints
        except ProtocolError as exc:  # a value with no canonical form
            return _failure(
                ProtocolError(ErrorCode.INVALID_RUN_BUNDLE, exc.message), "unchecked", bundle, migrated
            )
        actual = sha256_hex(canonical)
        del canonical
    if unsafe_ints:
        _round_unsafe_integers(bundle, None if migrated else unsafe_places)
    if not hmac.compare_digest(actual, declared):
        error = ProtocolError(
            ErrorCode.INTEGRITY_MISMATCH,
            f"declared sha256 {declared} but the content hashes to {actual}",
            "integrity.sha256",
        )
        return _failure(error, "mismatch", bundle, migrated, facts.gate_resolved)

    try:
        check_bundle_invariants(bundle, facts=facts)
    except ProtocolError as exc:
        return _failure(exc, "valid", bundle, migrated, facts.gate_resolved)
    return CheckResult(
        ok=True,
        code=None,
        integrity="valid",
        message=None,
        bundle=bundle,
        migrated=migrated,
        gate_resolved=facts.gate_resolved,
    )
