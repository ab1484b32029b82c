"""Token arithmetic: the smallest prefix a provider caches, a rough token estimate of a request,
and how full a model's context is after a call."""

from __future__ import annotations

from typing import Any

from playground.compose.session import ModelSpec

CACHE_TTL_SECONDS = 300  # an ephemeral marker lives 5 minutes, refreshed by every hit


def min_cacheable_tokens(model: ModelSpec) -> int:
    """The smallest prefix the provider caches (shorter marked prefixes are silently not
    cached): 2,048 tokens for Anthropic's Haiku models, 1,024 for the others and for OpenAI."""
    if model.provider == "anthropic" and "haiku" in model.model.lower():
        return 2048
    return 1024


def estimate_tokens(value: Any) -> int:
    """A rough count (about four characters per token) of the text in ``value``, enough to warn
    that a prefix is too short to cache; the usage of the answer has the real counts."""
    if isinstance(value, str):
        return len(value) // 4
    if isinstance(value, dict):
        return sum(estimate_tokens(v) for k, v in value.items() if k not in ("cache_control", "type"))
    if isinstance(value, list):
        return sum(estimate_tokens(v) for v in value)
    return 0


def context_window_use(input_tokens: int, output_tokens: int, window: int | None) -> dict | None:
    """How full the model's context is after the last call (its whole input plus its output:
    the next stateful turn starts from there). None when the window is unknown."""
    if not window:
        return None
    used = max(0, input_tokens) + max(0, output_tokens)
    return {
        "used": used,
        "window": window,
        "percent": round(100 * used / window, 1),
        "remaining": max(0, window - used),
    }
