"""Schema registry: JSON Schemas (Draft 2020-12) for artifact types and rule payloads.

Artifacts carry a ``typeId`` and rule sets a ``ruleSchemaId``; both name a schema in a
:class:`SchemaRegistry`. A type id without a registered schema accepts any JSON value,
unless the registry is ``strict``. Validators are compiled once per schema and cached.

Failures are :class:`ProtocolError` with code ``INVALID_INPUT``; the error path points at
the offending value (``data.skills[0]``) and the message says what the schema wanted.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, best_match

from runs.protocol.errors import ErrorCode, ProtocolError

SCHEMA_DIR = Path(__file__).with_name("schemas")


def _json_path(prefix: str, parts: Iterable[Any]) -> str:
    out = prefix
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


class SchemaRegistry:
    """Named JSON Schemas with cached validators.

    ``register(type_id, schema)`` checks the schema (a bad schema is ``INVALID_INPUT``)
    and replaces any previous one; ``validate(type_id, data)`` raises on the first
    (most relevant) violation.
    """

    def __init__(self, *, strict: bool = False) -> None:
        self.strict = strict
        self._schemas: dict[str, dict[str, Any]] = {}
        self._validators: dict[str, Draft202012Validator] = {}

    def register(self, type_id: str, schema: dict[str, Any] | bool) -> None:
        if not isinstance(type_id, str) or not type_id.strip():
            raise ProtocolError(ErrorCode.INVALID_INPUT, "a schema type id is a non-empty string", "typeId")
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            raise ProtocolError(
                ErrorCode.INVALID_INPUT, f"schema for {type_id!r} is not a valid JSON Schema: {exc.message}"
            ) from None
        self._schemas[type_id] = schema  # type: ignore[assignment]
        self._validators[type_id] = Draft202012Validator(schema)

    def has(self, type_id: str) -> bool:
        return type_id in self._schemas

    def get(self, type_id: str) -> dict[str, Any] | None:
        return self._schemas.get(type_id)

    def type_ids(self) -> list[str]:
        return sorted(self._schemas)

    def validate(self, type_id: str, data: Any, *, path: str = "data") -> None:
        """Validate ``data`` against the schema of ``type_id`` (``INVALID_INPUT`` on failure)."""
        validator = self._validators.get(type_id)
        if validator is None:
            if self.strict:
                raise ProtocolError(ErrorCode.INVALID_INPUT, f"no schema is registered for {type_id!r}", path)
            return
        error = best_match(validator.iter_errors(data))
        if error is not None:
            raise ProtocolError(
                ErrorCode.INVALID_INPUT,
                f"{type_id}: {error.message}",
                _json_path(path, error.absolute_path),
            )

    def is_valid(self, type_id: str, data: Any) -> bool:
        try:
            self.validate(type_id, data)
        except ProtocolError:
            return False
        return True


def load_schema_dir(registry: SchemaRegistry, directory: Path = SCHEMA_DIR) -> SchemaRegistry:
    """Register every ``<type_id>.json`` file of ``directory``; the file name is the type id."""
    for file in sorted(directory.glob("*.json")):
        registry.register(file.name[: -len(".json")], json.loads(file.read_text(encoding="utf-8")))
    return registry


def default_registry(*, strict: bool = False) -> SchemaRegistry:
    """A fresh registry with the demo schemas: ``job.*``, ``playground.*`` and ``rules.*``."""
    return load_schema_dir(SchemaRegistry(strict=strict))
