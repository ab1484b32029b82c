"""A minimal instance that satisfies a JSON Schema (enough for the playground's output schemas)."""

from __future__ import annotations

from typing import Any


def example_for(schema: Any, name: str = "value") -> Any:
    if not isinstance(schema, dict):
        return "value"
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        props = schema.get("properties") or {}
        if not props:
            return {"field": "value"}
        return {key: example_for(sub, key) for key, sub in props.items()}
    if kind == "array":
        return [example_for(schema.get("items", {}), name)]
    if kind == "boolean":
        return True
    if kind in ("number", "integer"):
        low = schema.get("minimum", 0)
        high = schema.get("maximum", low + 10)
        value = (low + high) / 2 if "maximum" in schema else max(low, 7)
        return int(value) if kind == "integer" else value
    if kind == "null":
        return None
    return f"{name} example"
