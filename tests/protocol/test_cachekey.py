"""LLM cache keys: vectors whose canonical text is written out by hand, then hashed."""

from __future__ import annotations

import hashlib

import pytest
import rfc8785

from runs.protocol.cachekey import cache_key_input, llm_cache_key, llm_cache_keys, request_from_wire
from runs.protocol.errors import ErrorCode, ProtocolError


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


BASIC = {
    "provider": "Anthropic",
    "model": "claude-haiku-4-5",
    "messages": [{"role": "user", "content": "Hi"}],
    "temperature": 0.5,
    "maxOutputTokens": 100,
    "seed": 7,
    "stop": "END",
    "metadata": {"traceId": "t-1"},
}


def test_v1_vector_by_hand():
    # keys sorted, provider lower-cased, temperature kept, maxOutputTokens/seed/stop/metadata excluded
    text = '{"messages":[{"content":"Hi","role":"user"}],"model":"claude-haiku-4-5","provider":"anthropic","temperature":0.5}'
    assert llm_cache_key(BASIC, recipe="v1") == sha(text)


def test_v2_vector_by_hand():
    text = (
        '{"model":"claude-haiku-4-5","provider":"anthropic","recipe":"openwop-semantic-request-v2",'
        '"request":{"maxOutputTokens":100,"messages":[{"content":"Hi","role":"user"}],"seed":7,'
        '"stop":["END"],"temperature":0.5}}'
    )
    assert llm_cache_key(BASIC) == sha(text)
    assert llm_cache_keys(BASIC) == {"v1": llm_cache_key(BASIC, recipe="v1"), "v2": sha(text)}


def test_tools_sorted_by_name_and_reduced():
    request = {
        "provider": "openai",
        "model": "gpt-4.1-mini",
        "messages": [],
        "tools": [
            {"name": "zeta", "parameters": {"type": "object"}, "strict": True},
            {"name": "alpha", "description": "first", "parameters": {"properties": {"b": {}, "a": {}}}},
        ],
        "topK": 1.0,
    }
    text = (
        '{"messages":[],"model":"gpt-4.1-mini","provider":"openai","tools":['
        '{"description":"first","name":"alpha","parameters":{"properties":{"a":{},"b":{}}}},'
        '{"name":"zeta","parameters":{"type":"object"}}],"topK":1}'
    )
    assert llm_cache_key(request, recipe="v1") == sha(text)


def test_message_order_and_content_shape_are_kept():
    a = {
        "provider": "x",
        "model": "m",
        "messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
    }
    b = {
        "provider": "x",
        "model": "m",
        "messages": [{"role": "user", "content": "b"}, {"role": "user", "content": "a"}],
    }
    c = {
        "provider": "x",
        "model": "m",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "a"}]},
            {"role": "user", "content": "b"},
        ],
    }
    keys = {llm_cache_key(r, recipe=recipe) for r in (a, b, c) for recipe in ("v1",)}
    assert len(keys) == 3


def test_output_shaping_fields_split_v2_but_not_v1():
    short = {**BASIC, "maxOutputTokens": 5}
    assert llm_cache_key(short, recipe="v1") == llm_cache_key(BASIC, recipe="v1")
    assert llm_cache_key(short) != llm_cache_key(BASIC)
    other_seed = {**BASIC, "seed": 8}
    assert llm_cache_key(other_seed) != llm_cache_key(BASIC)
    with_options = {**BASIC, "providerOptions": {"thinking": {"type": "enabled", "budget_tokens": 1024}}}
    assert llm_cache_key(with_options) != llm_cache_key(BASIC)
    assert llm_cache_key(with_options, recipe="v1") == llm_cache_key(BASIC, recipe="v1")


def test_absent_and_null_are_the_same():
    plain = {"provider": "p", "model": "m", "messages": []}
    nulls = {**plain, "temperature": None, "tools": None, "seed": None, "providerOptions": None}
    assert llm_cache_key(plain) == llm_cache_key(nulls)
    assert "temperature" not in cache_key_input(nulls, recipe="v1")


def test_agrees_with_rfc8785_package():
    request = {**BASIC, "temperature": 1e-7, "messages": [{"role": "user", "content": "é \u2028 \U0001f600"}]}
    body = cache_key_input(request)
    assert llm_cache_key(request) == hashlib.sha256(rfc8785.dumps(body)).hexdigest()


@pytest.mark.parametrize(
    ("request_", "path"),
    [
        ("not an object", ""),
        ({"model": "m", "messages": []}, "provider"),
        ({"provider": "p", "model": "", "messages": []}, "model"),
        ({"provider": "p", "model": "m", "messages": "hi"}, "messages"),
        ({"provider": "p", "model": "m", "messages": [{"content": "x"}]}, "messages[0]"),
        ({"provider": "p", "model": "m", "messages": [], "temperature": "hot"}, "temperature"),
        ({"provider": "p", "model": "m", "messages": [], "temperature": True}, "temperature"),
        ({"provider": "p", "model": "m", "messages": [], "tools": [{"description": "x"}]}, "tools[0]"),
        ({"provider": "p", "model": "m", "messages": [], "seed": "7"}, "seed"),
        ({"provider": "p", "model": "m", "messages": [], "stop": [1]}, "stop"),
        ({"provider": "p", "model": "m", "messages": [], "providerOptions": []}, "providerOptions"),
        ({"provider": "p", "model": "m", "messages": [], "temperature": float("nan")}, None),
    ],
)
def test_bad_input_is_a_coded_error(request_, path):
    with pytest.raises(ProtocolError) as info:
        llm_cache_key(request_)
    assert info.value.code == ErrorCode.INVALID_INPUT
    if path is not None:
        assert info.value.path == path


def test_unknown_recipe():
    with pytest.raises(ProtocolError) as info:
        llm_cache_key(BASIC, recipe="v3")
    assert info.value.path == "recipe"


def test_anthropic_wire_body():
    wire = {
        "model": "claude-haiku-4-5",
        "max_tokens": 64,
        "system": "Be brief.",
        "messages": [{"role": "user", "content": "Hi"}],
        "tools": [{"name": "lookup", "description": "d", "input_schema": {"type": "object"}}],
        "temperature": 0.2,
        "stream": True,
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }
    req = request_from_wire("anthropic", None, wire)
    assert req == {
        "provider": "anthropic",
        "model": "claude-haiku-4-5",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        "tools": [{"name": "lookup", "description": "d", "parameters": {"type": "object"}}],
        "temperature": 0.2,
        "maxOutputTokens": 64,
        "providerOptions": {"thinking": {"type": "enabled", "budget_tokens": 1024}},
    }
    # streaming or not is the same request
    assert llm_cache_key(request_from_wire("anthropic", None, {**wire, "stream": False})) == llm_cache_key(
        req
    )


def test_openai_wire_body():
    wire = {
        "model": "gpt-4.1-mini",
        "messages": [{"role": "user", "content": "Hi"}],
        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "x", "schema": {"type": "object"}},
        },
        "max_completion_tokens": 10,
        "stream_options": {"include_usage": True},
        "user": "u-1",
    }
    req = request_from_wire("openai", "gpt-4.1-mini", wire)
    assert req["tools"] == [{"name": "f", "parameters": {"type": "object"}}]
    assert req["responseFormat"] == {"type": "json", "schema": {"type": "object"}}
    assert req["maxOutputTokens"] == 10
    assert "providerOptions" not in req
