"""The OTel mapping's spans rewritten to the current GenAI semantic conventions (schema 1.42).

The reference's mapping (``runs.protocol.otel``) stays the default, for parity with the
reference. With this option a ``model_io`` span instead carries:

* ``gen_ai.provider.name`` (not the retired ``gen_ai.system``) and ``gen_ai.operation.name``
  ``chat``; the span is named ``chat <model>``;
* ``gen_ai.usage.input_tokens``: the whole prompt, cache reads and writes included (the
  protocol's ``inputTokens`` is recorded that way), with ``gen_ai.usage.cache_read.input_tokens``
  from ``cachedInputTokens`` as a part of it, not an addition;
* ``gen_ai.usage.output_tokens``: all output, reasoning included (the protocol's convention),
  with ``gen_ai.usage.reasoning.output_tokens`` from ``reasoningTokens`` as a part of it.

No count is added to another, so a ledger built from either form never counts cached or
reasoning tokens twice. The protocol has no field for cache-creation tokens; they are not
invented here. Pure: no Django.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

MODEL_SPAN_PREFIX = "model-"


def to_current_conventions(
    records: list[dict[str, Any]], events: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """New span records (the input is not changed) with model spans in the 1.42 conventions."""
    model_events = {e.get("id"): e for e in events if e.get("type") == "model_io"}
    out = []
    for record in records:
        span_id = record.get("spanId", "")
        event = (
            model_events.get(span_id[len(MODEL_SPAN_PREFIX) :])
            if span_id.startswith(MODEL_SPAN_PREFIX)
            else None
        )
        if event is None:
            out.append(record)
            continue
        attributes = dict(record["attributes"])
        provider = attributes.pop("gen_ai.system", None)
        if provider is not None:
            attributes["gen_ai.provider.name"] = provider
        attributes["gen_ai.operation.name"] = "chat"
        usage = event.get("usage") or {}
        if isinstance(usage.get("cachedInputTokens"), int):
            attributes["gen_ai.usage.cache_read.input_tokens"] = usage["cachedInputTokens"]
        if isinstance(usage.get("reasoningTokens"), int):
            attributes["gen_ai.usage.reasoning.output_tokens"] = usage["reasoningTokens"]
        model = event.get("model")
        out.append({**record, "name": f"chat {model}" if model else "chat", "attributes": attributes})
    return out
