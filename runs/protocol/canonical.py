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

From JSON *text*, :func:`canonical_text` uses the compiled ``runs.protocol._jcs`` (built by
setup.py where a C compiler exists): it parses and writes the canonical form in one pass
with the GIL released, so a bundle check can hash the text while orjson parses it in
another thread. It yields the same bytes as ``canonical_form(parse_json(text))`` (tested
differentially) or ``None``, in which case the caller uses the tree.
"""

from __future__ import annotations

import gc
import hashlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from typing import Any

import orjson

from runs.protocol.errors import ErrorCode, ProtocolError

try:
    from runs.protocol import _jcs  # typed by _jcs.pyi
except ImportError:  # not built (no C compiler): the tree path gives the same bytes
    _jcs = None  # type: ignore[assignment]  # the optional C extension: a module or None

MAX_SAFE_INTEGER = 2**53 - 1
# Nested arrays and objects (the outermost counts) a document may hold. The reference has no
# limit of its own short of its stack; 512 leaves room for what it writes (artifact data nested
# 256 levels inside a bundle) while every walk here stays far from Python's and C's stacks.
# Deeper documents are refused with a coded error, never a crash. orjson writes only 254
# levels: deeper values take the pure-Python writers below (same bytes, slower).
MAX_NESTING = 512
_ORJSON_NESTING = 254
# The recursive walkers need about one Python frame per level on top of the caller's stack.
if sys.getrecursionlimit() < 4 * MAX_NESTING:
    sys.setrecursionlimit(4 * MAX_NESTING)
_TOO_DEEP = f"nested deeper than {MAX_NESTING} arrays and objects"
_INF = float("inf")

_SORT = orjson.OPT_SORT_KEYS
_Fragment = orjson.Fragment


class UnrepresentableJSON(ProtocolError):
    """JSON text that parses but has no RFC 8785 form (non-finite number, lone surrogate)."""


@contextmanager
def gc_paused(promote: bool = False) -> Iterator[None]:
    """Pause the cyclic garbage collector while building large acyclic trees.

    Parsing a 100 MB bundle allocates millions of containers; each allocation burst would
    trigger a full collection that finds nothing. Cheap to use around any bulk work.

    ``promote`` (for a tree that outlives the block): on leaving, what was allocated moves
    straight to the oldest generation (``gc.freeze(); gc.unfreeze()``, constant time), so
    the first young collection after the pause does not walk the millions of containers
    (0.15 s for 86 MB here) only to find no cycle. Other young objects of the process move
    with them and wait for the next full collection instead.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if promote:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def parse_json(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse JSON text with the reference's (JavaScript) number semantics.

    Integers beyond +-(2**53 - 1) become the double they denote. Text that is not JSON
    raises ``ProtocolError(INVALID_JSON)``; JSON with a non-finite number (``1e400``), a
    lone surrogate or more than :data:`MAX_NESTING` levels raises
    :class:`UnrepresentableJSON` (code ``INVALID_JSON`` as well).
    """
    value = load_json_exact(data)
    try:
        orjson.dumps(value, option=orjson.OPT_STRICT_INTEGER)
    except orjson.JSONEncodeError as exc:
        if "Recursion" in str(exc) and nesting_depth(value) > MAX_NESTING:
            raise UnrepresentableJSON(ErrorCode.INVALID_JSON, f"JSON text is {_TOO_DEEP}") from None
        value = round_unsafe_integers(value)
    return value


def nesting_depth(value: Any) -> int:
    """How many arrays and objects are nested in ``value`` (the outermost counts; iterative)."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        t = type(item)
        if t is dict:
            children: Any = item.values()
        elif t is list or t is tuple:
            children = item
        else:
            continue
        if depth > deepest:
            deepest = depth
            if deepest > MAX_NESTING:
                return deepest
        for child in children:
            tc = type(child)
            if tc is dict or tc is list or tc is tuple:
                stack.append((child, depth + 1))
    return deepest


def load_json_exact(data: bytes | bytearray | memoryview | str) -> Any:
    """Like :func:`parse_json` but integers up to 64 bits stay exact Python ints.

    For callers that own the result and apply :func:`round_unsafe_integers` only when
    needed (the bundle check learns it for free from :func:`canonical_bytes`).
    """
    try:
        with gc_paused():
            return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise _classify_decode_error(exc) from None


def has_unsafe_integer(value: Any) -> bool:
    """Whether ``value`` holds an int beyond +-(2**53 - 1) (checked in C by orjson)."""
    try:
        orjson.dumps(value, option=orjson.OPT_STRICT_INTEGER)
    except orjson.JSONEncodeError:
        return True
    return False


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
    if "depth limit" in text:
        return UnrepresentableJSON(ErrorCode.INVALID_JSON, f"JSON text is {_TOO_DEEP}")
    return ProtocolError(ErrorCode.INVALID_JSON, f"not valid JSON: {text}")


def round_unsafe_integers(value: Any) -> Any:
    """Replace (in place where possible) every int beyond +-(2**53 - 1) by the double it denotes."""
    t = type(value)
    if t is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
        return float(value)
    if t is dict:
        for k, v in value.items():
            tv = type(v)
            if tv is dict or tv is list or tv is int:
                value[k] = round_unsafe_integers(v)
        return value
    if t is list:
        for i, v in enumerate(value):
            tv = type(v)
            if tv is dict or tv is list or tv is int:
                value[i] = round_unsafe_integers(v)
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


def _utf16_key(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


_ASTRAL_LEADS = (b"\xf0", b"\xf1", b"\xf2", b"\xf3", b"\xf4")


def _may_misorder_keys(out: bytes) -> bool:
    """Whether UTF-16 order could differ from orjson's code-point order somewhere in ``out``.

    The two orders differ only between a character in U+E000..U+FFFF (UTF-8 lead byte
    0xEE/0xEF) and one beyond the BMP (lead byte 0xF0..0xF4); without both, no object can
    be mis-sorted. Single-byte searches run at memchr speed.
    """
    if out.isascii():
        return False
    if b"\xee" not in out and b"\xef" not in out:
        return False
    return any(lead in out for lead in _ASTRAL_LEADS)


def _keys_misordered(obj: dict[str, Any]) -> bool:
    """Whether the object's keys sort differently by UTF-16 code units than by code points."""
    if len(obj) < 2:
        return False
    try:
        if "".join(obj).isascii():  # one C-level pass over all keys
            return False
    except TypeError:
        raise ProtocolError(ErrorCode.INVALID_INPUT, "object keys must be strings") from None
    keys = list(obj)
    return sorted(keys, key=_utf16_key) != sorted(keys)


def _float_is_safe(value: float) -> bool:
    """Whether orjson prints ``value`` exactly as JavaScript does (tested over random doubles).

    Both write shortest round-trip digits; they agree on plain decimals for non-integral
    magnitudes in [1e-5, 1e16) and on exponent form (``1e-7``, ``5e+21``) below 1e-6 and
    from 1e21 on. Zero, integral values, [1e-6, 1e-5), [1e16, 1e21) and non-finite values
    take the exact pass.
    """
    if 1e-5 <= value < 1e16 or -1e16 < value <= -1e-5:
        return not value.is_integer()
    return 1e21 <= value < _INF or -_INF < value <= -1e21 or (0 < value < 1e-6) or (-1e-6 < value < 0)


def _needs_exact_pass(value: Any, check_keys: bool) -> bool:
    """Whether orjson's sorted output of ``value`` could differ from the canonical form.

    True on the first float orjson prints differently from JavaScript, object mis-ordered
    under UTF-16 (only looked at when ``check_keys``) or value of a non-JSON type.
    """
    t = type(value)
    if t is dict:
        if check_keys and _keys_misordered(value):
            return True
        items: Any = value.values()
    elif t is list:
        items = value
    else:
        return _leaf_needs_exact_pass(value)
    for v in items:
        tv = type(v)
        if tv is str or tv is int or tv is bool or v is None:
            continue
        if tv is float:
            if _float_is_safe(v):
                continue
            return True
        if tv is dict or tv is list:
            if _needs_exact_pass(v, check_keys):
                return True
            continue
        return True
    return False


def _leaf_needs_exact_pass(value: Any) -> bool:
    t = type(value)
    if t is str or t is int or t is bool or value is None:
        return False
    if t is float:
        return not _float_is_safe(value)
    return True


def _prepare(value: Any, check_keys: bool = True, normalize: bool = False) -> Any:
    """Return ``value`` with JS-incompatible numbers and mis-ordered objects replaced by fragments.

    Containers that need no change are returned as is (no copy). ``check_keys`` checks key
    types and UTF-16 order (skipped when orjson's output showed both cannot be at fault).
    ``normalize`` turns ``str`` subclass keys into plain strings (only needed after orjson
    refused the value). Raises ``ProtocolError(INVALID_INPUT)`` for what has no canonical form.
    """
    t = type(value)
    if t is dict:
        if normalize and any(type(k) is not str for k in value):
            value = {_plain_key(k): v for k, v in value.items()}
        changed: dict[str, Any] | None = None
        for k, v in value.items():
            tv = type(v)
            if tv is str or tv is bool or v is None:
                continue
            if tv is int:
                if -MAX_SAFE_INTEGER <= v <= MAX_SAFE_INTEGER:
                    continue
                nv: Any = _Fragment(js_number(v).encode())
            elif tv is float:
                if _float_is_safe(v):
                    continue
                nv = _Fragment(js_number(v).encode())
            else:
                nv = _prepare(v, check_keys, normalize)
                if nv is v:
                    continue
            if changed is None:
                changed = dict(value)
            changed[k] = nv
        result = value if changed is None else changed
        if check_keys:
            if _keys_misordered(result):  # raises for non-string keys (single ones: orjson does)
                keys = sorted(result, key=_utf16_key)
                return _Fragment(_object_in_utf16_order(result, keys))
        return result
    if t is list or t is tuple:
        changed_list: list[Any] | None = None
        for i, v in enumerate(value):
            tv = type(v)
            if tv is str or tv is bool or v is None:
                continue
            if tv is int:
                if -MAX_SAFE_INTEGER <= v <= MAX_SAFE_INTEGER:
                    continue
                nv = _Fragment(js_number(v).encode())
            elif tv is float:
                if _float_is_safe(v):
                    continue
                nv = _Fragment(js_number(v).encode())
            else:
                nv = _prepare(v, check_keys, normalize)
                if nv is v:
                    continue
            if changed_list is None:
                changed_list = list(value)
            changed_list[i] = nv
        return value if changed_list is None else changed_list
    if t is str or t is bool or value is None:
        return value
    if t is float or t is int:
        if t is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
        if t is float and _float_is_safe(value):
            return value
        return _Fragment(js_number(value).encode())  # raises for non-finite values
    if isinstance(value, bool | int | float | str | dict | list | tuple) and not isinstance(value, Enum):
        return _prepare(_plain(value), check_keys, normalize)
    raise ProtocolError(
        ErrorCode.INVALID_INPUT, f"value of type {type(value).__name__} has no canonical JSON form"
    )


def _plain_key(key: Any) -> str:
    if isinstance(key, str):
        return str.__str__(key)
    raise ProtocolError(ErrorCode.INVALID_INPUT, f"object key {key!r} is not a string")


def _plain(value: Any) -> Any:
    """The plain JSON type behind a subclass of one (``str`` subclasses, ``IntFlag`` aside)."""
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str.__str__(value)  # the text itself: str() may hand back the subclass (SafeString)
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
        reason = _TOO_DEEP if "Recursion" in str(exc) else str(exc)
        raise ProtocolError(
            ErrorCode.INVALID_INPUT, f"value has no canonical JSON (RFC 8785) form: {reason}"
        ) from None


_FAST_OPTIONS = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_STRICT_INTEGER
    | orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
)


def canonical_form(value: Any) -> tuple[bytes, bool]:
    """Canonical bytes of ``value`` and whether it held integers beyond +-(2**53 - 1).

    Fast path: orjson writes the sorted form (refusing unsafe integers, subclasses and
    other non-JSON types); one read-only walk confirms no float needs JavaScript's
    formatting and, only when the output mixes U+E000..U+FFFF with astral characters, that
    no object is mis-ordered under UTF-16. Otherwise the exact pass rebuilds what differs.
    """
    try:
        out = orjson.dumps(value, option=_FAST_OPTIONS)
    except orjson.JSONEncodeError as exc:
        if "Recursion" in str(exc):
            return _deep_canonical(value)
        try:
            exact = _dumps(_prepare(value, check_keys=True, normalize=True))
        except RecursionError:
            raise ProtocolError(
                ErrorCode.INVALID_INPUT, f"value has no canonical JSON (RFC 8785) form: {_TOO_DEEP}"
            ) from None
        return exact, has_unsafe_integer(value)
    check_keys = _may_misorder_keys(out)
    if _needs_exact_pass(value, check_keys):
        return _dumps(_prepare(value, check_keys)), False
    return out, False


def _deep_canonical(value: Any) -> tuple[bytes, bool]:
    """:func:`canonical_form` of a value nested deeper than orjson writes (pure Python)."""
    if nesting_depth(value) > MAX_NESTING:
        raise ProtocolError(
            ErrorCode.INVALID_INPUT, f"value has no canonical JSON (RFC 8785) form: {_TOO_DEEP}"
        )
    out: list[bytes] = []
    unsafe = [False]
    _write_json(value, out, unsafe, sort=True)
    return b"".join(out), unsafe[0]


def _write_json(value: Any, out: list[bytes], unsafe: list[bool], *, sort: bool) -> None:
    """Append the JSON of ``value`` to ``out``: ECMAScript numbers, orjson's string escapes
    (JCS's), object keys in UTF-16 order when ``sort`` else as they come. Recursive: only
    called for values of at most :data:`MAX_NESTING` levels."""
    t = type(value)
    if t is str:
        out.append(orjson.dumps(value))
    elif value is None or t is bool:
        out.append(b"null" if value is None else (b"true" if value else b"false"))
    elif t is int or t is float:
        if t is int and not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            unsafe[0] = True
        out.append(js_number(value).encode())
    elif t is dict:
        members = [(_plain_key(key), item) for key, item in value.items()]
        if sort:
            members.sort(key=lambda member: _utf16_key(member[0]))
        out.append(b"{")
        for i, (key, item) in enumerate(members):
            if i:
                out.append(b",")
            out.append(orjson.dumps(key))
            out.append(b":")
            _write_json(item, out, unsafe, sort=sort)
        out.append(b"}")
    elif t is list or t is tuple:
        out.append(b"[")
        for i, item in enumerate(value):
            if i:
                out.append(b",")
            _write_json(item, out, unsafe, sort=sort)
        out.append(b"]")
    elif isinstance(value, bool | int | float | str | dict | list | tuple) and not isinstance(value, Enum):
        _write_json(_plain(value), out, unsafe, sort=sort)
    elif isinstance(value, _Fragment):
        raise ProtocolError(ErrorCode.INVALID_INPUT, "a JSON fragment cannot be written here")
    else:
        raise ProtocolError(
            ErrorCode.INVALID_INPUT, f"value of type {type(value).__name__} has no canonical JSON form"
        )


def wire_bytes(value: Any) -> bytes:
    """Plain JSON as JavaScript's ``JSON.stringify`` writes it: object members in the order they
    come (no sorting), numbers as ECMAScript prints them (``1000.0`` -> ``1000``, ``1e-6`` ->
    ``0.000001``, ``-0.0`` -> ``0``, integers beyond 2**53 as the double they denote), strings
    escaped minimally. Every JSON document the server emits goes through here."""
    try:
        try:
            return orjson.dumps(_prepare(value, check_keys=False))
        except orjson.JSONEncodeError as exc:
            if "Recursion" in str(exc):
                raise
            # str subclasses as keys (orjson takes only str): once more with plain keys
            return orjson.dumps(_prepare(value, check_keys=False, normalize=True))
    except orjson.JSONEncodeError as exc:
        if "Recursion" not in str(exc):
            raise ProtocolError(ErrorCode.INVALID_INPUT, f"value has no JSON form: {exc}") from None
    except RecursionError:
        pass
    if nesting_depth(value) > MAX_NESTING:
        raise ProtocolError(ErrorCode.INVALID_INPUT, f"value has no JSON form: {_TOO_DEEP}")
    out: list[bytes] = []
    _write_json(value, out, [False], sort=False)
    return b"".join(out)


def canonical_text(
    data: bytes | bytearray | memoryview, members: tuple[str, ...] | None = None
) -> tuple[memoryview, bool] | None:
    """Canonical form of JSON text, and whether it held integers beyond +-(2**53 - 1).

    With ``members`` the text must be an object and only those top-level members are kept
    (``hash_input`` of a bundle, computed from its text). Runs with the GIL released.
    ``None`` when the accelerator is not built or the text has no canonical form (not
    JSON, a non-finite number, a lone surrogate): parse it to learn why.
    """
    if _jcs is None:
        return None
    try:
        result = _jcs.canonicalize(data, members)
    except ValueError:
        return None
    return memoryview(result), result.unsafe_integers


UnsafePlaces = tuple[tuple[str | None, int], ...]


def canonical_text_sha256(
    data: bytes | bytearray | memoryview, members: tuple[str, ...] | None = None
) -> tuple[str, bool, UnsafePlaces | None] | None:
    """:func:`sha256_hex` of :func:`canonical_text`, hashed as it is written (a few MB held).

    What a bundle check needs: the GIL is released throughout, so it can run in a thread
    while another parses the same text. Returns ``(hex digest, unsafe_integers, places)``:
    ``places`` says where integers beyond +-(2**53 - 1) were seen, as ``(member, index)``
    pairs (``index`` -1 when the member's value is not an array, ``member`` ``None`` for
    text outside the members), or is ``None`` when there were too many to list.
    """
    if _jcs is None:
        return None
    try:
        return _jcs.canonical_sha256(data, members)
    except ValueError:
        return None


def has_text_accelerator() -> bool:
    """Whether :func:`canonical_text` is available (the C module was built)."""
    return _jcs is not None


def canonical_bytes(value: Any) -> bytes:
    """RFC 8785 canonical UTF-8 bytes of a JSON value (JavaScript number semantics)."""
    return canonical_form(value)[0]


def canonical_str(value: Any) -> str:
    """:func:`canonical_bytes` decoded as text."""
    return canonical_bytes(value).decode("utf-8")


def sha256_hex(data: bytes | memoryview) -> str:
    """Lowercase hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()
