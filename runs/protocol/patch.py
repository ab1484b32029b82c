"""RFC 6902 JSON Patch for artifact data.

``apply_patch(document, patch)`` returns the patched document and never touches its
inputs: the document is copied first (through orjson, much faster than ``deepcopy`` for
JSON trees) and the patch operations are applied to the copy. Any failure (malformed
operation, missing path, failed ``test``) is a :class:`ProtocolError` with code
``PATCH_FAILED`` whose path names the operation (``patch[2]``).

Operations are the protocol's strict objects: ``add``/``replace``/``test`` carry
``{op, path, value}``, ``remove`` ``{op, path}``, ``move``/``copy`` ``{op, path, from}``;
an extra or missing key is rejected before anything is applied. ``test`` compares with
JSON equality (``1`` is not ``true``, ``1`` equals ``1.0``), as the reference does.
"""

from __future__ import annotations

from typing import Any

import jsonpatch
import jsonpointer
import orjson

from runs.protocol.errors import ErrorCode, ProtocolError

_KEYS: dict[str, frozenset[str]] = {
    "add": frozenset({"op", "path", "value"}),
    "replace": frozenset({"op", "path", "value"}),
    "test": frozenset({"op", "path", "value"}),
    "remove": frozenset({"op", "path"}),
    "move": frozenset({"op", "path", "from"}),
    "copy": frozenset({"op", "path", "from"}),
}

_MISSING = object()


def json_copy(value: Any) -> Any:
    """A deep copy of a JSON value (dicts, lists, str, numbers, bool, None)."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    try:
        return orjson.loads(orjson.dumps(value))
    except (orjson.JSONEncodeError, TypeError):
        import copy

        return copy.deepcopy(value)


def check_patch(patch: Any, path: str = "patch") -> list[dict[str, Any]]:
    """Check that ``patch`` is a list of strict RFC 6902 operations; return it unchanged."""
    if not isinstance(patch, list):
        raise ProtocolError(ErrorCode.PATCH_FAILED, "a JSON Patch is a list of operations", path)
    for i, op in enumerate(patch):
        where = f"{path}[{i}]"
        if not isinstance(op, dict):
            raise ProtocolError(ErrorCode.PATCH_FAILED, "a patch operation is an object", where)
        name = op.get("op")
        keys = _KEYS.get(name) if isinstance(name, str) else None
        if keys is None:
            raise ProtocolError(ErrorCode.PATCH_FAILED, f"unknown patch operation {name!r}", where)
        if set(op) != keys:
            extra = sorted(set(op) - keys)
            missing = sorted(keys - set(op))
            detail = "; ".join(
                part
                for part in (
                    f"unexpected key(s) {', '.join(extra)}" if extra else "",
                    f"missing key(s) {', '.join(missing)}" if missing else "",
                )
                if part
            )
            raise ProtocolError(ErrorCode.PATCH_FAILED, f"{name} operation: {detail}", where)
        for key in ("path", "from"):
            if key in op and not (isinstance(op[key], str) and (op[key] == "" or op[key][0] == "/")):
                raise ProtocolError(
                    ErrorCode.PATCH_FAILED, f"{key} must be a JSON Pointer, got {op[key]!r}", f"{where}.{key}"
                )
    return patch


def apply_patch(document: Any, patch: Any) -> Any:
    """Apply an RFC 6902 patch to a copy of ``document`` and return the result.

    ``document`` may be any JSON value (``None`` when an artifact has no inline data is
    patched like an empty object, as the reference does).
    """
    check_patch(patch)
    doc = {} if document is None else json_copy(document)
    for i, op in enumerate(patch):
        try:
            # One operation at a time so the error names the failing one. The operation's
            # value is copied so later in-place operations never alias the caller's patch.
            single = dict(op)
            if "value" in single:
                single["value"] = json_copy(single["value"])
            doc = jsonpatch.JsonPatch([single]).apply(doc, in_place=True)
        except jsonpatch.JsonPatchTestFailed as exc:
            raise ProtocolError(ErrorCode.PATCH_FAILED, f"test failed: {exc}", f"patch[{i}]") from None
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as exc:
            raise ProtocolError(
                ErrorCode.PATCH_FAILED, f"{op['op']} {op['path']}: {exc}", f"patch[{i}]"
            ) from None
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise ProtocolError(
                ErrorCode.PATCH_FAILED, f"{op['op']} {op['path']}: {exc}", f"patch[{i}]"
            ) from None
    return doc
