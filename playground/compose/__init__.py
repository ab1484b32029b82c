"""Prompt composition: a playground session's toggles -> the exact provider request.

Pure functions over plain data (no Django, no SDK, no network). The session is what the page
holds: mode, prompts, the file, the toggles, the advanced settings and the conversation so far.
The conversation is kept in one canonical form, the Anthropic Messages content blocks exactly as
they were sent (documents, cache markers, tool results), so replaying it reproduces the same
prefix and the provider's cache hits. ``compose_anthropic`` sends that form as it is;
``compose_openai`` translates it deterministically into Chat Completions messages, so the prefix
is identical from one turn to the next there too.

The modules, each importing the ones below it directly (never this facade):

- ``session``: the limits, ``ComposeError``, the dataclasses, session <-> JSON
- ``changes``: the smart behaviours of the settings (``apply_change``, ``with_overrides``,
  ``after_send``)
- ``tokens``: cache minimums, token estimates, context window use
- ``blocks``: what both providers' requests are built of, and the checks they pass
- ``anthropic``, ``openai``: one composer each; ``dispatch``: ``compose`` picks one
- ``recorded``: a recorded request -> the session that recomposes to it

This package is the public API (``from playground import compose as c; c.compose(...)``).
"""

from playground.compose.anthropic import compose_anthropic
from playground.compose.blocks import document_block, fingerprint, output_tool_name, pending_tool_uses
from playground.compose.changes import (
    COLUMN_FIELDS,
    MAX_COMPARE_COLUMNS,
    add_stop_sequence,
    after_send,
    apply_change,
    clamp_budget,
    remove_stop_sequence,
    set_max_tokens,
    set_mode,
    set_thinking,
    set_thinking_budget,
    with_overrides,
)
from playground.compose.dispatch import compose
from playground.compose.openai import compose_openai, reasoning_effort, to_openai_messages
from playground.compose.recorded import session_from_anthropic_request, session_from_openai_request
from playground.compose.session import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_THINKING_BUDGET,
    EPHEMERAL,
    MAX_CACHE_BREAKPOINTS,
    MAX_STOP_SEQUENCES,
    MAX_TOKENS_LIMIT,
    MIN_THINKING_BUDGET,
    MODES,
    OPERATION_TYPES,
    PDF,
    PROVIDER_KINDS,
    TEXT_MEDIA_TYPES,
    THINKING_HEADROOM,
    THINKING_MAX_TOKENS,
    Advanced,
    ComposeError,
    Composition,
    Document,
    ModelSpec,
    Override,
    Session,
    Tool,
    advanced_from_json,
    advanced_to_json,
    session_from_json,
    session_to_json,
)
from playground.compose.tokens import (
    CACHE_TTL_SECONDS,
    context_window_use,
    estimate_tokens,
    min_cacheable_tokens,
)

__all__ = [
    "CACHE_TTL_SECONDS",
    "COLUMN_FIELDS",
    "DEFAULT_MAX_TOKENS",
    "DEFAULT_THINKING_BUDGET",
    "EPHEMERAL",
    "MAX_CACHE_BREAKPOINTS",
    "MAX_COMPARE_COLUMNS",
    "MAX_STOP_SEQUENCES",
    "MAX_TOKENS_LIMIT",
    "MIN_THINKING_BUDGET",
    "MODES",
    "OPERATION_TYPES",
    "PDF",
    "PROVIDER_KINDS",
    "TEXT_MEDIA_TYPES",
    "THINKING_HEADROOM",
    "THINKING_MAX_TOKENS",
    "Advanced",
    "ComposeError",
    "Composition",
    "Document",
    "ModelSpec",
    "Override",
    "Session",
    "Tool",
    "add_stop_sequence",
    "advanced_from_json",
    "advanced_to_json",
    "after_send",
    "apply_change",
    "clamp_budget",
    "compose",
    "compose_anthropic",
    "compose_openai",
    "context_window_use",
    "document_block",
    "estimate_tokens",
    "fingerprint",
    "min_cacheable_tokens",
    "output_tool_name",
    "pending_tool_uses",
    "reasoning_effort",
    "remove_stop_sequence",
    "session_from_anthropic_request",
    "session_from_json",
    "session_from_openai_request",
    "session_to_json",
    "set_max_tokens",
    "set_mode",
    "set_thinking",
    "set_thinking_budget",
    "to_openai_messages",
    "with_overrides",
]
