"""What the REST client and the traced wrappers both need: protocol events and recorded answers.

``client`` imports this module, ``traced`` imports this module and ``client``; nothing here
imports either of them.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from typing import Any

# The summary of a model answer replayed from the response cache (the server's
# ``runs.engine.replay.REPLAYED_SUMMARY``; a server test checks they are equal).
REPLAYED_SUMMARY = "replayed"


def now_iso() -> str:
    """The current UTC time as the protocol writes it: ``2025-01-31T12:00:00.123Z``."""
    now = datetime.now(timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def make_event(
    run_id: str, type: str, *, ts: str | None = None, event_id: str | None = None, **fields: Any
) -> dict[str, Any]:
    """A protocol trace event with a fresh id and the current time (fields as on the wire: stepId ...)."""
    event = {"id": event_id or f"evt_{uuid.uuid4()}", "runId": run_id, "ts": ts or now_iso(), "type": type}
    event.update({k: v for k, v in fields.items() if v is not None})
    return event


class RecordedAnswer(dict[str, Any]):
    """A recorded model answer: the provider's response object (``model_io.payload``), as a
    dict, with the payloads of its ``stream_chunk`` events (SDK stream events; empty when it
    came whole) in ``chunks``."""

    def __init__(self, body: dict[str, Any], chunks: list[dict[str, Any]] | None = None) -> None:
        super().__init__(body)
        self.chunks: list[dict[str, Any]] = list(chunks or [])

    @property
    def body(self) -> dict[str, Any]:
        return dict(self)


def recorded_answer(body: dict[str, Any], chunks: list[dict[str, Any]]) -> RecordedAnswer:
    """A RecordedAnswer from a cached response and its recorded ``stream_chunk`` fields."""
    return RecordedAnswer(body, [c["payload"] for c in chunks if isinstance(c.get("payload"), dict)])
