"""Where a gate decision was made: ``{"workbench.channel": ...}`` beside its event.

Every decision is the same protocol event (``human_gate_resolved``) with the same actor (the
member), whatever door it came through; the channel is kept beside the event in
:class:`runs.models_gatelinks.GateDecisionMeta`, never inside its protocol JSON (bundles stay
protocol 1.0.0 byte for byte).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from runs.models import GateDecisionMeta, Run

CHANNEL_KEY = "workbench.channel"
POLICY_KEY = "workbench.policy"  # a machine decision's delegation policy (judges), signed in approvals
CHANNELS = ("page", "api", "email", "slack", "mcp", "judge")


def record_decision_channel(run: Run, events: Sequence[dict], channel: str) -> int:
    """One metadata row per gate decision among ``events`` (in the appending transaction)."""
    rows = [
        GateDecisionMeta(run=run, event_id=event["id"], metadata={CHANNEL_KEY: channel})
        for event in events
        if event.get("type") == "human_gate_resolved"
    ]
    if rows and channel:
        GateDecisionMeta.objects.bulk_create(rows)
    return len(rows)


def decision_channels(run: Run, event_ids: Iterable[str] | None = None) -> dict[str, str]:
    """event id -> channel of the run's recorded gate decisions."""
    rows = GateDecisionMeta.objects.filter(run=run)
    if event_ids is not None:
        rows = rows.filter(event_id__in=list(event_ids))
    return {
        event_id: (meta or {}).get(CHANNEL_KEY, "")
        for event_id, meta in rows.values_list("event_id", "metadata")
    }


def record_decision_policy(run: Run, event_id: str, policy: dict) -> None:
    """Keep the delegation policy that allowed a machine decision beside its event (signed bundles
    list it in the decision's approval)."""
    meta, _created = GateDecisionMeta.objects.get_or_create(
        run=run, event_id=event_id, defaults={"metadata": {}}
    )
    meta.metadata = {**(meta.metadata or {}), POLICY_KEY: policy}
    meta.save(update_fields=["metadata"])
