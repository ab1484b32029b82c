"""Write test/vectors.json: cache keys computed by the Python SDK, pinned for the TypeScript one.

Run: ``python sdk/typescript/test/make_vectors.py`` (``--check`` compares with the committed file).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from workbench_sdk.cachekey import llm_cache_keys, request_from_wire

HERE = Path(__file__).resolve().parent

REQUESTS: list[dict[str, object]] = [
    {"provider": "openai", "model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]},
    {
        "provider": " Anthropic ",
        "model": "claude-3-5-haiku",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {
                "role": "user",
                "content": [{"type": "text", "text": 'caf\u00e9 \u2603 \U0001f600 "q" \\ \n\t\u0001'}],
            },
        ],
        "temperature": 0.7,
        "topP": 1,
        "topK": 40,
        "maxOutputTokens": 256,
        "seed": 42,
        "stop": "END",
        "responseFormat": {"type": "json", "schema": {"type": "object", "b": 1, "a": 2}},
        "providerOptions": {"thinking": {"budget_tokens": 1024, "type": "enabled"}},
    },
    {
        "provider": "openai",
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "tools"}],
        "tools": [
            {"name": "zeta", "parameters": {"type": "object"}},
            {"name": "\u00e9t\u00e9", "description": "accented"},
            {
                "name": "Alpha",
                "description": "upper",
                "parameters": {"properties": {"x": {"type": "number"}}},
            },
            {"name": "\U0001f600emoji"},
            {"name": "\uff61half"},
        ],
        "stop": ["a", "b"],
        "safetySettings": [{"category": "x", "threshold": "none"}],
    },
    {
        "provider": "openai",
        "model": "m",
        "messages": [{"role": "user", "content": "numbers"}],
        "temperature": 1e-7,
        "seed": 1e21,
        "providerOptions": {"n": [0.1, 100.0, 123456789012345680000.0, 5e-324, -0.5, 1.5e300, 2**53 - 1]},
    },
]


# Provider wire bodies (what the traced clients record): keyed through request_from_wire.
WIRE: list[tuple[str, str | None, dict[str, object]]] = [
    (
        "openai",
        None,
        {
            "model": "gpt-5-mini",
            "messages": [{"role": "user", "content": "use get_weather for Oslo"}],
            "tools": [
                {
                    "type": "function",
                    "function": {
                        "name": "get_weather",
                        "description": "Weather",
                        "parameters": {"type": "object"},
                    },
                }
            ],
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_completion_tokens": 64,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "x", "schema": {"type": "object"}},
            },
            "reasoning_effort": "low",
        },
    ),
    (
        "anthropic",
        "claude-haiku-4-5",
        {
            "model": "claude-haiku-4-5",
            "system": "Be brief.",
            "max_tokens": 50,
            "stop_sequences": ["END"],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Forecast for Oslo"}]}],
            "tools": [{"name": "lookup", "input_schema": {"type": "object"}}],
            "thinking": {"type": "enabled", "budget_tokens": 1024},
            "metadata": {"user_id": "u1"},
        },
    ),
]


def vectors() -> list[dict[str, object]]:
    out: list[dict[str, object]] = [
        {"request": request, "keys": llm_cache_keys(request)} for request in REQUESTS
    ]
    for provider, model, body in WIRE:
        keys = llm_cache_keys(request_from_wire(provider, model, body))
        out.append({"wire": {"provider": provider, "model": model, "body": body}, "keys": keys})
    return out


def main() -> int:
    text = json.dumps(vectors(), indent=1, ensure_ascii=False) + "\n"
    target = HERE / "vectors.json"
    if "--check" in sys.argv:
        return 0 if target.read_text(encoding="utf-8") == text else 1
    target.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
