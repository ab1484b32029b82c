"""Timeline rows from trace events, and state diffs. Pure: plain dicts in, plain data out.

    rows = build_rows(events)        # events: [EventRecord], one page in seq order
    changes = diff_values(before, after)

- ``summarize(event)`` is the one-line text of an event (type specific).
- Stream chunks (``model_io`` with ``direction == "stream_chunk"``) of one correlation id on a page
  collapse into one row placed where the first chunk is; its text is the chunks' text joined.
- ``diff_values`` lists what changed between two JSON values as (path, kind, before, after).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from runs.presenters import numbers
from runs.presenters.review_text import review_words

SUMMARY_LIMIT = 240
STREAM_TEXT_LIMIT = 4000
MAX_CHUNKS_LISTED = 20
MAX_DIFF_CHANGES = 500


@dataclass
class EventRecord:
    """One stored event: its columns plus the parsed protocol body."""

    seq: int
    type: str
    ts: str
    step_id: str
    correlation_id: str
    actor: str
    body: dict[str, Any]


@dataclass
class Row:
    seq: int
    type: str
    ts: str
    step_id: str
    correlation_id: str
    actor: str
    summary: str
    body: dict[str, Any]
    kind: str = "event"  # "event" | "stream"
    chunks: list[EventRecord] = field(default_factory=list)
    chunk_count: int = 0
    last_seq: int = 0
    stream_text: str = ""
    links: dict[str, str] = field(default_factory=dict)  # filled by the view (permalink, state, step, corr)
    open: bool = False  # shown opened (its detail rendered in the page, not loaded on demand)

    @property
    def is_stream(self) -> bool:
        return self.kind == "stream"

    @property
    def chunks_shown(self) -> list[EventRecord]:
        return self.chunks[:MAX_CHUNKS_LISTED]

    @property
    def chunks_hidden(self) -> int:
        return max(0, len(self.chunks) - MAX_CHUNKS_LISTED)


def _clip(text: str, limit: int = SUMMARY_LIMIT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _tokens(usage: Any) -> str:
    if not isinstance(usage, dict):
        return ""
    parts = []
    if "inputTokens" in usage:
        parts.append(f"in {usage['inputTokens']}")
    if "outputTokens" in usage:
        parts.append(f"out {usage['outputTokens']}")
    if "totalTokens" in usage and not parts:
        parts.append(f"total {usage['totalTokens']}")
    return " / ".join(parts) + " tok" if parts else ""


def _cost(cost: Any) -> str:
    """``0.30000000000000004 USD`` (a float a host summed) as ``0.30 USD``: the one money rule."""
    if isinstance(cost, dict) and "amount" in cost:
        currency = str(cost.get("currency", "")).strip().upper()
        return f"{numbers.money(cost.get('amount'), currency or 'USD')} {currency}"
    return ""


def chunk_text(event: dict[str, Any]) -> str:
    """Text a stream chunk carries: a string payload, or payload.text / .delta / .content when a string."""
    payload = event.get("payload")
    if isinstance(payload, str):
        return payload
    if isinstance(payload, dict):
        for key in ("text", "delta", "content", "textDelta"):
            value = payload.get(key)
            if isinstance(value, str):
                return value
    summary = event.get("summary")
    return summary if isinstance(summary, str) else ""


def summarize(event: dict[str, Any]) -> str:
    """One line saying what the event is about (plain text; the template escapes it)."""
    t = event.get("type")
    summary = _SUMMARIES.get(t) if isinstance(t, str) else None
    if summary is None:
        return _clip(str(t))
    return summary(event, event.get("stepId"))


# One summary per event type: (event, its stepId) -> the line.


def _step_started(event: dict[str, Any], step: Any) -> str:
    return f"step {step} started"


def _step_completed(event: dict[str, Any], step: Any) -> str:
    ok = event.get("ok")
    err = event.get("error") if isinstance(event.get("error"), dict) else None
    text = f"step {step} completed" if ok else f"step {step} failed"
    if err and err.get("message"):
        text += f": {err.get('message')}"
    return _clip(text)


def _artifact_written(event: dict[str, Any], step: Any) -> str:
    art = found if isinstance(found := event.get("artifact"), dict) else {}
    return _clip(f"artifact {art.get('artifactKey')} v{art.get('version')} ({art.get('typeId')})")


def _artifact_patch(event: dict[str, Any], step: Any) -> str:
    patch = found if isinstance(found := event.get("patch"), list) else []
    return _clip(
        f"artifact {event.get('artifactKey')} v{event.get('fromVersion')} → v{event.get('toVersion')}"
        f" ({len(patch)} op{'s' if len(patch) != 1 else ''})"
    )


def _model_io(event: dict[str, Any], step: Any) -> str:
    bits = [
        str(event.get("direction", "")),
        "/".join(str(x) for x in (event.get("provider"), event.get("model")) if x),
    ]
    for extra in (_tokens(event.get("usage")), _cost(event.get("cost"))):
        if extra:
            bits.append(extra)
    if isinstance(event.get("durationMs"), int | float):
        bits.append(f"{event['durationMs']} ms")
    if isinstance(event.get("summary"), str) and event["summary"]:
        bits.append(f"“{event['summary']}”")
    return _clip(" · ".join(b for b in bits if b))


def _tool_call(event: dict[str, Any], step: Any) -> str:
    return _clip(f"tool {event.get('name')}")


def _gate_requested(event: dict[str, Any], step: Any) -> str:
    reason = event.get("reason")
    return _clip(f"{event.get('gate')} gate requested on {step}" + (f": {reason}" if reason else ""))


def _gate_resolved(event: dict[str, Any], step: Any) -> str:
    note = event.get("note")
    return _clip(
        f"{event.get('gate')} gate on {step} {event.get('decision')}" + (f": {note}" if note else "")
    )


def _rule_changed(event: dict[str, Any], step: Any) -> str:
    snap = found if isinstance(found := event.get("snapshot"), dict) else {}
    rules = listed if isinstance(listed := snap.get("rules"), list) else []
    return _clip(f"rule set {event.get('ruleSetId')} changed ({len(rules)} rules)")


def _policy_changed(event: dict[str, Any], step: Any) -> str:
    return _clip(f"gate policy of {step} → {event.get('policy')}")


def _error(event: dict[str, Any], step: Any) -> str:
    fatal = " (fatal)" if event.get("fatal") else ""
    code = f"[{event.get('code')}] " if event.get("code") else ""
    return _clip(f"error{fatal}: {code}{event.get('message')}")


def _run_forked(event: dict[str, Any], step: Any) -> str:
    return _clip(f"forked from {event.get('parentRunId')}")


def _annotation(event: dict[str, Any], step: Any) -> str:
    text = event.get("text")
    return _clip(f"note: {review_words(text) or text}")


def _run_status_changed(event: dict[str, Any], step: Any) -> str:
    reason = event.get("reason")
    return _clip(f"run {event.get('status')}" + (f": {reason}" if reason else ""))


def _span_started(event: dict[str, Any], step: Any) -> str:
    return _clip(f"span {event.get('name')} started ({event.get('spanId')})")


def _span_ended(event: dict[str, Any], step: Any) -> str:
    status = event.get("status")
    return _clip(f"span {event.get('spanId')} ended" + (f" ({status})" if status else ""))


_SUMMARIES: dict[str, Callable[[dict[str, Any], Any], str]] = {
    "step_started": _step_started,
    "step_completed": _step_completed,
    "artifact_written": _artifact_written,
    "artifact_patch": _artifact_patch,
    "model_io": _model_io,
    "tool_call": _tool_call,
    "human_gate_requested": _gate_requested,
    "human_gate_resolved": _gate_resolved,
    "rule_changed": _rule_changed,
    "policy_changed": _policy_changed,
    "error": _error,
    "run_forked": _run_forked,
    "annotation": _annotation,
    "run_status_changed": _run_status_changed,
    "span_started": _span_started,
    "span_ended": _span_ended,
}


def is_stream_chunk(record: EventRecord) -> bool:
    return (
        record.type == "model_io"
        and record.body.get("direction") == "stream_chunk"
        and bool(record.correlation_id)
    )


def build_rows(records: list[EventRecord], *, collapse_streams: bool = True) -> list[Row]:
    """Rows for one page of events (in seq order), stream chunks of a correlation id collapsed."""
    rows: list[Row] = []
    streams: dict[str, Row] = {}
    for rec in records:
        if collapse_streams and is_stream_chunk(rec):
            row = streams.get(rec.correlation_id)
            if row is None:
                row = Row(
                    seq=rec.seq,
                    type=rec.type,
                    ts=rec.ts,
                    step_id=rec.step_id,
                    correlation_id=rec.correlation_id,
                    actor=rec.actor,
                    summary="",
                    body=rec.body,
                    kind="stream",
                )
                streams[rec.correlation_id] = row
                rows.append(row)
            row.chunks.append(rec)
            row.chunk_count += 1
            row.last_seq = rec.seq
            if len(row.stream_text) < STREAM_TEXT_LIMIT:
                row.stream_text = (row.stream_text + chunk_text(rec.body))[:STREAM_TEXT_LIMIT]
            continue
        rows.append(
            Row(
                seq=rec.seq,
                type=rec.type,
                ts=rec.ts,
                step_id=rec.step_id,
                correlation_id=rec.correlation_id,
                actor=rec.actor,
                summary=summarize(rec.body),
                body=rec.body,
                last_seq=rec.seq,
            )
        )
    for row in streams.values():
        provider = "/".join(str(x) for x in (row.body.get("provider"), row.body.get("model")) if x)
        n = row.chunk_count
        span = f"#{row.seq}–#{row.last_seq}" if n > 1 else f"#{row.seq}"
        row.summary = _clip(
            f"stream {provider + ' ' if provider else ''}· {n} chunk{'s' if n != 1 else ''} ({span})"
        )
    return rows


# --- state diff -------------------------------------------------------------------------


@dataclass
class Change:
    path: str
    kind: str  # "added" | "removed" | "changed"
    before: Any = None
    after: Any = None


def _escape_pointer(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def diff_values(before: Any, after: Any, *, path: str = "", limit: int = MAX_DIFF_CHANGES) -> list[Change]:
    """What changed from ``before`` to ``after``, as JSON Pointer paths (objects by key, lists by index)."""
    out: list[Change] = []
    _diff(before, after, path, out, limit)
    return out


def _diff(a: Any, b: Any, path: str, out: list[Change], limit: int) -> None:
    if len(out) >= limit:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for key in a:
            sub = f"{path}/{_escape_pointer(str(key))}"
            if key not in b:
                out.append(Change(sub, "removed", before=a[key]))
            else:
                _diff(a[key], b[key], sub, out, limit)
            if len(out) >= limit:
                return
        for key in b:
            if key not in a:
                out.append(Change(f"{path}/{_escape_pointer(str(key))}", "added", after=b[key]))
                if len(out) >= limit:
                    return
        return
    if isinstance(a, list) and isinstance(b, list):
        common = min(len(a), len(b))
        for i in range(common):
            _diff(a[i], b[i], f"{path}/{i}", out, limit)
            if len(out) >= limit:
                return
        for i in range(common, len(a)):
            out.append(Change(f"{path}/{i}", "removed", before=a[i]))
        for i in range(common, len(b)):
            out.append(Change(f"{path}/{i}", "added", after=b[i]))
        return
    if type(a) is not type(b) or a != b:
        out.append(Change(path or "/", "changed", before=a, after=b))


def changed_top_keys(changes: list[Change]) -> list[str]:
    """First path segments touched by ``changes``, in order (for a side-by-side view of just those)."""
    keys: list[str] = []
    for ch in changes:
        top = ch.path.split("/")[1] if ch.path.count("/") >= 1 and ch.path != "/" else ""
        top = top.replace("~1", "/").replace("~0", "~")
        if top not in keys:
            keys.append(top)
    return keys
