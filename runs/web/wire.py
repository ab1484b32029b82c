"""JSON the server emits, as JavaScript's ``JSON.stringify`` writes it.

One door for every JSON body, page endpoint, websocket message and MCP answer: object members
in the order they come, numbers spelt as ECMAScript prints them (``0.000001``, ``0`` for
``-0.0``, ``9007199254740992``, ``1e+21``, ``18446744073709552000``), strings escaped
minimally. The writer is :func:`runs.protocol.canonical.wire_bytes` (pure); this module adds
what only the web layer has: values that are not JSON yet (pydantic models, ``Decimal``,
``datetime``, ``UUID``, lazy translations) become JSON the way Django's ``JsonResponse`` would
make them, and an ``HttpResponse`` class.
"""

from __future__ import annotations

from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpResponse

from runs.protocol.canonical import parse_json, wire_bytes
from runs.protocol.errors import ProtocolError

_ENCODER = DjangoJSONEncoder()


def wire_json(value: Any) -> bytes:
    """The bytes of ``value`` as JSON on the wire (see the module doc).

    Raises ``ProtocolError(INVALID_INPUT)`` for what JSON cannot hold (``nan``, infinities,
    objects of no JSON meaning).
    """
    try:
        return wire_bytes(value)
    except ProtocolError:
        pass
    return wire_bytes(_plain(value))


def rewire(body: bytes) -> bytes:
    """JSON text written by another serializer (pydantic, ``json``), spelt again as
    :func:`wire_json` writes it; text that does not parse is returned unchanged."""
    try:
        return wire_bytes(parse_json(body))
    except ProtocolError:
        return body


def _plain(value: Any) -> Any:
    """``value`` with every non-JSON leaf turned into what ``JsonResponse`` would write."""
    if isinstance(value, dict):
        return {_key(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, str):  # TextChoices and other str enums: their text, as json writes it
        return str.__str__(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int | float):  # IntEnum and the like
        return int(value) if isinstance(value, int) else float(value)
    if hasattr(value, "model_dump"):  # pydantic (ninja schemas, MCP results)
        return _plain(value.model_dump(by_alias=True, exclude_none=True))
    return _plain(_ENCODER.default(value))  # datetime, Decimal, UUID, Promise; TypeError otherwise


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, int) and not isinstance(key, bool):
        return str(key)
    raise TypeError(f"object key {key!r} is not a string")


class WireJsonResponse(HttpResponse):
    """``JsonResponse`` with the body written by :func:`wire_json` (any JSON value, not only objects)."""

    def __init__(self, data: Any, **kwargs: Any) -> None:
        kwargs.setdefault("content_type", "application/json")
        super().__init__(content=wire_json(data), **kwargs)
