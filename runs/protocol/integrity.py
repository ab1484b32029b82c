"""Bundle integrity: SHA-256 over the canonical JSON of ``{run, trace, artifacts, ruleSets, engine?}``.

Verification hashes the bundle exactly as received: unlike the reference runtime (which
drops unknown keys before it verifies), a key added anywhere inside the covered parts
changes the hash and is reported as a mismatch.
"""

from __future__ import annotations

import copy
import hmac
from typing import Any, Literal

from runs.protocol.canonical import canonical_bytes, sha256_hex
from runs.protocol.errors import ErrorCode, ProtocolError

IntegrityStatus = Literal["valid", "mismatch", "missing"]

HASHED_KEYS: tuple[str, ...] = ("run", "trace", "artifacts", "ruleSets")


def hash_input(bundle: dict[str, Any]) -> dict[str, Any]:
    """The object whose canonical form is hashed: ``{run, trace, artifacts, ruleSets}`` + ``engine``.

    A missing covered key is absent from the input too (the reference's ``undefined``);
    ``engine`` is covered only when the bundle carries it.
    """
    if not isinstance(bundle, dict):
        raise ProtocolError(ErrorCode.INVALID_RUN_BUNDLE, "run bundle must be a JSON object")
    covered = {key: bundle[key] for key in HASHED_KEYS if key in bundle}
    if "engine" in bundle:
        covered["engine"] = bundle["engine"]
    return covered


def compute_integrity(bundle: dict[str, Any]) -> str:
    """Lowercase hex SHA-256 of the canonical JSON of :func:`hash_input`."""
    return sha256_hex(canonical_bytes(hash_input(bundle)))


def declared_integrity(bundle: dict[str, Any]) -> str | None:
    """The ``integrity.sha256`` the bundle declares, or ``None`` when it declares none."""
    integrity = bundle.get("integrity")
    if not isinstance(integrity, dict):
        return None
    declared = integrity.get("sha256")
    return declared if isinstance(declared, str) else None


def verify_integrity(bundle: dict[str, Any]) -> IntegrityStatus:
    """``"valid"``, ``"mismatch"`` or ``"missing"`` (no ``integrity.sha256``) for a bundle as received."""
    declared = declared_integrity(bundle)
    if declared is None:
        return "missing"
    actual = compute_integrity(bundle)
    return "valid" if hmac.compare_digest(actual, declared) else "mismatch"


def seal_bundle(bundle: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``bundle`` with ``integrity: {sha256}`` set to its current hash (input untouched)."""
    sealed = copy.copy(bundle)
    sealed["integrity"] = {"sha256": compute_integrity(bundle)}
    return sealed
