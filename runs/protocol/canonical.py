"""Canonical JSON (RFC 8785 / JCS) with the reference runtime's JavaScript number semantics.

``canonical_bytes`` is byte-identical to the ``rfc8785`` package for every value that
package can represent (the tests check this differentially). Where the two part:

* integers beyond +-(2**53 - 1) are written as the IEEE double they denote, as JavaScript
  does once it has parsed them (``rfc8785`` refuses them);
* non-finite numbers (``float('inf')``, ``nan``) and strings with lone surrogates cannot be
  represented in canonical JSON: they raise :class:`ProtocolError` with code ``INVALID_INPUT``
  (for values built in Python). ``parse_json`` rejects such *text* with ``INVALID_JSON``
  (the exception is an :class:`UnrepresentableJSON`, so a bundle importer can tell the
  two cases apart). The reference would hash ``1e400`` as ``null`` and escape lone
  surrogates; we refuse both instead of hashing something that cannot round-trip.

Speed: the tree is handed to ``orjson`` with ``OPT_SORT_KEYS``; before that one pass
replaces every float whose orjson text differs from JavaScript's by an
``orjson.Fragment`` holding the JavaScript text, and every object whose key order under
UTF-16 code units differs from code-point order by a fragment serialized in UTF-16 order.
orjson's string escaping equals JCS's (minimal escapes, lowercase ``\\u00xx``).
"""

from __future__ import annotations

import gc
import hashlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import orjson

from runs.protocol.errors import ErrorCode, ProtocolError

MAX_SAFE_INTEGER = 2**53 - 1

_SORT = orjson.OPT_SORT_KEYS
_Fragment = orjson.Fragment


class UnrepresentableJSON(ProtocolError):
    """JSON text that parses but has no RFC 8785 form (non-finite number, lone surrogate)."""


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building large acyclic trees.

    Parsing a 100 MB bundle allocates millions of containers; each allocation burst would
    trigger a full collection that finds nothing. Cheap to use around any bulk work.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def parse_json(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse JSON text with the reference's (JavaScript) number semantics.

    Integers beyond +-(2**53 - 1) become the double they denote. Text that is not JSON
    raises ``ProtocolError(INVALID_JSON)``; JSON with a non-finite number (``1e400``) or
    a lone surrogate raises :class:`UnrepresentableJSON` (code ``INVALID_JSON`` as well).
    """
    try:
        with gc_paused():
            value = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise _classify_decode_error(exc) from None
    if _may_hold_big_int(data):
        value = _round_big_ints(value)
    return value


def _classify_decode_error(exc: orjson.JSONDecodeError) -> ProtocolError:
    text = str(exc)
    where = f"line {exc.lineno} column {exc.colno} (char {exc.pos})"
    if "infinity" in text:
        return UnrepresentableJSON(
            ErrorCode.INVALID_JSON,
            f"number at {where} is not finite; it has no canonical (RFC 8785) form",
        )
    if "surrogate" in text:
        return UnrepresentableJSON(
            ErrorCode.INVALID_JSON,
            f"string at {where} holds a lone UTF-16 surrogate; it has no canonical (RFC 8785) form",
        )
    return ProtocolError(ErrorCode.INVALID_JSON, f"not valid JSON: {text}")


def _may_hold_big_int(data: bytes | bytearray | memoryview | str) -> bool:
    # orjson keeps integers up to 64 bits exact; only a run of >= 16 digits can exceed 2**53 - 1.
    if isinstance(data, str):
        return _BIG_DIGITS_STR.search(data) is not None
    return _BIG_DIGITS.search(data) is not None


_BIG_DIGITS = re.compile(rb"[0-9]{16}")
_BIG_DIGITS_STR = re.compile(r"[0-9]{16}")


def _round_big_ints(value: Any) -> Any:
    t = type(value)
    if t is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
        return float(value)
    if t is dict:
        for k, v in value.items():
            tv = type(v)
            if tv is dict or tv is list or tv is int:
                value[k] = _round_big_ints(v)
        return value
    if t is list:
        for i, v in enumerate(value):
            tv = type(v)
            if tv is dict or tv is list or tv is int:
                value[i] = _round_big_ints(v)
        return value
    return value


def js_number(value: float | int) -> str:
    """ECMAScript ``Number::toString`` of a finite number (shortest round-trip digits)."""
    if type(value) is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return str(value)
        try:
            value = float(value)
        except OverflowError:
            raise ProtocolError(
                ErrorCode.INVALID_INPUT, "integer is too large for a JSON number (IEEE double)"
            ) from None
    if value != value or value in (_INF, -_INF):
        raise ProtocolError(ErrorCode.INVALID_INPUT, f"{value!r} has no canonical JSON (RFC 8785) form")
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
    if "." in text:
        int_part, frac_part = text.split(".")
    else:
        int_part, frac_part = text, ""
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


_INF = float("inf")


def _float_fragment(value: float) -> Any:
    # orjson prints non-integral doubles in [1e-5, 1e15) exactly like JavaScript does.
    if 1e-5 <= value < 1e15 or -1e15 < value <= -1e-5:
        if not value.is_integer():
            return value
    return _Fragment(js_number(value).encode())


def _utf16_key(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def _prepare(value: Any) -> Any:
    """Return ``value`` with JS-incompatible numbers and mis-ordered objects replaced by fragments.

    Containers that need no change are returned as is (no copy).
    """
    t = type(value)
    if t is str or t is bool or value is None:
        return value
    if t is dict:
        changed: dict[str, Any] | None = None
        ascii_keys = True
        for k, v in value.items():
            if type(k) is not str:
                raise ProtocolError(ErrorCode.INVALID_INPUT, f"object key {k!r} is not a string")
            if ascii_keys and not k.isascii():
                ascii_keys = False
            tv = type(v)
            if tv is str or tv is bool or v is None:
                continue
            nv = _prepare(v)
            if nv is not v:
                if changed is None:
                    changed = dict(value)
                changed[k] = nv
        result = value if changed is None else changed
        if not ascii_keys:
            keys = list(result)
            utf16_order = sorted(keys, key=_utf16_key)
            if utf16_order != sorted(keys):
                return _Fragment(_object_in_utf16_order(result, utf16_order))
        return result
    if t is list or t is tuple:
        changed_list: list[Any] | None = None
        for i, v in enumerate(value):
            tv = type(v)
            if tv is str or tv is bool or v is None:
                continue
            nv = _prepare(v)
            if nv is not v:
                if changed_list is None:
                    changed_list = list(value)
                changed_list[i] = nv
        return value if changed_list is None else changed_list
    if t is float:
        return _float_fragment(value)
    if t is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
        return _Fragment(js_number(value).encode())
    if isinstance(value, bool | int | float | str | dict | list | tuple):  # subclasses
        return _prepare(_plain(value))
    raise ProtocolError(ErrorCode.INVALID_INPUT, f"value of type {type(value).__name__} has no JSON form")


def _plain(value: Any) -> Any:
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, dict):
        return dict(value)
    return list(value)


def _object_in_utf16_order(obj: dict[str, Any], keys: list[str]) -> bytes:
    # values are already prepared (fragments or orjson-safe), keys are plain strings
    parts = [_dumps(k) + b":" + _dumps(obj[k]) for k in keys]
    return b"{" + b",".join(parts) + b"}"


def _dumps(value: Any) -> bytes:
    try:
        return orjson.dumps(value, option=_SORT)
    except orjson.JSONEncodeError as exc:
        raise ProtocolError(
            ErrorCode.INVALID_INPUT, f"value has no canonical JSON (RFC 8785) form: {exc}"
        ) from None


def canonical_bytes(value: Any) -> bytes:
    """RFC 8785 canonical UTF-8 bytes of a JSON value (JavaScript number semantics)."""
    return _dumps(_prepare(value))


def canonical_str(value: Any) -> str:
    """:func:`canonical_bytes` decoded as text."""
    return canonical_bytes(value).decode("utf-8")


def sha256_hex(data: bytes) -> str:
    """Lowercase hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()
