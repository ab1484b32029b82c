"""runs.web.wire: every JSON the server emits spells numbers as ECMAScript does and keeps member order."""

from __future__ import annotations

import datetime
import enum
import uuid
from decimal import Decimal

import pytest
from pydantic import BaseModel

from runs.protocol.errors import ProtocolError
from runs.web.wire import WireJsonResponse, rewire, wire_json

# Values Python writes its own way, and what JavaScript's JSON.stringify writes for them.
NUMBERS = [1e-6, -0.0, 2**53, 1e21, 1.8446744073709552e19, 1000.0, 2**64, 5e-324, 0.1]
JS_NUMBERS = b"[0.000001,0,9007199254740992,1e+21,18446744073709552000,1000,18446744073709552000,5e-324,0.1]"


def test_numbers_as_javascript_spells_them():
    assert wire_json(NUMBERS) == JS_NUMBERS


def test_members_keep_their_order():
    assert (
        wire_json({"z": 1, "a": {"y": 2.5, "b": []}, "é": None})
        == '{"z":1,"a":{"y":2.5,"b":[]},"é":null}'.encode()
    )


def test_values_django_would_encode_are_encoded_like_jsonresponse():
    class Out(BaseModel):
        when: datetime.datetime
        amount: float
        note: str | None = None

    stamp = datetime.datetime(2026, 11, 23, 12, 0, 0, 123456, tzinfo=datetime.UTC)
    ident = uuid.UUID("12345678-1234-5678-1234-567812345678")
    body = wire_json(
        {"d": Decimal("0.10"), "u": ident, "t": stamp, 3: "int key", "m": Out(when=stamp, amount=1e-7)}
    )
    assert body == (
        b'{"d":"0.10","u":"12345678-1234-5678-1234-567812345678","t":"2026-11-23T12:00:00.123Z",'
        b'"3":"int key","m":{"when":"2026-11-23T12:00:00.123Z","amount":1e-7}}'
    )


def test_enums_are_written_as_their_values():
    from django.db import models

    class Colour(models.TextChoices):
        RED = "red"

    class Level(enum.IntEnum):
        HIGH = 3

    assert (
        wire_json({"c": Colour.RED, "l": Level.HIGH, "s": [Colour.RED]}) == b'{"c":"red","l":3,"s":["red"]}'
    )


def test_what_json_cannot_hold_is_refused_not_written():
    with pytest.raises(ProtocolError) as exc:
        wire_json({"x": float("nan")})
    assert exc.value.code == "INVALID_INPUT"


def test_rewire_respells_python_json_and_leaves_non_json_alone():
    import json

    assert rewire(json.dumps({"b": NUMBERS, "a": 1}).encode()) == b'{"b":' + JS_NUMBERS + b',"a":1}'
    assert rewire(b"") == b""
    assert rewire(b"not json") == b"not json"


def test_response_class():
    response = WireJsonResponse({"n": -0.0, "list": [1e21]}, status=201)
    assert (response.status_code, response["Content-Type"]) == (201, "application/json")
    assert response.content == b'{"n":0,"list":[1e+21]}'
