"""The host SDK (sdk/python, ``workbench_sdk``) stands alone: importing it loads neither Django
nor the server, and what it vendors from the server gives the server's answers."""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal

import pytest
from workbench_sdk import cachekey as sdk_cachekey
from workbench_sdk import events as sdk_events
from workbench_sdk import pricing as sdk_pricing
from workbench_sdk._canonical import canonical_bytes as sdk_canonical_bytes

from runs.engine.divergence import REPLAYED_SUMMARY
from runs.protocol import cachekey
from runs.protocol.canonical import canonical_bytes
from runs.providers.base import Usage
from runs.providers.pricing import Price, cost, protocol_cost

PROBE = (
    "import json, sys, workbench_sdk, workbench_sdk.client, workbench_sdk.traced, workbench_sdk.cachekey;"
    "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
)


def test_importing_the_sdk_loads_no_django_and_no_server():
    out = subprocess.run(
        [sys.executable, "-I", "-c", PROBE], capture_output=True, text=True, check=True, cwd="/"
    ).stdout
    loaded = set(json.loads(out))
    assert "workbench_sdk" in loaded
    assert not loaded & {"django", "runs", "playground", "workbench", "accounts", "asgiref"}


WIRE_REQUESTS = [
    ("anthropic", "claude-haiku-4-5", {"model": "claude-haiku-4-5", "max_tokens": 8, "messages": []}),
    (
        "anthropic",
        None,
        {
            "model": "claude-sonnet-4-5",
            "system": [{"type": "text", "text": "Be brief", "cache_control": {"type": "ephemeral"}}],
            "max_tokens": 1024,
            "temperature": 1,
            "top_k": 5,
            "stop_sequences": ["\n\nHuman:"],
            "thinking": {"type": "enabled", "budget_tokens": 512},
            "tool_choice": {"type": "auto"},
            "tools": [
                {"name": "ß", "input_schema": {"type": "object"}},
                {"name": "😀", "description": "emoji", "input_schema": {"type": "object"}},
                {"name": "\ue000", "input_schema": {}},
            ],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "x" * 3}]},
                {"role": "assistant", "content": "y"},
            ],
            "stream": True,
            "metadata": {"user_id": "u1"},
        },
    ),
    (
        "OpenAI",
        "gpt-5-mini",
        {
            "model": "gpt-5-mini",
            "messages": [{"role": "developer", "content": "d"}, {"role": "user", "content": "q"}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"a": 1.5e-7}}},
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
            "max_completion_tokens": 100,
            "seed": 2**60,
            "top_p": 0.1 + 0.2,
            "stop": "END",
            "reasoning_effort": "low",
            "stream_options": {"include_usage": True},
        },
    ),
    (
        "openai",
        "gpt-4o",
        {"messages": [{"role": "user", "content": "q"}], "response_format": {"type": "text"}},
    ),
]


@pytest.mark.parametrize("index", range(len(WIRE_REQUESTS)))
def test_cache_keys_are_byte_identical_to_the_servers(index):
    provider, model, body = WIRE_REQUESTS[index]
    server_request = cachekey.request_from_wire(provider, model, body)
    sdk_request = sdk_cachekey.request_from_wire(provider, model, body)
    assert sdk_request == server_request
    for recipe in cachekey.RECIPES:
        server_input = cachekey.cache_key_input(server_request, recipe=recipe)
        assert sdk_canonical_bytes(server_input) == canonical_bytes(server_input)
        assert sdk_cachekey.llm_cache_key(sdk_request, recipe=recipe) == cachekey.llm_cache_key(
            server_request, recipe=recipe
        )


def test_cache_key_refusals_agree():
    from runs.protocol.errors import ProtocolError

    bad = {"provider": "openai", "model": "m", "messages": [{"role": "user", "content": 3}]}
    with pytest.raises(ProtocolError) as server:
        cachekey.llm_cache_key(bad)
    with pytest.raises(sdk_cachekey.CacheKeyError) as sdk:
        sdk_cachekey.llm_cache_key(bad)
    assert sdk.value.path == server.value.path == "messages[0].content"


def test_replayed_summary_and_costs_match_the_server():
    assert sdk_events.REPLAYED_SUMMARY == REPLAYED_SUMMARY
    price = Price(
        input=Decimal("1"),
        output=Decimal("5"),
        cache_read=Decimal("0.1"),
        cache_write=Decimal("1.25"),
        currency="eur",
    )
    as_dict = {"input": "1", "output": 5, "cache_read": 0.1, "cache_write": "1.25", "currency": "eur"}
    for inp, out, read, write in [(1000, 200, 300, 100), (7, 0, 0, 0), (123456, 7890, 0, 2000)]:
        server = protocol_cost(
            cost(
                Usage(input_tokens=inp, output_tokens=out, cache_read_tokens=read, cache_write_tokens=write),
                price,
            ),
            price.currency,
        )
        usage = {"inputTokens": inp, "outputTokens": out, "cachedInputTokens": read}
        assert sdk_pricing.cost_of(usage, price, cache_write_tokens=write) == server
        assert sdk_pricing.cost_of(usage, as_dict, cache_write_tokens=write) == server


def test_gate_conventions_match_the_server():
    """The SDK writes what the server reads: the external driver flag and the gate payload key."""
    from workbench_sdk import run as sdk_run

    from runs.engine import state as engine_state

    assert sdk_run.DRIVER_METADATA_KEY == engine_state.DRIVER_METADATA_KEY
    assert sdk_run.EXTERNAL_DRIVER == engine_state.EXTERNAL_DRIVER
    for args in [("review", "CHECKPOINT", "tone"), ("draft", "PAUSE_AFTER", None)]:
        assert sdk_run.gate_payload_key(*args) == engine_state.gate_payload_key(*args)
