"""RFC 8785 (JCS) canonical JSON in pure Python, with JavaScript number semantics.

A small copy of what the server's ``runs.protocol.canonical.canonical_bytes`` writes (there
with orjson and a C accelerator), enough to compute cache keys byte-identically: object keys
sorted by UTF-16 code units, numbers as ECMAScript's ``Number::toString`` (integers beyond
+-(2**53 - 1) as the double they denote), strings with minimal escapes (lowercase ``\\u00xx``).
Non-finite numbers, lone surrogates and non-JSON types raise :class:`CanonicalError`.
"""

from __future__ import annotations

import json
from enum import Enum
from typing import Any

MAX_SAFE_INTEGER = 2**53 - 1
MAX_NESTING = 512
_INF = float("inf")


class CanonicalError(ValueError):
    """The value has no canonical JSON form."""


def js_number(value: float | int) -> str:
    """ECMAScript ``Number::toString`` of a finite number (shortest round-trip digits)."""
    if type(value) is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return str(value)
        try:
            value = float(value)
        except OverflowError:
            raise CanonicalError("integer is too large for a JSON number (IEEE double)") from None
    if value != value or value in (_INF, -_INF):
        raise CanonicalError(f"{value!r} has no canonical JSON (RFC 8785) form")
    if value == 0:
        return "0"
    text = repr(value)
    sign = ""
    if text[0] == "-":
        sign = "-"
        text = text[1:]
    exp = 0
    if "e" in text:
        text, exp_text = text.split("e")
        exp = int(exp_text)
    int_part, _, frac_part = text.partition(".")
    digits = int_part + frac_part
    n = len(int_part) + exp  # value = 0.<digits> * 10**n
    stripped = digits.lstrip("0")
    n -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        out = digits + "0" * (n - k)
    elif 0 < n <= 21:
        out = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        out = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
        out = f"{mantissa}e{'+' if e >= 0 else '-'}{abs(e)}"
    return sign + out


def _string(text: str) -> str:
    # json.dumps without ensure_ascii escapes exactly what JCS escapes, in its (lowercase) form
    return json.dumps(text, ensure_ascii=False)


def _utf16(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def _nest(depth: int) -> int:
    """The depth of a container's members (the container counts); refused beyond MAX_NESTING."""
    if depth + 1 > MAX_NESTING:
        raise CanonicalError(f"value is nested deeper than {MAX_NESTING} arrays and objects")
    return depth + 1


def _write(value: Any, out: list[str], depth: int) -> None:
    """Append the canonical JSON of ``value``; ``depth`` counts the arrays and objects around it."""
    if value is None:
        out.append("null")
    elif value is True or value is False:
        out.append("true" if value else "false")
    elif isinstance(value, Enum):
        raise CanonicalError(f"value of type {type(value).__name__} has no canonical JSON form")
    elif isinstance(value, str):
        out.append(_string(str.__str__(value)))
    elif isinstance(value, int | float):
        out.append(js_number(int(value) if isinstance(value, int) else float(value)))
    elif isinstance(value, dict):
        inner = _nest(depth)
        members = []
        for key, item in value.items():
            if not isinstance(key, str):
                raise CanonicalError(f"object key {key!r} is not a string")
            members.append((str.__str__(key), item))
        members.sort(key=lambda member: _utf16(member[0]))
        out.append("{")
        for i, (key, item) in enumerate(members):
            if i:
                out.append(",")
            out.append(_string(key))
            out.append(":")
            _write(item, out, inner)
        out.append("}")
    elif isinstance(value, list | tuple):
        inner = _nest(depth)
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, out, inner)
        out.append("]")
    else:
        raise CanonicalError(f"value of type {type(value).__name__} has no canonical JSON form")


def canonical_bytes(value: Any) -> bytes:
    """RFC 8785 canonical UTF-8 bytes of a JSON value (JavaScript number semantics)."""
    out: list[str] = []
    _write(value, out, 0)
    try:
        return "".join(out).encode("utf-8")
    except UnicodeEncodeError:
        raise CanonicalError("a string holds a lone UTF-16 surrogate; it has no canonical form") from None
