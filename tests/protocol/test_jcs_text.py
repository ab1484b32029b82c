"""The compiled text canonicalizer (``runs.protocol._jcs``), differentially against the tree path.

The oracle is ``canonical_bytes(parse_json(text))``: orjson parses the text (JavaScript number
semantics applied), the pure-Python canonicalizer writes it. ``canonical_text`` and
``canonical_text_sha256`` must give the same bytes (and hash), or ``None`` exactly when the
oracle refuses the text. Texts are generated as *text*: random insignificant whitespace,
keys in random order and repeated, strings with any mix of escapes and raw UTF-8, and
number tokens written out in many forms (not only what ``json.dumps`` would write).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import struct
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runs.protocol import bundle as bundle_module
from runs.protocol import canonical
from runs.protocol.bundle import OVERLAP_MIN_BYTES, check_bundle
from runs.protocol.canonical import (
    MAX_NESTING,
    canonical_bytes,
    canonical_text,
    canonical_text_sha256,
    has_text_accelerator,
    parse_json,
)
from runs.protocol.errors import ErrorCode, ProtocolError
from runs.protocol.integrity import seal_bundle
from tests.bigbundle import load_gen_bundle
from tests.conftest import CONFORMANCE

if not has_text_accelerator():
    pytest.skip("runs.protocol._jcs is not built (no C compiler or OpenSSL headers)", allow_module_level=True)

_jcs = canonical._jcs
SAFE = 2**53 - 1
FLUSH_BYTES = 1 << 18  # the C module's flush size
HASHED_MEMBERS = bundle_module._HASHED_MEMBERS

# ---------------------------------------------------------------- oracle


def oracle(text: bytes) -> bytes | None:
    """The tree path's canonical bytes, ``None`` when it refuses the text."""
    try:
        return canonical_bytes(parse_json(text))
    except ProtocolError:
        return None


def oracle_members(text: bytes, members: tuple[str, ...]) -> bytes | None:
    try:
        obj = parse_json(text)
    except ProtocolError:
        return None
    if type(obj) is not dict:
        return None
    return canonical_bytes({k: obj[k] for k in members if k in obj})  # orjson keeps the last of a key


def _is_unsafe_token(token: str) -> bool:
    digits = token.lstrip("-")
    return len(digits) > 16 or (len(digits) == 16 and digits > str(SAFE))


def has_unsafe_token(text: bytes) -> bool:
    """Whether the (valid) text holds an integer token (no fraction/exponent) beyond 2**53 - 1."""
    found = False

    def hook(token: str) -> int:
        nonlocal found
        found = found or _is_unsafe_token(token)
        return 0

    json.loads(text, parse_int=hook)
    return found


def check_text(text: bytes) -> bytes | None:
    """Both text functions against the oracle; returns the oracle's bytes."""
    expected = oracle(text)
    got = canonical_text(text)
    digest = canonical_text_sha256(text)
    if expected is None:
        assert got is None, text
        assert digest is None, text
        return None
    assert got is not None, text
    out, unsafe = got
    assert bytes(out) == expected, text
    assert unsafe is has_unsafe_token(text), text
    assert digest is not None, text
    assert digest[:2] == (hashlib.sha256(expected).hexdigest(), unsafe), text
    assert (digest[2] != ()) is unsafe, text  # places listed exactly when there are unsafe integers
    return expected


def check_members(text: bytes, members: tuple[str, ...]) -> bytes | None:
    expected = oracle_members(text, members)
    got = canonical_text(text, members)
    digest = canonical_text_sha256(text, members)
    if expected is None:
        assert got is None, (text, members)
        assert digest is None, (text, members)
        return None
    assert got is not None, (text, members)
    out, unsafe = got
    assert bytes(out) == expected, (text, members)
    assert unsafe is has_unsafe_token(text), (text, members)  # anywhere, selected or not
    assert digest is not None, (text, members)
    assert digest[:2] == (hashlib.sha256(expected).hexdigest(), unsafe), (text, members)
    return expected


# ---------------------------------------------------------------- text generators

ws = st.text(alphabet=" \t\n\r", max_size=2)

SPECIAL_NUMBERS = [
    "0", "-0", "0.0", "-0.0", "0e0", "0E-0", "-0e+999", "1.0", "1E2", "1e+2", "1E-2", "1e-0",
    "0.000001", "0.0000010", "3e-6", "1e-6", "1e-7", "9.999999e-7", "1e16", "1e21", "9.99e20",
    "5e21", "1e23", "1e+21", "123e18", "0.1", "0.30000000000000004", "100", "-100", "1e308",
    "1.7976931348623157e308", "2.2250738585072014e-308", "2.225073858507201e-308",
    "5e-324", "4.9e-324", "2.5e-324", "1e-400", "-1e-400", "0.5e-323",
    "9007199254740991", "9007199254740992", "9007199254740993", "-9007199254740991",
    "-9007199254740992", "-9007199254740993", "9007199254740991.0", "9007199254740993e0",
    "18446744073709551615", "18446744073709551616", "-9223372036854775808", "-9223372036854775809",
    "123456789012345678901234567890", "1" + "0" * 308, "1.5000000000000000000000",
    "1.5" + "0" * 60, "0." + "0" * 300 + "1", "0." + "0" * 330 + "1", "7" * 60 + "e-40",
    "5.960464477539063e-8", "5.9604644775390625e-8",  # 2**-24: shortest is the digit above
    "12345678901234567e-5", "0.1e1", "100e-2", "1e00007",
]  # fmt: skip


@st.composite
def decimal_tokens(draw: st.DrawFn) -> str:
    """A JSON number token assembled digit by digit."""
    sign = draw(st.sampled_from(["", "-"]))
    int_part = draw(st.one_of(st.just("0"), st.from_regex(r"[1-9][0-9]{0,24}", fullmatch=True)))
    frac = draw(st.one_of(st.just(""), st.from_regex(r"\.[0-9]{1,30}", fullmatch=True)))
    exp = ""
    if draw(st.booleans()):
        marker = draw(st.sampled_from(["e", "E"]))
        exp_sign = draw(st.sampled_from(["", "+", "-", "-"]))
        magnitude = draw(st.integers(0, 320))
        zeros = "0" * draw(st.integers(0, 2))
        exp = f"{marker}{exp_sign}{zeros}{magnitude}"
    return sign + int_part + frac + exp


def _float_forms(x: float) -> st.SearchStrategy[str]:
    forms = [repr(x), f"{x:.17e}", f"{x:.16e}", f"{x:.15e}", f"{x:.17g}", f"{x:.25e}", f"{x:.17E}"]
    return st.sampled_from(forms)


powers_of_two = st.integers(-1074, 1023).map(lambda e: 2.0**e)
random_doubles = st.integers(0, 2**64 - 1).map(lambda b: struct.unpack("<d", struct.pack("<Q", b))[0])
finite_doubles = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    random_doubles.filter(lambda x: x == x and abs(x) != float("inf")),
    powers_of_two,
)

number_tokens = st.one_of(
    st.sampled_from(SPECIAL_NUMBERS),
    st.integers(-(2**70), 2**70).map(str),
    st.integers(-3, 3).flatmap(lambda d: st.sampled_from([str(SAFE + 1 + d), str(-(SAFE + 1 + d))])),
    st.integers(-SAFE, SAFE).map(str),
    finite_doubles.flatmap(_float_forms),
    decimal_tokens(),
    st.from_regex(r"-?[1-9][0-9]{30,120}", fullmatch=True),  # very long integers
)

# Characters where UTF-16 order and code-point order part (U+E000..U+FFFF vs astral), controls,
# the characters JSON must escape, and a little of everything else.
TRICKY_CHARS = [
    "\ue000", "\uffff", "\ufb01", "\ufeff", "\U0001f600", "\U00010000", "\U0010ffff", "\U0001d518",
    "a", "A", "é", "東", "\u2028", "\x7f", "\x00", "\x01", "\x1f", "\b", "\f", "\n", "\r", "\t",
    '"', "\\", "/",
]  # fmt: skip
chars = st.one_of(st.sampled_from(TRICKY_CHARS), st.characters(exclude_categories=("Cs",)))
strings = st.lists(chars, max_size=8).map("".join)
KEY_POOL = ["a", "b", "ab", "A", "", "\ue000", "\U0001f600", "\ue000\U0001f600", "é", "aé", "a\x00"]
keys = st.one_of(
    st.sampled_from(KEY_POOL), strings, st.lists(st.sampled_from(TRICKY_CHARS), max_size=3).map("".join)
)

SHORT_ESCAPES = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", '"': '\\"', "\\": "\\\\"}


def _u(code: int, upper: bool) -> str:
    text = f"\\u{code:04x}"
    return text.upper().replace("\\U", "\\u") if upper else text


@st.composite
def string_tokens(draw: st.DrawFn, value: st.SearchStrategy[str] = strings) -> str:
    """A JSON string token for a drawn text, each character raw or escaped in one of its ways."""
    out = ['"']
    for ch in draw(value):
        code = ord(ch)
        way = draw(st.integers(0, 3))
        upper = draw(st.booleans()) if way else False
        if way == 0 and ch not in SHORT_ESCAPES and code >= 0x20:
            out.append(ch)
        elif ch in SHORT_ESCAPES and way <= 1:
            out.append(SHORT_ESCAPES[ch])
        elif ch == "/" and way == 2:
            out.append("\\/")
        elif code >= 0x10000:
            high = 0xD800 + ((code - 0x10000) >> 10)
            low = 0xDC00 + ((code - 0x10000) & 0x3FF)
            out.append(_u(high, upper) + _u(low, upper))
        elif code < 0x20 or ch in SHORT_ESCAPES or way >= 2:
            out.append(_u(code, upper))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


@st.composite
def json_texts(draw: st.DrawFn, depth: int = 0, max_depth: int = 4, container: bool = False) -> str:
    """Any JSON value (an array or object with ``container``) as text, written in one of its
    many equivalent ways."""
    kinds = [] if container else ["null", "true", "false", "number", "number", "string"]
    if depth < max_depth:
        kinds += ["array", "object", "object"]
    kind = draw(st.sampled_from(kinds))
    if kind in ("null", "true", "false"):
        return kind
    if kind == "number":
        return draw(number_tokens)
    if kind == "string":
        return draw(string_tokens())
    if kind == "array":
        items = draw(st.lists(json_texts(depth + 1, max_depth), max_size=4))
        if not items:
            return "[" + draw(ws) + "]"
        return "[" + ",".join(draw(ws) + item + draw(ws) for item in items) + "]"
    members = draw(st.lists(st.tuples(keys, json_texts(depth + 1, max_depth)), max_size=5))
    if members and draw(st.booleans()):  # repeat some keys with other values, earlier or later
        extra = draw(st.lists(st.tuples(st.sampled_from([k for k, _ in members]), json_texts(depth + 1, 1))))
        members = draw(st.permutations(members + extra))
    if not members:
        return "{" + draw(ws) + "}"
    parts = [
        draw(ws) + draw(string_tokens(st.just(k))) + draw(ws) + ":" + draw(ws) + v + draw(ws)
        for k, v in members
    ]
    return "{" + ",".join(parts) + "}"


documents = st.builds(
    lambda a, t, b: (a + t + b).encode(), ws, st.one_of(json_texts(), json_texts(container=True)), ws
)

MEMBER_NAMES = ["run", "trace", "artifacts", "ruleSets", "engine", "a", "b", "z"]


@st.composite
def member_documents(draw: st.DrawFn) -> bytes:
    """A JSON object whose top-level keys often are (possibly repeated) selectable names."""
    names = st.one_of(st.sampled_from(MEMBER_NAMES), keys)
    members = draw(st.lists(st.tuples(names, json_texts(1, 3)), max_size=7))
    body = ",".join(
        draw(ws) + draw(string_tokens(st.just(k))) + draw(ws) + ":" + draw(ws) + v + draw(ws)
        for k, v in members
    )
    return (draw(ws) + "{" + (body or draw(ws)) + "}" + draw(ws)).encode()


selections = st.lists(st.sampled_from(MEMBER_NAMES), max_size=6).map(tuple)

SETTINGS = settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)

# ---------------------------------------------------------------- differential properties


@SETTINGS
@given(documents)
def test_text_matches_tree(text: bytes) -> None:
    check_text(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(ws, number_tokens), min_size=1, max_size=8))
def test_number_tokens_match_tree(tokens: list[tuple[str, str]]) -> None:
    text = "[" + ",".join(space + token for space, token in tokens) + "]"
    check_text(text.encode())
    for _, token in tokens:  # alone, so one out-of-range token does not hide the others
        check_text(token.encode())


@settings(max_examples=200, deadline=None)
@given(finite_doubles)
def test_double_forms_match_tree(x: float) -> None:
    for form in (repr(x), f"{x:.17e}", f"{x:.30e}", f"{x:.0f}" if abs(x) < 1e300 else "0"):
        assert check_text(form.encode()) is not None, form  # these denote x
    for form in (f"{x:.16e}", f"{x:.15e}", f"{x:.3e}"):  # rounded: may overflow near the largest double
        check_text(form.encode())


def test_every_power_of_two() -> None:
    """At a power of two the doubles below are closer than those above: the shortest digits
    may lie above the correctly rounded ones (2**-24 is 5.960464477539063e-8)."""
    for e in range(-1074, 1024):
        x = 2.0**e
        for form in (repr(x), f"{x:.17e}", f"{x:.16e}", f"{-x:.20e}"):
            assert check_text(form.encode()) is not None, form


@pytest.mark.parametrize(
    ("token", "expected", "unsafe"),
    [
        ("-0", b"0", False),
        ("-0.0", b"0", False),
        ("1.0", b"1", False),
        ("1E2", b"100", False),
        ("1e+2", b"100", False),
        ("0.000001", b"0.000001", False),
        ("3e-6", b"0.000003", False),
        ("1e-7", b"1e-7", False),
        ("1e16", b"10000000000000000", False),
        ("1e21", b"1e+21", False),
        ("5e21", b"5e+21", False),
        ("1e23", b"1e+23", False),
        ("9007199254740991", b"9007199254740991", False),
        ("9007199254740993", b"9007199254740992", True),
        ("-9007199254740993", b"-9007199254740992", True),
        ("9007199254740993.0", b"9007199254740992", False),
        ("5e-324", b"5e-324", False),
        ("4.9e-324", b"5e-324", False),
        ("1e-400", b"0", False),
        ("1.5000000000000000000000", b"1.5", False),
        ("5.9604644775390625e-8", b"5.960464477539063e-8", False),
        ("123456789012345678901234567890", b"1.2345678901234568e+29", True),
    ],
)
def test_specified_number_texts(token: str, expected: bytes, unsafe: bool) -> None:
    got = canonical_text(token.encode())
    assert got is not None
    assert (bytes(got[0]), got[1]) == (expected, unsafe)
    assert check_text(token.encode()) == expected


@SETTINGS
@given(member_documents(), selections)
def test_members_match_tree(text: bytes, members: tuple[str, ...]) -> None:
    check_members(text, members)


@settings(max_examples=150, deadline=None)
@given(documents, selections)
def test_members_of_any_value(text: bytes, members: tuple[str, ...]) -> None:
    """Members mode on any value: ``None`` unless it is an object."""
    check_members(text, members)


def _mutate(text: str, rng: random.Random) -> str:
    pos = rng.randrange(len(text) + 1)
    action = rng.randrange(4)
    if action == 0:
        return text[:pos]
    if action == 1:
        return text[:pos] + text[pos + 1 :]
    insert = rng.choice(
        ['"', "\\", "[", "]", "{", "}", ",", ":", "0", "-", "e", ".", " ", "\\u", "\\ud800", "\x01"]
    )
    if action == 2:
        return text[:pos] + insert + text[pos:]
    return text[:pos] + insert + text[pos + 1 :]


@settings(max_examples=200, deadline=None)
@given(member_documents(), st.randoms(use_true_random=False), selections)
def test_mutated_texts(text: bytes, rng: random.Random, members: tuple[str, ...]) -> None:
    """Broken variants of valid texts: ``None`` exactly when the tree path refuses them."""
    mutated = text.decode()
    for _ in range(rng.randrange(1, 4)):
        mutated = _mutate(mutated, rng)
    data = mutated.encode()
    check_text(data)
    check_members(data, members)


# ---------------------------------------------------------------- refused texts

INVALID_TEXTS = [
    b"", b" ", b"{", b"[", b"[1,", b'{"a":', b'{"a"', b'{"a":1', b'"abc', b'"\\', b'"\\u12', b"tru", b"nul",
    b"[1]x", b"{} {}", b"1 2", b'{"a":1}}', b"[1]]", b"[1,]", b"[,1]", b'{"a":1,}', b"{,}", b'{"a" 1}',
    b"{a:1}", b"{'a':1}", b"['a']", b'"\\x"', b'"\\U0041"', b'"\\u00g0"', b'"\\a"', b'"\x00"', b'"\x1f"',
    b'"a\nb"', b'"\t"', b"01", b"-01", b"00", b"1.", b"1.e5", b".5", b"+1", b"-", b"--1", b"1e", b"1e+",
    b"1ee5", b"0x10", b"NaN", b"-NaN", b"Infinity", b"-Infinity", b"[NaN]", b"True", b"None", b"null_",
    b"\xef\xbb\xbf{}", b"\x00", b"[1 2]", b'{"a":1 "b":2}', b"/* c */ 1", b"1 // c",
]  # fmt: skip
UNREPRESENTABLE_TEXTS = [
    b"1e400", b"-1e400", b"1E309", b"[1e999999999999999]", b"1" + b"0" * 400, b'{"a":1.8e308}',
    b'"\\ud800"', b'"\\udc00"', b'"\\ud800x"', b'"\\ud800\\u0041"', b'"\\ud800\\ud800"', b'"\\udfff\\ud800"',
    b'{"\\ud83d":1}', b'["\\ude00\\ud83d"]',
]  # fmt: skip


@pytest.mark.parametrize("text", INVALID_TEXTS + UNREPRESENTABLE_TEXTS)
def test_refused_texts(text: bytes) -> None:
    assert oracle(text) is None
    assert canonical_text(text) is None
    assert canonical_text_sha256(text) is None
    with pytest.raises(ValueError):
        _jcs.canonicalize(text)
    wrapped = b'{"a":' + text + b',"b":1}'
    for members in (("a",), ("b",), ()):  # refused whether or not the member is selected
        assert oracle_members(wrapped, members) is None
        assert canonical_text(wrapped, members) is None, members
        assert canonical_text_sha256(wrapped, members) is None, members


@pytest.mark.parametrize("text", [b"[]", b"1", b'"a"', b"null", b"true", b" [ {} ] ", b'[{"a":1}]'])
def test_members_need_an_object(text: bytes) -> None:
    assert canonical_text(text) is not None
    assert canonical_text(text, ("a",)) is None
    assert canonical_text_sha256(text, ("a",)) is None


def test_repeated_members_are_all_checked() -> None:
    # an earlier value of a repeated member is dropped, but must still be JSON ...
    assert canonical_text(b'{"a":[1,,2],"a":1}', ("a",)) is None
    assert canonical_text(b'{"a":tru,"a":1}', ("a",)) is None
    # ... and its integers count
    got = canonical_text(b'{"a":9007199254740993,"a":1,"x":{"y":[2]}}', ("a",))
    assert got is not None
    assert (bytes(got[0]), got[1]) == (b'{"a":1}', True)
    got = canonical_text(b'{"x":-9007199254740993,"a":2}', ("a", "z"))
    assert got is not None
    assert (bytes(got[0]), got[1]) == (b'{"a":2}', True)


@pytest.mark.parametrize("depth", [1, 200, 254, 255, 256, 512, 513, 1024, 1025, 5000])
def test_depth_limit(depth: int) -> None:
    """Up to MAX_NESTING (512) nested arrays and objects (orjson writes only 254: deeper values
    take the pure-Python writer); deeper texts are refused here, and the tree path refuses them
    too (with a code, not a crash)."""
    for text, members in (
        (b"[" * depth + b"]" * depth, None),
        (b'{"a":' * depth + b"1" + b"}" * depth, ("a",)),
    ):
        spaced = text.replace(b"[", b"[ ").replace(b":", b"\t:\n")
        if depth > MAX_NESTING:
            assert oracle(text) is None
            for data in (text, spaced):
                assert canonical_text(data) is None
                assert canonical_text_sha256(data) is None
                assert canonical_text(data, ("a",)) is None
            continue
        check_text(spaced)
        if members:
            check_members(spaced, members)
        got = canonical_text(spaced)
        assert got is not None
        assert (bytes(got[0]), got[1]) == (text, False)
        assert canonical_text_sha256(spaced) == (hashlib.sha256(text).hexdigest(), False, ())
        if members:
            got = canonical_text(spaced, members)
            assert got is not None
            assert bytes(got[0]) == text


def test_argument_checks() -> None:
    with pytest.raises(TypeError):
        _jcs.canonicalize(b"{}", ["a"])
    with pytest.raises(TypeError):
        _jcs.canonicalize(b"{}", ("é",))
    with pytest.raises(TypeError):
        _jcs.canonicalize(b"{}", ('a"',))
    with pytest.raises(TypeError):
        _jcs.canonical_sha256(b"{}", tuple(f"k{i}" for i in range(17)))
    with pytest.raises(TypeError):
        _jcs.canonicalize("{}")
    assert (
        bytes(_jcs.canonicalize(b'{"b":1,"a":2}', tuple(f"k{i}" for i in range(15)) + ("a",))) == b'{"a":2}'
    )


def test_buffer_kinds() -> None:
    text = b' {"b": [1.0, "\\u00e9"], "a": 1e2} '
    expected = b'{"a":100,"b":[1,"\xc3\xa9"]}'
    for data in (text, bytearray(text), memoryview(text), memoryview(b"xx" + text)[2:]):
        got = canonical_text(data)
        assert got is not None
        assert bytes(got[0]) == expected
        assert canonical_text_sha256(data) == (hashlib.sha256(expected).hexdigest(), False, ())
    result = _jcs.canonicalize(text)
    assert len(result) == len(expected)
    assert result.unsafe_integers is False
    view = memoryview(result)
    assert view.readonly
    del result
    assert bytes(view) == expected  # the view keeps the buffer alive


# ---------------------------------------------------------------- large texts (flushing)


def _big_event(i: int, rng: random.Random) -> dict[str, Any]:
    return {
        "z": i,
        "\U0001f600": rng.random(),
        "\ue000": [rng.random() * 10 ** rng.randrange(-30, 30), 2**53 + i if i % 97 == 0 else i, 1e21, 3e-6],
        "id": f"evt_{i:06d}",
        "text": 'é\u2028\t"\\ 東 \U0001d518 ' * 3,
        "a": {"y": None, "x": True, "\U00010000": "astral", "\uffff": "bmp"},
    }


@pytest.fixture(scope="module")
def big_array_text() -> bytes:
    rng = random.Random(5)
    events = [_big_event(i, rng) for i in range(4000)]
    text = orjson.dumps(events, option=orjson.OPT_INDENT_2)  # keys in insertion (non-canonical) order
    assert len(text) > 4 * FLUSH_BYTES
    return text


def test_big_array_crosses_flushes(big_array_text: bytes) -> None:
    expected = check_text(big_array_text)
    assert expected is not None
    assert len(expected) > 3 * FLUSH_BYTES
    assert canonical_text(big_array_text)[1] is True  # type: ignore[index]


def test_big_members_cross_flushes(big_array_text: bytes) -> None:
    events = big_array_text.decode()
    half = big_array_text[: len(big_array_text) // 2].decode().rsplit(",\n  {", 1)[0] + "]"
    text = (
        f'{{"engine": {{"b": 1, "a": [{half}]}}, "trace": {half}, "protocolVersion": "1.0.0",'
        f' "zzz": {half}, "run": {{"id": "x", "big": 9007199254740993}}, "trace": {events}}}'
    ).encode()
    for members in (HASHED_MEMBERS, ("trace",), ("run",), ("zzz", "trace"), ()):
        assert check_members(text, members) is not None


def test_big_reordered_object(big_array_text: bytes) -> None:
    """Objects (never flushed while open) larger than the flush size that need reordering."""
    rng = random.Random(11)
    keys = [f"k{rng.randrange(10**9)}\ue000{i}" if i % 3 else f"\U0001f600{i}" for i in range(20000)]
    inner = "{" + ",".join(f'"{k}": {rng.random()!r}' for k in keys) + "}"
    events = big_array_text.decode()
    for text in (
        inner,
        f'{{"z": {events}, "y": {inner}, "a": [{inner}, {events}], "z": 1}}',
        f'[{inner}, {{"b": {events}, "a": {inner}}}, {events}]',
    ):
        data = text.encode()
        assert len(data) > FLUSH_BYTES
        assert check_text(data) is not None
        assert (check_members(data, ("a", "y", "z")) is not None) is text.startswith("{")


def test_threads_give_the_same_results(big_array_text: bytes) -> None:
    texts = [big_array_text, big_array_text[:-2] + b"]", b'{"b":' + big_array_text + b',"a":1}'] * 3
    expected = [canonical_text_sha256(t) for t in texts]
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(canonical_text_sha256, texts)) == expected
        views = list(pool.map(canonical_text, texts))
    for view, digest in zip(views, expected, strict=True):
        assert (view is None) is (digest is None)
        if view is not None:
            assert (hashlib.sha256(view[0]).hexdigest(), view[1]) == digest[:2]


# ---------------------------------------------------------------- the bundle check, both paths


def _fields(result: Any) -> tuple[Any, ...]:
    return (result.ok, result.code, result.integrity, result.message)


def _check_both_ways(data: bytes, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ...]:
    calls: list[Any] = []
    real = bundle_module.canonical_text_sha256

    def spy(*args: Any) -> Any:
        result = real(*args)
        calls.append(result)
        return result

    with monkeypatch.context() as patch:
        patch.setattr(bundle_module, "canonical_text_sha256", spy)
        fast = check_bundle(data)
    with monkeypatch.context() as patch:
        patch.setattr(bundle_module, "has_text_accelerator", lambda: False)
        patch.setattr(bundle_module, "canonical_text_sha256", None)  # must not be called
        slow = check_bundle(data)
    with monkeypatch.context() as patch:
        patch.setattr(canonical, "_jcs", None)
        assert canonical_text_sha256(data) is None
        no_module = check_bundle(data)
    assert _fields(fast) == _fields(slow) == _fields(no_module)
    if fast.integrity in ("valid", "mismatch"):
        assert calls and calls[0] is not None  # the text path decided
    return _fields(fast)


CORPUS_FILES = sorted(CONFORMANCE.glob("*/*.json")) if CONFORMANCE.is_dir() else []


@pytest.mark.skipif(not CORPUS_FILES, reason=f"conformance corpus not found at {CONFORMANCE}")
def test_conformance_corpus_both_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = set()
    for path in CORPUS_FILES:
        seen.add(_check_both_ways(path.read_bytes(), monkeypatch)[1])
    assert {None, ErrorCode.INTEGRITY_MISMATCH, ErrorCode.INVALID_JSON} <= seen


@pytest.fixture(scope="module")
def big_bundle_texts() -> list[bytes]:
    gen = load_gen_bundle()
    texts = []
    for adversarial in (False, True):
        bundle = gen.build_bundle(events=2000, adversarial=adversarial)
        texts.append(orjson.dumps(canonical._prepare(bundle), option=orjson.OPT_INDENT_2) + b"\n")
    return texts


def _tamper_in_trace(text: bytes) -> bytes:
    start = text.index(b'"trace"')
    at = text.index(b"pipeline", start + len(text) // 4)
    return text[:at] + b"P" + text[at + 1 :]


def test_big_bundle_both_paths(big_bundle_texts: list[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    for text in big_bundle_texts:
        assert len(text) >= OVERLAP_MIN_BYTES  # the thread path
        assert _check_both_ways(text, monkeypatch) == (True, None, "valid", None)
        # the same JSON written otherwise hashes the same
        compact = orjson.dumps(orjson.loads(text))
        assert len(compact) >= OVERLAP_MIN_BYTES
        assert _check_both_ways(compact, monkeypatch)[:3] == (True, None, "valid")
        respaced = re.sub(rb'([,:\[{])\n *"', rb'\1\r\n\t"', text)
        assert _check_both_ways(respaced, monkeypatch)[:3] == (True, None, "valid")
        small = text[: OVERLAP_MIN_BYTES // 2]  # inline path, refused text
        assert _check_both_ways(small, monkeypatch)[1] == ErrorCode.INVALID_JSON
        tampered = _tamper_in_trace(text)
        assert _check_both_ways(tampered, monkeypatch)[:3] == (
            False,
            ErrorCode.INTEGRITY_MISMATCH,
            "mismatch",
        )
        assert _check_both_ways(text[:-100], monkeypatch)[1] == ErrorCode.INVALID_JSON
        overflow = text.replace(b'"ratio": 0.25', b'"ratio": 1e400', 1)
        assert overflow != text
        assert _check_both_ways(overflow, monkeypatch)[1] == ErrorCode.INVALID_RUN_BUNDLE


def _nested(depth: int) -> str:
    return '{"d":' * depth + "1" + "}" * depth


@pytest.mark.parametrize("where", ["metadata", "unhashed"])
@pytest.mark.parametrize("depth", [200, 254, 256, 300, 509, 510, 511, 1000])
def test_deep_bundles_both_paths(
    big_bundle_texts: list[bytes], where: str, depth: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nesting beyond what orjson.dumps writes is one coded refusal on both paths, never a crash.

    ``run.metadata.deep`` sits inside three containers (bundle, run, metadata), an unknown
    top-level member inside one. Texts deeper than orjson writes are spliced in as text.
    """
    bundle = orjson.loads(big_bundle_texts[0])
    bundle.pop("integrity")
    levels = depth + (3 if where == "metadata" else 1)  # containers, the bundle's own included
    placeholder = "@@deep@@"
    if where == "metadata":
        bundle["run"]["metadata"]["deep"] = placeholder
    else:
        bundle["deepExtra"] = placeholder
    nested = _nested(depth)
    if levels <= MAX_NESTING:
        if where == "metadata":
            bundle["run"]["metadata"]["deep"] = orjson.loads(nested)
        else:
            bundle["deepExtra"] = orjson.loads(nested)
        text = canonical.wire_bytes(seal_bundle(bundle))
    else:
        bundle["integrity"] = {"sha256": "0" * 64}
        text = orjson.dumps(bundle).replace(f'"{placeholder}"'.encode(), nested.encode())
    ok, code, integrity, message = _check_both_ways(text, monkeypatch)
    if levels <= MAX_NESTING:
        assert (ok, code, integrity) == (True, None, "valid"), message
    else:
        assert (ok, code) == (False, ErrorCode.INVALID_RUN_BUNDLE), message
        assert "nested deeper than" in message


def test_unsafe_integers_outside_the_hash_both_paths(
    big_bundle_texts: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An integer beyond 2**53 in an unhashed member becomes its double on both paths."""
    text = big_bundle_texts[0].replace(b"{", b'{"extra": 9007199254740993, ', 1)
    fast = check_bundle(text)
    with monkeypatch.context() as patch:
        patch.setattr(bundle_module, "has_text_accelerator", lambda: False)
        slow = check_bundle(text)
    assert fast.ok and slow.ok
    assert fast.bundle is not None and slow.bundle is not None
    assert fast.bundle["extra"] == slow.bundle["extra"] == 9007199254740992.0
    assert type(fast.bundle["extra"]) is type(slow.bundle["extra"]) is float


def test_parse_json_refuses_deep_text() -> None:
    for depth in (MAX_NESTING + 1, 1000, 1024):
        with pytest.raises(ProtocolError) as info:
            parse_json("[" * depth + "]" * depth)
        assert info.value.code == ErrorCode.INVALID_JSON
        assert "nested deeper than" in info.value.message
    assert parse_json("[" * MAX_NESTING + "]" * MAX_NESTING) is not None


def test_many_random_doubles_in_printed_forms() -> None:
    """Tokens as repr()/JSON.stringify and printf write them (16 and 17 digits mostly): the C
    path keeps a token's own digits only when they are JavaScript's, checked exactly."""
    rng = random.Random(20261121)
    tokens = []
    for _ in range(30_000):
        pick = rng.random()
        if pick < 0.35:
            value = rng.random() * 10.0 ** rng.randint(-30, 30)
        elif pick < 0.65:
            value = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(63)))[0]
        elif pick < 0.75:
            value = 2.0 ** rng.randint(-1074, 1023)
        else:
            value = rng.randint(1, 2**60) * 2.0 ** rng.randint(-80, 10)
        if value == 0 or value != value or value == float("inf"):
            continue
        form = rng.random()
        tokens.append(repr(value) if form < 0.6 else f"{value:.16e}" if form < 0.8 else f"{value:.15e}")
    text = ("[" + ",".join(tokens) + "]").encode()
    got = canonical_text(text)
    assert got is not None
    assert bytes(got[0]) == oracle(text)


def test_unsafe_integer_places() -> None:
    """Where integers beyond 2**53 - 1 sit: (member, index in its array) or (member, -1), and
    (None, -1) for text outside the members; consecutive repeats are merged."""
    text = (
        b'{"zz": 9007199254740993, "trace": [{"a": 1}, {"b": [18446744073709551617]},'
        b' {"c": 1.5}, {"d": 9007199254740993, "e": -9007199254740993}],'
        b' "run": {"x": {"y": 123456789012345678901}}, "artifacts": [1, 2], "engine": 2e300}'
    )
    got = canonical_text_sha256(text, ("run", "trace", "artifacts", "ruleSets", "engine"))
    assert got is not None
    assert got[1] is True
    assert sorted(got[2], key=repr) == sorted([(None, -1), ("trace", 1), ("trace", 3), ("run", -1)], key=repr)
    assert canonical_text_sha256(b'{"trace": [1, 2]}', ("trace",)) == (
        hashlib.sha256(b'{"trace":[1,2]}').hexdigest(),
        False,
        (),
    )
    many = b'{"trace": [' + b",".join(b"9007199254740993" for _ in range(5000)) + b"]}"
    got = canonical_text_sha256(many, ("trace",))
    assert got is not None
    assert got[1:] == (True, None)  # too many places to list: the caller looks everywhere


def test_rounding_where_the_text_path_saw_unsafe_integers(
    big_bundle_texts: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rounding only the listed events gives the same bundle as the tree path's full walk."""
    bundle = orjson.loads(big_bundle_texts[0])
    bundle.pop("integrity")
    bundle["trace"][5].setdefault("payload", {})["big"] = 2**64 + 1
    bundle["trace"][7]["big"] = [-(2**60) - 1]
    bundle["artifacts"][3]["data"]["big"] = 2**53 + 1
    bundle["run"]["metadata"]["big"] = 10**30
    bundle["extra"] = {"big": 2**63}
    text = json.dumps(seal_bundle(bundle), indent=2, ensure_ascii=False).encode()  # orjson stops at 64 bits
    assert len(text) >= OVERLAP_MIN_BYTES
    fast = check_bundle(text)
    with monkeypatch.context() as patch:
        patch.setattr(bundle_module, "has_text_accelerator", lambda: False)
        slow = check_bundle(text)
    assert fast.ok and slow.ok, (fast.message, slow.message)
    assert fast.bundle is not None and slow.bundle is not None
    assert fast.bundle["trace"][5]["payload"]["big"] == float(2**64 + 1)
    assert type(fast.bundle["run"]["metadata"]["big"]) is float
    assert repr(fast.bundle) == repr(slow.bundle)  # values and int/float types alike
