"""What the playground page shows of an execution: view data built from its stored fields.

The views and the websocket consumer (``playground.consumers``) both send an execution's state
and render its assistant message with these, so neither imports the other. Nothing here writes,
parses a request or renders a template; ``Execution`` is imported for its type only.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from playground import compose as c
from playground import highlight
from runs.presenters import numbers
from runs.protocol.values import loads

if TYPE_CHECKING:
    from playground.models import Execution


def execution_state(ex: Execution) -> dict:
    """What the page needs about an execution (also sent over the websocket)."""
    return {
        "id": str(ex.pk),
        "status": ex.status,
        "run_id": ex.run_id or None,
        "model": ex.model_name,
        "provider": ex.provider_kind,
        "label": ex.label,
        "partial_text": ex.partial_text,
        "partial_thinking": ex.partial_thinking,
        "error": {"code": ex.error_code, "message": ex.error_message, "status": ex.error_status}
        if ex.error_code
        else None,
        "content": loads(ex.content) if ex.content else None,
        "user_content": ex.user_content_json,
        "usage": ex.usage or None,
        "cost": None if ex.cost is None else str(ex.cost),
        "currency": ex.currency,
        "structured_output": ex.structured_output,
        "duration_ms": ex.duration_ms,
        "cache_keys": ex.cache_keys,
        "flags": ex.flags,
        "conversation_id": ex.conversation_id or None,
    }


def state_with_context(ex: Execution) -> dict:
    state = execution_state(ex)
    usage = ex.usage or {}
    window = ex.model.context_window if ex.model else None
    state["context"] = (
        c.context_window_use(usage.get("input_tokens", 0), usage.get("output_tokens", 0), window)
        if usage
        else None
    )
    return state


def message_context(ex: Execution) -> dict:
    structured = ex.structured_output
    raw_structured = None
    if ex.structured_error:
        raw_structured = json.loads(ex.structured_error).get("raw")
    usage = ex.usage or {}
    return {
        "ex": ex,
        "can_retry": ex.status in ("failed", "cancelled", "incomplete") and ex.model_id is not None,
        "can_adopt": ex.status == "incomplete" and bool(ex.response_text),
        "usage_unknown": not ex.usage and ex.status in ("completed", "incomplete", "cancelled"),
        "tool_calls": [
            {**call, "input_html": highlight.json_html(call.get("input"))} for call in ex.tool_calls or []
        ],
        "usage": usage,
        "structured": structured,
        "structured_html": highlight.json_html(structured if structured is not None else raw_structured),
        "structured_xml": highlight.xml_html(structured, root=ex.operation_type)
        if structured is not None
        else "",
        "op": ex.operation_type,
        "rating_percent": _rating_percent(structured)
        if ex.operation_type == "rating" and structured
        else None,
        "confidence_percent": _percent((structured or {}).get("confidence")) if structured else None,
        "alternatives": [
            {**alt, "percent": _percent(alt.get("confidence"))}
            for alt in (structured or {}).get("alternative_categories", [])
        ]
        if ex.operation_type == "classification" and structured
        else [],
        "extracted": sorted(((structured or {}).get("extracted_data") or {}).items())
        if ex.operation_type == "extraction"
        else [],
        "cost_text": "unknown"
        if ex.cost is None
        else f"{ex.currency} {numbers.money(ex.cost, ex.currency or 'USD')}",
    }


def _percent(value: Any) -> int | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return max(0, min(100, round(value * 100)))
    return None


def _rating_percent(data: dict) -> int | None:
    score, top = data.get("score"), data.get("max_score") or 10
    if isinstance(score, int | float) and isinstance(top, int | float) and top > 0:
        return max(0, min(100, round(100 * score / top)))
    return None


def response_text(payload: Any) -> str:
    if not isinstance(payload, dict):
        return ""
    if isinstance(payload.get("content"), list):
        return "".join(
            b.get("text", "") for b in payload["content"] if isinstance(b, dict) and b.get("type") == "text"
        )
    choices = payload.get("choices")
    if isinstance(choices, list) and choices:
        message = choices[0].get("message") or {}
        return str(message.get("content") or "")
    return ""
