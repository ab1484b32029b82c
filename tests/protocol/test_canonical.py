"""Canonical JSON: differential against ``rfc8785`` plus the JavaScript-only cases."""

from __future__ import annotations

import math
import random
import struct

import orjson
import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from runs.protocol.canonical import (
    UnrepresentableJSON,
    _float_is_safe,
    canonical_bytes,
    canonical_form,
    canonical_str,
    js_number,
    parse_json,
    sha256_hex,
    wire_bytes,
)
from runs.protocol.errors import ErrorCode, ProtocolError

SAFE = 2**53 - 1

json_floats = st.floats(allow_nan=False, allow_infinity=False)
json_ints = st.integers(min_value=-SAFE, max_value=SAFE)
# Text without lone surrogates; keys lean on the characters where UTF-16 and code-point order part.
tricky_chars = st.sampled_from(
    ["\ue000", "\uffff", "\ufb01", "\U0001f600", "\U00010000", "\U0010ffff", "a", "é"]
)
text = st.text(st.characters(blacklist_categories=("Cs",)))
keys = st.one_of(text, st.lists(tricky_chars, max_size=4).map("".join))
scalars = st.one_of(st.none(), st.booleans(), json_ints, json_floats, text)
json_values = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=5), st.dictionaries(keys, children, max_size=5)),
    max_leaves=40,
)

SPECIFIED_FLOATS = [
    1.0,
    0.0,
    -0.0,
    1e-7,
    3e-6,
    1e16,
    5e21,
    1e21,
    float(2**53),
    float(2**53 + 1),
    1e300,
    5e-324,
]


@pytest.mark.parametrize("value", SPECIFIED_FLOATS)
def test_specified_floats_match_rfc8785(value: float) -> None:
    assert canonical_bytes(value) == rfc8785.dumps(value)
    assert canonical_bytes([value, {"x": value}]) == rfc8785.dumps([value, {"x": value}])


def test_specified_float_texts() -> None:
    assert [js_number(v) for v in SPECIFIED_FLOATS] == [
        "1", "0", "0", "1e-7", "0.000003", "10000000000000000", "5e+21", "1e+21",
        "9007199254740992", "9007199254740992", "1e+300", "5e-324",
    ]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(json_values)
def test_matches_rfc8785(value: object) -> None:
    assert canonical_bytes(value) == rfc8785.dumps(value)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_parse_canonical_parse_round_trip(value: object) -> None:
    once = canonical_bytes(value)
    assert canonical_bytes(parse_json(once)) == once
    assert parse_json(once) == parse_json(orjson.dumps(value))


@settings(max_examples=2000, deadline=None)
@given(json_floats)
def test_float_text_matches_rfc8785(value: float) -> None:
    assert js_number(value).encode() == rfc8785.dumps(value)


def test_fast_path_floats_print_as_javascript() -> None:
    """Floats the fast path leaves to orjson are printed exactly as JavaScript prints them."""
    rng = random.Random(8785)
    checked = 0
    for i in range(200_000):
        if i % 2:
            value = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        else:
            value = rng.uniform(-1, 1) * 10 ** rng.randint(-24, 24)
        if not math.isfinite(value) or not _float_is_safe(value):
            continue
        checked += 1
        assert orjson.dumps(value).decode() == js_number(value), value
    assert checked > 50_000


def test_keys_sorted_by_utf16_code_units() -> None:
    # U+E000 sorts before U+1F600 by code point but after it in UTF-16 (0xD83D < 0xE000).
    value = {"\ue000": 1, "\U0001f600": 2, "a": {"\uffff": [], "\U00010000": None}}
    out = canonical_bytes(value)
    assert out == rfc8785.dumps(value)
    assert out.decode().index("\U0001f600") < out.decode().index("\ue000")


def test_big_integers_are_the_doubles_they_denote() -> None:
    assert canonical_bytes(2**53 + 1) == b"9007199254740992"
    assert canonical_bytes([-(2**60)]) == b"[-1152921504606847000]"
    assert canonical_bytes(10**25) == b"1e+25"
    assert canonical_form({"a": 2**53})[1] is True
    assert canonical_form({"a": SAFE})[1] is False
    assert parse_json(b"[9007199254740993, 18446744073709551616, 1]") == [2.0**53, 2.0**64, 1]


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan, {"a": [math.nan]}, 10**400])
def test_non_finite_numbers_are_refused(value: object) -> None:
    with pytest.raises(ProtocolError) as info:
        canonical_bytes(value)
    assert info.value.code == ErrorCode.INVALID_INPUT


@pytest.mark.parametrize("value", ["\ud800", {"k": "x\udfff"}, {"\ud800": 1}])
def test_lone_surrogates_are_refused(value: object) -> None:
    with pytest.raises(ProtocolError) as info:
        canonical_bytes(value)
    assert info.value.code == ErrorCode.INVALID_INPUT


@pytest.mark.parametrize("value", [{1: "a", "b": 2}, {"a": object()}, {"a": {1, 2}}])
def test_non_json_values_are_refused(value: object) -> None:
    with pytest.raises(ProtocolError):
        canonical_bytes(value)


@pytest.mark.parametrize("text", [b"1e400", b'{"a": [-1e999]}', b'"\\ud800"', b'["x\\udc00"]'])
def test_parse_refuses_what_has_no_canonical_form(text: bytes) -> None:
    with pytest.raises(UnrepresentableJSON) as info:
        parse_json(text)
    assert info.value.code == ErrorCode.INVALID_JSON


@pytest.mark.parametrize("text", [b"", b"nope", b"[1,]", b"NaN", b'{"a":1', "{'a': 1}"])
def test_parse_refuses_non_json(text: bytes | str) -> None:
    with pytest.raises(ProtocolError) as info:
        parse_json(text)
    assert info.value.code == ErrorCode.INVALID_JSON
    assert not isinstance(info.value, UnrepresentableJSON)


def test_escaping_and_str_helpers() -> None:
    value = {"s": 'q"b\\\b\f\n\r\t\x01\x1f\x7f/é😀'}
    assert canonical_bytes(value) == rfc8785.dumps(value)
    assert canonical_str(value) == rfc8785.dumps(value).decode()
    assert sha256_hex(b"") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_subclasses_serialize_as_their_json_type() -> None:
    class Text(str):
        pass

    assert canonical_bytes({Text("k"): Text("v"), "n": True}) == b'{"k":"v","n":true}'


def test_str_subclasses_whose_str_is_themselves() -> None:
    """Django's SafeString returns itself from ``str()``: it is written as its text, not looped on."""

    class Safe(str):
        def __str__(self) -> str:
            return self

    value = {Safe("k"): [Safe("<b>x</b>")], "n": 1e21}
    assert canonical_bytes(value) == b'{"k":["<b>x</b>"],"n":1e+21}'
    assert wire_bytes(value) == b'{"k":["<b>x</b>"],"n":1e+21}'


def test_input_is_not_modified() -> None:
    value = {"b": [1.0, 3e-6, {"\ue000": 1, "\U0001f600": 2}], "a": 2**60}
    snapshot = repr(value)
    canonical_bytes(value)
    assert repr(value) == snapshot
