"""Request parameters the pages share: bounded integers and JSON text fields."""

from __future__ import annotations

from typing import Any

import orjson


def int_param(params, name: str, default: int | None = None, minimum: int = 0) -> int | None:
    raw = params.get(name)
    if raw in (None, ""):
        return default
    try:
        return max(minimum, int(raw))
    except (TypeError, ValueError):
        return default


def parse_json_field(text: str) -> tuple[Any, str]:
    try:
        return orjson.loads(text), ""
    except orjson.JSONDecodeError as exc:
        return None, f"Not valid JSON: {exc}"
