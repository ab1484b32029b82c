"""The workspace's gate policies over REST: ``GET /api/gate-policies`` lists the default
(``workflowId: ""``) and every workflow's; ``PUT /api/gate-policies`` sets one (an empty
``policy`` clears it). Owners (session) or tokens with the ``manage`` scope
(``Action.MANAGE_GATE_POLICIES``). The policy's keys: runs.engine.gatepolicy."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router, Schema
from ninja.responses import Status
from pydantic import Field

from runs.actions.gatepolicy import do_set_gate_policy
from runs.actions.permissions import Action
from runs.api.errors import ApiError
from runs.api.responses import require
from runs.api.schemas import ErrorOut
from runs.models import GatePolicySetting
from runs.protocol.canonical import parse_json
from runs.protocol.errors import ErrorCode

router = Router(tags=["gate policies"])

ERRORS = {400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 429: ErrorOut}
FIELDS = frozenset({"workflowId", "policy"})


class GatePolicyOut(Schema):
    workflowId: str = Field(description='"" for the workspace default, else the workflow it applies to.')
    policy: dict[str, Any] = Field(
        description="quorum, rejections, separationOfDuties, assignees (usernames, role:owner, "
        "role:reviewer), escalation [{afterSeconds, notify}]."
    )
    updatedBy: str
    updatedAt: str


class GatePoliciesOut(Schema):
    policies: list[GatePolicyOut]


def _json(row: GatePolicySetting) -> dict[str, Any]:
    return {
        "workflowId": row.workflow_id,
        "policy": row.policy,
        "updatedBy": row.updated_by,
        "updatedAt": row.updated_at.isoformat(),
    }


@router.get("", response={200: GatePoliciesOut, **ERRORS}, summary="List the workspace's gate policies")
def list_gate_policies(request: HttpRequest):
    caller = require(request, Action.MANAGE_GATE_POLICIES)
    rows = GatePolicySetting.objects.filter(workspace=caller.workspace).order_by("workflow_id")
    return {"policies": [_json(r) for r in rows]}


@router.put(
    "",
    response={200: GatePolicyOut, 204: None, **ERRORS},
    summary="Set the default gate policy or a workflow's (an empty policy clears it)",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {
                    "schema": {
                        "type": "object",
                        "properties": {"workflowId": {"type": "string"}, "policy": {"type": "object"}},
                        "required": ["policy"],
                    }
                }
            },
        }
    },
)
def set_gate_policy(request: HttpRequest):
    caller = require(request, Action.MANAGE_GATE_POLICIES)
    data = parse_json(request.body) if request.body else None
    if not isinstance(data, dict) or "policy" not in data:
        raise ApiError(ErrorCode.INVALID_INPUT, "the body must be a JSON object with policy (and workflowId)")
    unknown = set(data) - FIELDS
    if unknown:
        raise ApiError(ErrorCode.INVALID_INPUT, f"unknown field(s): {', '.join(sorted(unknown))}")
    row = do_set_gate_policy(
        workspace=caller.workspace,
        policy=data["policy"],
        workflow_id=data.get("workflowId", ""),
        actor=caller.actor,
    )
    if row is None:
        return Status(204, None)
    return Status(200, _json(row))
