"""Monitors: create, change and delete them (owners), and evaluate them on a schedule.

``evaluate_monitors`` is a periodic job (runs.background.periodic, registered in runs.apps): every
enabled monitor of every workspace reads its value from the rollups (runs.selectors.monitors),
moves its state with hysteresis (:func:`next_state`) and, when the state changed, records the
change and writes one ``monitor.state_changed`` message per destination to the outbox (enabled
hooks that chose the event, Slack hooks included; the owners by e-mail when the monitor says so),
in the same transaction. A workspace without monitors costs one query and sends nothing.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from runs.actions.core import ActionError
from runs.actions.notify import schedule_deliveries
from runs.actions.outbox import MONITOR_STATE_CHANGED, envelope, listeners, new_message_id, site_url
from runs.models import (
    Delivery,
    DeliveryChannel,
    Membership,
    Monitor,
    MonitorChange,
    MonitorMetric,
    MonitorSample,
    MonitorState,
    Role,
    Workspace,
)
from runs.protocol.errors import ErrorCode
from runs.selectors.monitors import MEASURES, Reading, cost_last_hour, get_monitor

MAX_MONITORS_PER_WORKSPACE = 100
SAMPLES_KEPT = timedelta(hours=3)  # cost-per-hour samples older than this are deleted
RANK = {MonitorState.OK: 0, MonitorState.WARNING: 1, MonitorState.ALERT: 2}

# which filters each metric reads (any other one is refused, not ignored)
FILTERS: dict[str, frozenset[str]] = {
    MonitorMetric.COST_HOUR: frozenset({"workflow", "model", "prompt", "currency"}),
    MonitorMetric.COST_DAY: frozenset({"workflow", "model", "prompt", "currency"}),
    MonitorMetric.LATENCY_P95: frozenset({"workflow", "model", "windowDays"}),
    MonitorMetric.ERROR_RATE: frozenset({"workflow", "windowDays"}),
    MonitorMetric.GATES_WAITING: frozenset({"workflow", "gate", "minutes"}),
    MonitorMetric.DECISION_P95: frozenset({"workflow", "gate", "windowDays"}),
    MonitorMetric.REJECTION_RATE: frozenset({"workflow", "gate", "windowDays"}),
}
UNITS = {
    MonitorMetric.COST_HOUR: "currency",
    MonitorMetric.COST_DAY: "currency",
    MonitorMetric.LATENCY_P95: "s",
    MonitorMetric.ERROR_RATE: "%",
    MonitorMetric.GATES_WAITING: "gates",
    MonitorMetric.DECISION_P95: "s",
    MonitorMetric.REJECTION_RATE: "%",
}
# the fields a monitor is made of, as the REST API and the page name them -> model attribute
FIELDS = {
    "name": "name",
    "metric": "metric",
    "workflow": "workflow_id",
    "model": "model",
    "prompt": "prompt",
    "gate": "gate",
    "minutes": "minutes",
    "windowDays": "window_days",
    "currency": "currency",
    "warning": "warning",
    "alert": "alert",
    "margin": "margin",
    "emailOwners": "email_owners",
    "enabled": "enabled",
}
FILTER_FIELDS = frozenset({"workflow", "model", "prompt", "gate", "minutes", "windowDays", "currency"})


def interval() -> float:
    """Seconds between two evaluations (``WORKBENCH_MONITOR_INTERVAL``, default 60)."""
    return float(getattr(settings, "WORKBENCH_MONITOR_INTERVAL", 60))


def next_state(
    current: str, value: float | None, *, warning: float | None, alert: float, margin: float
) -> str:
    """The state after a reading, with hysteresis: a line is crossed at its value and left only
    below ``line * (1 - margin)``, so a value hovering at the line does not flap. No value: no
    change."""
    if value is None:
        return current
    rank = RANK.get(MonitorState(current), 0) if current in RANK else 0

    def holds(line: float, level: str) -> bool:
        return value >= line or (rank >= RANK[MonitorState(level)] and value >= line * (1 - margin))

    if holds(alert, MonitorState.ALERT):
        return MonitorState.ALERT
    if warning is not None and holds(warning, MonitorState.WARNING):
        return MonitorState.WARNING
    return MonitorState.OK


# ------------------------------------------------------------------------------------------
# create, change, delete


def _bad(message: str, path: str) -> ActionError:
    return ActionError(ErrorCode.INVALID_INPUT, message, path)


def _text(data: Mapping[str, Any], key: str, limit: int) -> str:
    value = data.get(key)
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > limit:
        raise _bad(f"{key} must be text of at most {limit} characters", key)
    return value.strip()


def _number(data: Mapping[str, Any], key: str, *, optional: bool = False) -> float | None:
    value = data.get(key)
    if value is None or value == "":
        if optional:
            return None
        raise _bad(f"{key} is required: a number", key)
    if isinstance(value, bool):
        raise _bad(f"{key} must be a number", key)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise _bad(f"{key} must be a number", key) from None
    if not math.isfinite(number) or number < 0 or number > 1e15:
        raise _bad(f"{key} must be a number from 0 to 1e15", key)
    return number


def _integer(data: Mapping[str, Any], key: str, low: int, high: int) -> int:
    value = data.get(key)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _bad(f"{key} must be a whole number from {low} to {high}", key)
    return value


def _boolean(data: Mapping[str, Any], key: str) -> bool:
    value = data.get(key)
    if not isinstance(value, bool):
        raise _bad(f"{key} must be true or false", key)
    return value


def _merged(data: Mapping[str, Any], current: Monitor | None) -> dict[str, Any]:
    """``data`` over ``current``'s fields (REST names); a changed metric drops the filters it
    does not name again (they fall back to their defaults)."""
    merged: dict[str, Any] = {}
    if current is not None:
        merged = {key: getattr(current, attr) for key, attr in FIELDS.items()}
        if "metric" in data and data["metric"] != current.metric:
            for key in FILTER_FIELDS - set(data):
                merged.pop(key, None)
    merged.update(data)
    return merged


def _refuse_unread_filters(data: Mapping[str, Any], metric: str, current: Monitor | None) -> frozenset[str]:
    allowed = FILTERS[metric]
    given = {
        key
        for key in FILTER_FIELDS
        if data.get(key) not in (None, "") and not (current and data[key] == getattr(current, FIELDS[key]))
    }
    refused = sorted(given - allowed)
    if refused:
        raise _bad(
            f"{metric} does not read {', '.join(refused)} (it reads {', '.join(sorted(allowed))})", refused[0]
        )
    return allowed


def _optional(merged: Mapping[str, Any], key: str, read, default):
    return default if merged.get(key) is None else read(merged, key)


def check_monitor(data: Mapping[str, Any], current: Monitor | None = None) -> dict[str, Any]:
    """The model fields of a monitor made of ``data`` (REST names; over ``current`` when given).
    Raises ActionError INVALID_INPUT naming the field; nothing is changed then."""
    if not isinstance(data, Mapping):
        raise _bad("the body must be a JSON object", "")
    unknown = sorted(set(data) - set(FIELDS))
    if unknown:
        raise _bad(f"unknown field(s): {', '.join(map(str, unknown))}", "")
    merged = _merged(data, current)
    metric = merged.get("metric")
    if metric not in MonitorMetric.values:
        raise _bad(f"metric must be one of {', '.join(MonitorMetric.values)}", "metric")
    allowed = _refuse_unread_filters(data, metric, current)
    name = _text(merged, "name", 100)
    if not name:
        raise _bad("name is required", "name")
    fields: dict[str, Any] = {
        "name": name,
        "metric": metric,
        "workflow_id": _text(merged, "workflow", 200),
        **{attr: _text(merged, attr, 200) if attr in allowed else "" for attr in ("model", "prompt", "gate")},
        "minutes": _optional(merged, "minutes", lambda m, k: _integer(m, k, 0, 10_080), 30),
        "window_days": _optional(merged, "windowDays", lambda m, k: _integer(m, k, 1, 366), 1),
        "currency": (_text(merged, "currency", 8) or "USD").upper(),
        "alert": _number(merged, "alert"),
        "warning": _number(merged, "warning", optional=True),
        "margin": _optional(merged, "margin", _number, 0.1),
        "email_owners": _optional(merged, "emailOwners", _boolean, False),
        "enabled": _optional(merged, "enabled", _boolean, True),
    }
    if fields["margin"] >= 1:
        raise _bad("margin must be a fraction from 0 to under 1 (0.1: leave a line 10% below it)", "margin")
    if fields["warning"] is not None and fields["warning"] > fields["alert"]:
        raise _bad("warning must not be above alert", "warning")
    return fields


def _monitor_id() -> str:
    return "mon_" + secrets.token_hex(10)


def do_create_monitor(*, workspace: Workspace, data: Mapping[str, Any], actor: str = "") -> Monitor:
    fields = check_monitor(data)
    with transaction.atomic():
        if Monitor.objects.filter(workspace=workspace).count() >= MAX_MONITORS_PER_WORKSPACE:
            raise _bad(f"a workspace has at most {MAX_MONITORS_PER_WORKSPACE} monitors", "")
        return Monitor.objects.create(
            public_id=_monitor_id(), workspace=workspace, created_by=actor[:200], **fields
        )


def do_update_monitor(*, workspace: Workspace, monitor_id: object, data: Mapping[str, Any]) -> Monitor:
    with transaction.atomic():
        monitor = get_monitor(workspace, monitor_id)
        fields = check_monitor(data, monitor)
        reading_changes = any(
            getattr(monitor, k) != v
            for k, v in fields.items()
            if k not in ("name", "email_owners", "enabled")
        )
        for key, value in fields.items():
            setattr(monitor, key, value)
        if reading_changes:  # what it reads or where its lines are changed: start over
            MonitorSample.objects.filter(monitor=monitor).delete()
            monitor.state, monitor.value = MonitorState.OK, None
        monitor.save()
        return monitor


def do_delete_monitor(*, workspace: Workspace, monitor_id: object) -> None:
    get_monitor(workspace, monitor_id).delete()


# ------------------------------------------------------------------------------------------
# evaluation


def dashboard_link(monitor: Monitor, reading: Reading) -> str:
    query = {"from": reading.first.isoformat(), "to": reading.last.isoformat()}
    if monitor.workflow_id:
        query["workflow"] = monitor.workflow_id
    if monitor.model:
        query["model"] = monitor.model
    return f"{site_url()}/dashboard/?{urlencode(query)}"


def _measure(monitor: Monitor, now: datetime) -> Reading:
    if monitor.metric == MonitorMetric.COST_HOUR:
        reading, total_today = cost_last_hour(monitor, now)
        MonitorSample.objects.create(monitor=monitor, at=now, day=now.date(), total=str(total_today))
        MonitorSample.objects.filter(monitor=monitor, at__lt=now - SAMPLES_KEPT).delete()
        return reading
    return MEASURES[MonitorMetric(monitor.metric)](monitor, now)


@dataclass(frozen=True)
class Evaluated:
    monitor: str
    state: str
    value: float | None
    changed: bool
    deliveries: int


def _unit(monitor: Monitor) -> str:
    unit = UNITS[MonitorMetric(monitor.metric)]
    return monitor.currency if unit == "currency" else unit


def _message_data(monitor: Monitor, change: MonitorChange, reading: Reading, workspace: Workspace) -> dict:
    return {
        "workspace": workspace.slug,
        "monitor": {
            "id": monitor.public_id,
            "name": monitor.name,
            "metric": monitor.metric,
            "unit": _unit(monitor),
            "warning": monitor.warning,
            "alert": monitor.alert,
            "margin": monitor.margin,
            "url": f"{site_url()}/monitors/#monitor-{monitor.public_id}",
        },
        "from": change.from_state,
        "to": change.to_state,
        "value": change.value,
        "range": {"from": reading.first.isoformat(), "to": reading.last.isoformat()},
        "dashboardUrl": dashboard_link(monitor, reading),
    }


def _notify(monitor: Monitor, change: MonitorChange, reading: Reading) -> int:
    """The outbox rows of one state change (in the caller's transaction)."""
    workspace = monitor.workspace
    found = listeners(workspace.pk)
    hooks = [h for h in (found.hooks if found is not None else ()) if h.wants(MONITOR_STATE_CHANGED)]
    owners = []
    if monitor.email_owners:
        owners = [
            m.user
            for m in Membership.objects.filter(workspace=workspace, role=Role.OWNER).select_related("user")
            if m.user.email and m.user.is_active
        ]
    if not hooks and not owners:
        return 0
    now = timezone.now()
    body = envelope(MONITOR_STATE_CHANGED, _message_data(monitor, change, reading, workspace), at=now)
    common = {
        "workspace": workspace,
        "event_type": MONITOR_STATE_CHANGED,
        "payload": body,
        "next_attempt_at": now,
    }
    rows = [
        Delivery(
            public_id=new_message_id(),
            channel=DeliveryChannel.SLACK if hook.kind == "slack" else DeliveryChannel.WEBHOOK,
            webhook_id=hook.pk,
            **common,
        )
        for hook in hooks
    ]
    rows += [
        Delivery(public_id=new_message_id(), channel=DeliveryChannel.EMAIL, recipient=user, **common)
        for user in owners
    ]
    Delivery.objects.bulk_create(rows)
    schedule_deliveries()
    return len(rows)


def evaluate_monitor(monitor_pk: int, *, now: datetime | None = None) -> Evaluated | None:
    """Read one monitor's value, move its state, record and announce a change: one transaction,
    the monitor's row locked (two workers evaluating it at once announce a change once)."""
    now = now or timezone.now()
    with transaction.atomic():
        monitor = (
            Monitor.objects.select_for_update().select_related("workspace").filter(pk=monitor_pk).first()
        )
        if monitor is None or not monitor.enabled:
            return None
        reading = _measure(monitor, now)
        state = next_state(
            monitor.state, reading.value, warning=monitor.warning, alert=monitor.alert, margin=monitor.margin
        )
        changed = state != monitor.state
        sent = 0
        if changed:
            change = MonitorChange.objects.create(
                monitor=monitor,
                at=now,
                from_state=monitor.state,
                to_state=state,
                value=reading.value,
                range_from=reading.first,
                range_to=reading.last,
            )
            sent = _notify(monitor, change, reading)
            if sent:
                MonitorChange.objects.filter(pk=change.pk).update(deliveries=sent)
            monitor.state, monitor.changed_at = state, now
        monitor.value, monitor.evaluated_at = reading.value, now
        monitor.save(update_fields=["state", "changed_at", "value", "evaluated_at"])
    return Evaluated(monitor.public_id, state, reading.value, changed, sent)


def evaluate_monitors(*, now: datetime | None = None) -> list[Evaluated]:
    """Every enabled monitor, once (the periodic job ``monitors``)."""
    pks = list(Monitor.objects.filter(enabled=True).order_by("pk").values_list("pk", flat=True))
    out = []
    for pk in pks:
        done = evaluate_monitor(pk, now=now)
        if done is not None:
            out.append(done)
    return out
