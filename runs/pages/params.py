"""Request parameters the pages share: bounded integers and JSON text fields."""

from __future__ import annotations

from typing import Any

import orjson

MAX_SAFE_INTEGER = 2**53 - 1


def int_param(params, name: str, default: int | None = None, minimum: int = 0) -> int | None:
    raw = params.get(name)
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except (TypeError, ValueError):
        return default
    # A query value beyond JavaScript's safe integers names nothing (no seq, page or cursor is that
    # large) and would overflow a database integer: treat it as absent.
    return default if abs(value) > MAX_SAFE_INTEGER else max(minimum, value)


def parse_json_field(text: str) -> tuple[Any, str]:
    try:
        return orjson.loads(text), ""
    except orjson.JSONDecodeError as exc:
        return None, f"Not valid JSON: {exc}"
