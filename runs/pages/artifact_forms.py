"""Schema-driven editing of artifact data: the form fields a JSON Schema allows, coercion, errors."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator

from runs.protocol.schemas import SchemaRegistry, default_registry


@lru_cache(maxsize=1)
def schema_registry() -> SchemaRegistry:
    return default_registry()


def schema_errors(schema: dict | None, data: Any) -> list[dict[str, str]]:
    """All schema violations of ``data`` as {path, field, message}, in document order."""
    if not schema:
        return []
    validator = Draft202012Validator(schema)
    out = []
    for err in sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path]):
        parts = list(err.absolute_path)
        if err.validator == "required" and isinstance(err.instance, dict):
            # point at the missing property itself
            missing = [p for p in (schema_required_missing(err)) if p]
            parts = parts + missing[:1]
        out.append(
            {
                "path": "/" + "/".join(str(p) for p in parts),
                "field": str(parts[0]) if parts else "",
                "message": err.message,
            }
        )
        if len(out) >= 50:
            break
    return out


def schema_required_missing(err) -> list[str]:
    return [
        name
        for name in (err.validator_value or [])
        if isinstance(err.instance, dict) and name not in err.instance
    ]


SCALAR_TYPES = {"string", "number", "integer", "boolean"}


def simple_form_fields(schema: dict | None) -> list[dict[str, Any]] | None:
    """Fields for a form when the schema is an object of scalar properties; None otherwise."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return None
    props = schema.get("properties")
    if not isinstance(props, dict) or not props:
        return None
    fields = []
    required = set(schema.get("required") or [])
    for name, prop in props.items():
        if not isinstance(prop, dict):
            return None
        ptype = prop.get("type")
        if ptype not in SCALAR_TYPES:
            return None
        fields.append(
            {
                "name": name,
                "type": ptype,
                "required": name in required,
                "enum": prop.get("enum"),
                "title": prop.get("title"),
            }
        )
    return fields


def coerce_form_value(ftype: str, raw: str) -> tuple[Any, str]:
    if ftype == "boolean":
        return raw in ("on", "true", "1"), ""
    if raw == "":
        return None, ""
    if ftype == "integer":
        try:
            return int(raw), ""
        except ValueError:
            return raw, "Enter a whole number."
    if ftype == "number":
        try:
            value = float(raw)
            return (
                int(value) if value.is_integer() and "." not in raw and "e" not in raw.lower() else value
            ), ""
        except ValueError:
            return raw, "Enter a number."
    return raw, ""
