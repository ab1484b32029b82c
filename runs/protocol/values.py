"""The one place for the small values every layer makes: timestamps, ids, JSON text.

now_iso()            # "2026-11-25T22:14:46.123Z", as JavaScript's Date.toISOString() prints it
new_id("evt")        # "evt_<uuid4>"
dumps(value) -> str  # compact JSON text (orjson; deeper than orjson allows: the wire writer)
loads(text) -> Any   # None for None or "" (an empty column), else the parsed value
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import orjson

from runs.protocol.canonical import wire_bytes


def now_iso() -> str:
    """Current time as JavaScript's ``new Date().toISOString()`` prints it."""
    now = datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4()}"


def dumps(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except orjson.JSONEncodeError as exc:
        if "Recursion" not in str(exc):
            raise
    # deeper than orjson writes (254 levels; the protocol layer accepts up to MAX_NESTING)
    return wire_bytes(value).decode()


def loads(text: str | bytes | None) -> Any:
    return orjson.loads(text) if text else None
