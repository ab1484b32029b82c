"""Monitors of the caller's workspace (runs.actions.monitors): list and read them with their
state history (any member, ``read`` tokens), create, change and delete them (owners, ``manage``
tokens: ``Action.MANAGE_WEBHOOKS``, as the hooks they notify). Another workspace's monitor
answers 404 like a missing one."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import Query, Router, Schema
from ninja.responses import Status
from pydantic import Field

from runs.actions.monitors import UNITS, do_create_monitor, do_delete_monitor, do_update_monitor
from runs.actions.permissions import Action
from runs.api.errors import ApiError
from runs.api.paging import NEXT_DOC, PageQuery, oldest
from runs.api.responses import require
from runs.api.schemas import ErrorOut
from runs.models import Monitor, MonitorChange, MonitorMetric
from runs.protocol.canonical import parse_json
from runs.protocol.errors import ErrorCode
from runs.selectors.monitors import get_monitor, history_of, monitors_of

router = Router(tags=["monitors"])

ERRORS = {400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 413: ErrorOut, 429: ErrorOut}
METRICS = ", ".join(MonitorMetric.values)


class MonitorIn(Schema):
    """A monitor's fields (a PATCH sends any of them)."""

    name: str | None = Field(default=None, max_length=100)
    metric: str | None = Field(default=None, description=f"One of {METRICS}.")
    workflow: str | None = Field(default=None, description="Only this workflow's runs (any metric).")
    model: str | None = Field(default=None, description="cost_hour, cost_day, latency_p95 (model latency).")
    prompt: str | None = Field(default=None, description='cost_hour, cost_day: a prompt version "name@N".')
    gate: str | None = Field(
        default=None, description="gates_waiting, decision_p95, rejection_rate: a step id."
    )
    minutes: int | None = Field(default=None, description="gates_waiting: waiting longer than this (30).")
    windowDays: int | None = Field(default=None, description="Run days read, today included (1).")
    currency: str | None = Field(default=None, description="cost_hour, cost_day: the currency summed (USD).")
    warning: float | None = Field(default=None, description="The warning line (optional, at most alert).")
    alert: float | None = Field(default=None, description="The alert line (required to create).")
    margin: float | None = Field(
        default=None, description="Hysteresis: a line is left below line x (1 - margin) (0.1)."
    )
    emailOwners: bool | None = Field(default=None, description="Also e-mail the workspace's owners.")
    enabled: bool | None = None


class ChangeOut(Schema):
    at: str
    fromState: str
    toState: str
    value: float | None
    rangeFrom: str
    rangeTo: str
    deliveries: int


class MonitorOut(Schema):
    id: str
    name: str
    metric: str
    unit: str
    workflow: str
    model: str
    prompt: str
    gate: str
    minutes: int
    windowDays: int
    currency: str
    warning: float | None
    alert: float
    margin: float
    emailOwners: bool
    enabled: bool
    state: str = Field(description="ok, warning or alert.")
    value: float | None = Field(description="The last value measured (null: nothing to measure yet).")
    evaluatedAt: str | None
    changedAt: str | None
    createdAt: str
    history: list[ChangeOut] = Field(description="The last state changes, newest first.")


def _change_json(change: MonitorChange) -> dict[str, Any]:
    return {
        "at": change.at.isoformat(),
        "fromState": change.from_state,
        "toState": change.to_state,
        "value": change.value,
        "rangeFrom": change.range_from.isoformat(),
        "rangeTo": change.range_to.isoformat(),
        "deliveries": change.deliveries,
    }


def monitor_json(monitor: Monitor, history: list[MonitorChange]) -> dict[str, Any]:
    unit = UNITS[MonitorMetric(monitor.metric)]
    return {
        "id": monitor.public_id,
        "name": monitor.name,
        "metric": monitor.metric,
        "unit": monitor.currency if unit == "currency" else unit,
        "workflow": monitor.workflow_id,
        "model": monitor.model,
        "prompt": monitor.prompt,
        "gate": monitor.gate,
        "minutes": monitor.minutes,
        "windowDays": monitor.window_days,
        "currency": monitor.currency,
        "warning": monitor.warning,
        "alert": monitor.alert,
        "margin": monitor.margin,
        "emailOwners": monitor.email_owners,
        "enabled": monitor.enabled,
        "state": monitor.state,
        "value": monitor.value,
        "evaluatedAt": monitor.evaluated_at.isoformat() if monitor.evaluated_at else None,
        "changedAt": monitor.changed_at.isoformat() if monitor.changed_at else None,
        "createdAt": monitor.created_at.isoformat(),
        "history": [_change_json(c) for c in history],
    }


def _one(monitor: Monitor) -> dict[str, Any]:
    return monitor_json(monitor, history_of([monitor])[monitor.pk])


def _body(request: HttpRequest) -> dict:
    data = parse_json(request.body) if request.body else None
    if not isinstance(data, dict):
        raise ApiError(ErrorCode.INVALID_INPUT, "the body must be a JSON object (name, metric, alert, ...)")
    return data


BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/MonitorIn"}}},
    }
}


@router.get(
    "",
    response={200: list[MonitorOut], **ERRORS},
    summary="List the workspace's monitors, oldest first",
    description=NEXT_DOC,
)
def list_monitors(request: HttpRequest, response: HttpResponse, page: Query[PageQuery]):
    caller = require(request, Action.VIEW_RUN)
    monitors = oldest(request, response, monitors_of(caller.workspace), page)
    history = history_of(monitors)
    return [monitor_json(m, history[m.pk]) for m in monitors]


@router.post("", response={201: MonitorOut, **ERRORS}, summary="Create a monitor", openapi_extra=BODY)
def create_monitor(request: HttpRequest):
    caller = require(request, Action.MANAGE_WEBHOOKS)
    monitor = do_create_monitor(workspace=caller.workspace, data=_body(request), actor=caller.actor)
    return Status(201, _one(monitor))


@router.get("/{monitor_id}", response={200: MonitorOut, **ERRORS}, summary="A monitor and its state history")
def get_monitor_view(request: HttpRequest, monitor_id: str):
    caller = require(request, Action.VIEW_RUN)
    return _one(get_monitor(caller.workspace, monitor_id))


@router.patch(
    "/{monitor_id}",
    response={200: MonitorOut, **ERRORS},
    summary="Change a monitor (what it reads or its lines changed: its state starts over at ok)",
    openapi_extra=BODY,
)
def update_monitor(request: HttpRequest, monitor_id: str):
    caller = require(request, Action.MANAGE_WEBHOOKS)
    data = {k: v for k, v in _body(request).items()}
    return _one(do_update_monitor(workspace=caller.workspace, monitor_id=monitor_id, data=data))


@router.delete("/{monitor_id}", response={204: None, **ERRORS}, summary="Delete a monitor and its history")
def delete_monitor(request: HttpRequest, monitor_id: str):
    caller = require(request, Action.MANAGE_WEBHOOKS)
    do_delete_monitor(workspace=caller.workspace, monitor_id=monitor_id)
    return HttpResponse(status=204)
