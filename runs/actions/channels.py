"""Where each gate decision came from: a :class:`runs.models.GateChannel` row beside every
``human_gate_resolved`` event, ``metadata == {"workbench.channel": <channel>}`` ("page", "api",
"slack", "email", "mcp", "judge"). The protocol event stays as the protocol says; signed bundles
name the channel in their approvals (runs.selectors.signing)."""

from __future__ import annotations

from collections.abc import Sequence

from runs.models import GateChannel, Run

CHANNEL_KEY = "workbench.channel"
GATE_RESOLVED = "human_gate_resolved"


def record_channels(run: Run, events: Sequence[dict], first_seq: int, channel: str) -> int:
    """In the append's transaction: one row per gate decision among ``events`` (``first_seq`` is
    the seq of the first of them)."""
    rows = [
        GateChannel(
            run=run, seq=first_seq + i, event_id=str(event.get("id", "")), metadata={CHANNEL_KEY: channel}
        )
        for i, event in enumerate(events)
        if event.get("type") == GATE_RESOLVED
    ]
    if rows:
        GateChannel.objects.bulk_create(rows)
    return len(rows)
