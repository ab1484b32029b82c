"""Artifact versions: patching, payload hashes and idempotency digests."""

from __future__ import annotations

import re
from typing import Any

from runs.protocol.canonical import canonical_bytes, sha256_hex
from runs.protocol.patch import apply_patch

HEX64 = re.compile(r"^[0-9a-f]{64}$")


def payload_hash(data: Any) -> str:
    """SHA-256 of the canonical JSON (RFC 8785) of ``data``."""
    return sha256_hex(canonical_bytes(data))


def patched_version(
    prev: dict[str, Any], *, to_version: int | None, created_at: str | None, patch: Any
) -> dict[str, Any]:
    """The version an ``artifact_patch`` produces from ``prev`` (raises ``PATCH_FAILED``).

    Like the reference it keeps ``typeId`` and the pointer; unlike the reference, a pointer
    that carries ``payloadHash`` (or its alias ``sha256``, or ``byteLength``) gets them
    recomputed for the patched data, so the hash keeps describing the payload. ``patch`` is
    checked here (a replayed trace may carry anything); the version and time are copied as given.
    """
    data = apply_patch(prev.get("data"), patch)
    artifact: dict[str, Any] = {
        "artifactKey": prev["artifactKey"],
        "typeId": prev["typeId"],
        "version": to_version,
        "createdAt": created_at,
        "data": data,
    }
    pointer = prev.get("pointer")
    if pointer is not None:
        artifact["pointer"] = refreshed_pointer(pointer, data)
    return artifact


def refreshed_pointer(pointer: dict[str, Any], data: Any) -> dict[str, Any]:
    if not any(k in pointer for k in ("payloadHash", "sha256", "byteLength")):
        return pointer
    body = canonical_bytes(data)
    out = dict(pointer)
    digest = sha256_hex(body)
    if "payloadHash" in out:
        out["payloadHash"] = digest
    if "sha256" in out:
        out["sha256"] = digest
    if "byteLength" in out:
        out["byteLength"] = len(body)
    return out


def write_digest(artifact_key: str, type_id: str | None, data: Any, pointer: Any) -> str:
    """Content digest of a write, to tell a retry (same digest) from a conflict."""
    return sha256_hex(
        canonical_bytes(
            {"op": "write", "artifactKey": artifact_key, "typeId": type_id, "data": data, "pointer": pointer}
        )
    )


def patch_digest(artifact_key: str, from_version: int, patch: Any) -> str:
    """Content digest of a patch, to tell a retry (same digest) from a conflict."""
    return sha256_hex(
        canonical_bytes(
            {"op": "patch", "artifactKey": artifact_key, "fromVersion": from_version, "patch": patch}
        )
    )


def pointer_problem(pointer: Any, data: Any, has_data: bool) -> tuple[str, str] | None:
    """``(path, message)`` when ``pointer`` is not a valid protocol pointer for ``data``."""
    if not isinstance(pointer, dict):
        return "pointer", "pointer must be an object"
    kind = pointer.get("kind")
    if kind not in ("inline", "external"):
        return "pointer.kind", "pointer kind must be inline or external"
    unknown = set(pointer) - {"kind", "ref", "payloadHash", "sha256", "byteLength"}
    if unknown:
        return "pointer", f"unknown pointer key(s): {', '.join(sorted(unknown))}"
    if kind == "external" and not (isinstance(pointer.get("ref"), str) and pointer["ref"]):
        return "pointer.ref", "an external pointer needs a ref"
    if "ref" in pointer and not isinstance(pointer["ref"], str):
        return "pointer.ref", "ref must be a string"
    for key in ("payloadHash", "sha256"):
        if key in pointer and not (isinstance(pointer[key], str) and HEX64.match(pointer[key])):
            return f"pointer.{key}", f"{key} must be 64 lowercase hex digits"
    if "payloadHash" in pointer and "sha256" in pointer and pointer["payloadHash"] != pointer["sha256"]:
        return "pointer.sha256", "sha256 (deprecated alias) must equal payloadHash"
    if "byteLength" in pointer and not (type(pointer["byteLength"]) is int and pointer["byteLength"] >= 0):
        return "pointer.byteLength", "byteLength must be an integer >= 0"
    declared = pointer.get("payloadHash", pointer.get("sha256"))
    if declared is not None and has_data and declared != payload_hash(data):
        return "pointer.payloadHash", "payloadHash does not match the canonical JSON of data"
    return None
