"""Protocol version migrations for run bundles.

A registry keyed on ``protocolVersion``: ``@register("0.9.0", "1.0.0")`` adds one step;
:func:`migrate_bundle` follows steps until ``CURRENT_PROTOCOL_VERSION`` and re-signs a
bundle it changed (a migrated bundle is a new document: its old hash cannot hold).
Missing ``protocolVersion`` or one with no path is ``UNSUPPORTED_PROTOCOL_VERSION``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from runs.protocol.errors import ErrorCode, ProtocolError
from runs.protocol.integrity import seal_bundle

CURRENT_PROTOCOL_VERSION = "1.0.0"

Migration = Callable[[dict[str, Any]], dict[str, Any]]

_MIGRATIONS: dict[str, tuple[str, Migration]] = {}


def register(from_version: str, to_version: str) -> Callable[[Migration], Migration]:
    """Register ``fn(bundle) -> bundle`` upgrading ``from_version`` to ``to_version``.

    The function receives a shallow copy it may change and returns the upgraded bundle
    (``protocolVersion`` is set by the registry). One step per source version.
    """
    if from_version == to_version:
        raise ValueError("a migration must change the protocol version")

    def decorator(fn: Migration) -> Migration:
        existing = _MIGRATIONS.get(from_version)
        if existing is not None and existing[1] is not fn:
            raise ValueError(f"a migration from {from_version!r} is already registered")
        _MIGRATIONS[from_version] = (to_version, fn)
        return fn

    return decorator


def unregister(from_version: str) -> None:
    """Remove the step from ``from_version`` (for tests registering throw-away migrations)."""
    _MIGRATIONS.pop(from_version, None)


def migration_path(from_version: str) -> list[str]:
    """Versions visited from ``from_version`` to the current one (``[]`` when already current)."""
    path: list[str] = []
    version = from_version
    while version != CURRENT_PROTOCOL_VERSION:
        step = _MIGRATIONS.get(version)
        if step is None or step[0] in path or step[0] == from_version:
            raise ProtocolError(
                ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
                f"no migration path from protocolVersion {from_version!r} to {CURRENT_PROTOCOL_VERSION!r}",
                "protocolVersion",
            )
        version = step[0]
        path.append(version)
    return path


def migrate_bundle(bundle: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """Upgrade ``bundle`` step by step to protocol 1.0.0: ``(bundle, migrated)``.

    An already-current bundle is returned as is with ``False``; a migrated one is a new,
    re-hashed dict with ``True``. The input is never modified.
    """
    if isinstance(bundle, list):  # an object to JavaScript: migration finds no version
        raise ProtocolError(
            ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
            "run bundle is an array: it has no `protocolVersion` and cannot be migrated",
            "protocolVersion",
        )
    if not isinstance(bundle, dict):
        raise ProtocolError(ErrorCode.INVALID_RUN_BUNDLE, "run bundle must be a JSON object")
    version = bundle.get("protocolVersion")
    if version is None:
        raise ProtocolError(
            ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
            "run bundle is missing `protocolVersion` and cannot be migrated",
            "protocolVersion",
        )
    if not isinstance(version, str):
        raise ProtocolError(
            ErrorCode.UNSUPPORTED_PROTOCOL_VERSION, "protocolVersion must be a string", "protocolVersion"
        )
    if version == CURRENT_PROTOCOL_VERSION:
        return bundle, False
    migration_path(version)  # fail before doing any work
    current = bundle
    while version != CURRENT_PROTOCOL_VERSION:
        to_version, fn = _MIGRATIONS[version]
        current = fn(dict(current))
        current["protocolVersion"] = to_version
        version = to_version
    return seal_bundle(current), True
