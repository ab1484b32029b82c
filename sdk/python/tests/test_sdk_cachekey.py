"""workbench_sdk.cachekey: keys equal to the server's (vectors computed by runs.protocol.cachekey;
the server's suite also compares both implementations directly)."""

from __future__ import annotations

import pytest

from workbench_sdk._canonical import CanonicalError, canonical_bytes, js_number
from workbench_sdk.cachekey import CacheKeyError, llm_cache_key, llm_cache_keys, request_from_wire

CASES = {
    "anthropic_basic": (
        ("anthropic", "claude-haiku-4-5"),
        {"model": "claude-haiku-4-5", "max_tokens": 32, "messages": [{"role": "user", "content": "Hi"}]},
        "23339769f4716fe278cb703a1ecc883e39259250400576ced14dd499322dd0cb",
        "42eeeada1e632f36649c23d63c0f014efc0375702ac14983717458c9173b8f6d",
    ),
    "anthropic_system_tools": (
        ("anthropic", "claude-haiku-4-5"),
        {
            "model": "claude-haiku-4-5",
            "system": "Be brief",
            "max_tokens": 100,
            "temperature": 0.2,
            "tools": [
                {"name": "zeta", "input_schema": {"type": "object"}},
                {
                    "name": "alpha",
                    "description": "A",
                    "input_schema": {"type": "object", "properties": {"x": {"type": "number"}}},
                },
            ],
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "stream": True,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "héllo 😀 \ue000"}]}],
        },
        "2b87b73d43f4b5f7c89dce12993116de8367c755578dce12cde64fbdc90aa665",
        "053060315f5d7ff119c3286bc818dcad927e74bb3e1e0c3f02c0aa819dba5c34",
    ),
    "openai_format": (
        ("openai", "gpt-5-mini"),
        {
            "model": "gpt-5-mini",
            "messages": [{"role": "user", "content": "Once"}],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": {"type": "object"}},
            },
            "seed": 7,
            "stop": "END",
            "top_p": 1e-7,
            "stream_options": {"include_usage": True},
        },
        "ec381f0e6b5020f1ee176d1732f1ce62030a6289510306538b28fa5f3e3f8928",
        "1a25c7757de10567a3f9abeca7ec27b075b9cdd4f22476adc6dfd2ed6d5a0ed4",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_keys_match_the_servers(name):
    (provider, model), body, v2, v1 = CASES[name]
    request = request_from_wire(provider, model, body)
    assert llm_cache_key(request) == v2
    assert llm_cache_keys(request) == {"v1": v1, "v2": v2}


def test_transport_fields_do_not_change_the_key():
    (provider, model), body, v2, _ = CASES["anthropic_basic"]
    noisy = {**body, "stream": True, "metadata": {"user_id": "u"}}
    assert llm_cache_key(request_from_wire(provider, model, noisy)) == v2


def test_bad_requests_are_refused_with_a_path():
    with pytest.raises(CacheKeyError) as info:
        llm_cache_key(request_from_wire("openai", "gpt", {"messages": [{"content": "no role"}]}))
    assert info.value.code == "INVALID_INPUT" and info.value.path == "messages[0]"
    with pytest.raises(CacheKeyError):
        llm_cache_key(request_from_wire("openai", "gpt", {"messages": [], "temperature": float("nan")}))


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.0, "0"),
        (-0.0, "0"),
        (1.0, "1"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1e-6, "0.000001"),
        (1e-7, "1e-7"),
        (0.1 + 0.2, "0.30000000000000004"),
        (2**53 + 1, "9007199254740992"),
        (5e-324, "5e-324"),
    ],
)
def test_numbers_as_javascript_prints_them(value, text):
    assert js_number(value) == text


def test_canonical_bytes():
    value = {"b": [1, 2.5, None, True], "a": 'é\n\u001f"', "\ue000": 1, "😀": 2}
    assert canonical_bytes(value) == '{"a":"é\\n\\u001f\\"","b":[1,2.5,null,true],"😀":2,"\ue000":1}'.encode()
    for bad in (float("inf"), "\ud800", {1: 2}, object()):
        with pytest.raises(CanonicalError):
            canonical_bytes(bad)
