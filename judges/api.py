"""REST for gate judges (/api/judges/...): list and attach judges, read a judge's agreement with
people, set its policy. Reads need VIEW_RUN; attaching a judge and its policy need MANAGE_JUDGES
(owners, manage tokens). Another workspace's judge answers 404 like a missing one."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from ninja import Query, Router, Schema
from ninja.responses import Status
from pydantic import Field

from judges import actions, presenters, selectors, stats
from judges.models import MIN_ITEMS, GateJudge
from runs.actions import ActionError
from runs.actions.permissions import Action
from runs.api.errors import ApiError
from runs.api.paging import NEXT_DOC, PageQuery, oldest
from runs.api.responses import require
from runs.api.schemas import ErrorOut
from runs.protocol.canonical import parse_json
from runs.protocol.errors import ErrorCode

router = Router(tags=["gate judges"])
ERRORS = {400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut, 429: ErrorOut}


class JudgeIn(Schema):
    name: str
    kind: str = Field(description="llm (a prompt version and a model) or rule (review rules).")
    workflowId: str
    stepId: str
    gate: str = Field(description="PAUSE_BEFORE, PAUSE_AFTER or CHECKPOINT.")
    checkpoint: str = ""
    config: dict[str, Any] = Field(
        description='llm: {"provider", "model", "prompt", "promptVersion"}; rule: {"rules", "onMatch"}.'
    )
    budget: str | None = Field(
        default=None, description="USD; a judge whose budget is spent stops proposing."
    )


class PolicyIn(Schema):
    delegation: str | None = Field(default=None, description="off, approve or both.")
    minConfidence: float | None = None
    kappaFloor: float | None = Field(default=None, description="At least 0.6 (default 0.8).")
    auditPercent: float | None = None
    windowDays: int | None = None
    onlinePercent: float | None = Field(
        default=None, description="Share (percent) of the workflow's finished runs the judge scores; 0: off."
    )
    showToReviewers: bool | None = None
    enabled: bool | None = None


class JudgeOut(Schema):
    id: str
    name: str
    version: int
    kind: str
    workflowId: str
    stepId: str
    gate: str
    checkpoint: str | None
    config: dict[str, Any]
    enabled: bool
    showToReviewers: bool
    budget: str | None
    spent: str
    policy: dict[str, Any]
    agreement: dict[str, Any] | None = None


def judge_json(judge: GateJudge, *, agreement: bool = False) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "id": judge.judge_id,
        "name": judge.name,
        "version": judge.version,
        "kind": judge.kind,
        "workflowId": judge.workflow_id,
        "stepId": judge.step_id,
        "gate": judge.gate,
        "checkpoint": judge.checkpoint or None,
        "config": judge.config,
        "enabled": judge.enabled,
        "showToReviewers": judge.show_to_reviewers,
        "budget": None if judge.budget is None else str(judge.budget),
        "spent": str(judge.spent),
        "policy": {
            "delegation": judge.delegation,
            "minConfidence": judge.min_confidence,
            "kappaFloor": judge.kappa_floor,
            "auditPercent": judge.audit_percent,
            "windowDays": judge.window_days,
            "onlinePercent": judge.online_percent,
            "minItems": MIN_ITEMS,
            "suspendedAt": judge.suspended_at.isoformat() if judge.suspended_at else None,
            "suspendedReason": judge.suspended_reason or None,
        },
    }
    if agreement:
        now = timezone.now()
        found = selectors.agreement_of(judge, now=now)
        earned, why = stats.meets(found, floor=judge.kappa_floor, min_items=MIN_ITEMS)
        doc["agreement"] = {
            **presenters.agreement_doc(found),
            "delegationEarned": earned,
            "why": why,
            "series": [
                {"day": day.isoformat(), "kappa": kappa}
                for day, kappa in selectors.kappa_series(judge, now=now).items()
            ],
        }
    return doc


def _body(request: HttpRequest) -> dict[str, Any]:
    data = parse_json(request.body) if request.body else None
    if not isinstance(data, dict):
        raise ApiError(ErrorCode.INVALID_INPUT, "the body must be a JSON object")
    return data


def _judge(caller: Any, judge_id: str) -> GateJudge:
    try:
        return selectors.get_judge(caller.workspace, judge_id)
    except selectors.JudgeNotFound:
        raise ApiError("UNKNOWN_JUDGE", "no such judge", 404) from None


def _schema(name: str) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}},
        }
    }


@router.get(
    "",
    response={200: list[JudgeOut], **ERRORS},
    summary="List gate judges, oldest first",
    description=NEXT_DOC,
)
def list_judges(request: HttpRequest, response: HttpResponse, page: Query[PageQuery]):
    caller = require(request, Action.VIEW_RUN)
    return [judge_json(j) for j in oldest(request, response, selectors.judges_of(caller.workspace), page)]


@router.post(
    "",
    response={201: JudgeOut, **ERRORS},
    summary="Attach a judge to a gate",
    openapi_extra=_schema("JudgeIn"),
)
def create_judge(request: HttpRequest):
    caller = require(request, Action.MANAGE_JUDGES)
    data = _body(request)
    judge = actions.do_create_judge(
        workspace=caller.workspace,
        name=data.get("name"),
        kind=data.get("kind"),
        workflow_id=data.get("workflowId"),
        step_id=data.get("stepId"),
        gate=data.get("gate"),
        checkpoint=data.get("checkpoint") or "",
        config=data.get("config"),
        budget=data.get("budget"),
        actor=caller.actor,
    )
    return Status(201, judge_json(judge))


@router.get(
    "/{judge_id}", response={200: JudgeOut, **ERRORS}, summary="A judge and its agreement with people"
)
def get_judge(request: HttpRequest, judge_id: str):
    caller = require(request, Action.VIEW_RUN)
    return judge_json(_judge(caller, judge_id), agreement=True)


@router.put(
    "/{judge_id}/policy",
    response={200: JudgeOut, **ERRORS},
    summary="Set a judge's policy",
    openapi_extra=_schema("PolicyIn"),
)
def set_judge_policy(request: HttpRequest, judge_id: str):
    caller = require(request, Action.MANAGE_JUDGES)
    judge = _judge(caller, judge_id)
    data = _body(request)
    unknown = set(data) - set(PolicyIn.model_fields) - {"budget"}
    if unknown:
        raise ApiError(ErrorCode.INVALID_INPUT, f"unknown field(s): {', '.join(sorted(unknown))}")
    try:
        judge = actions.do_set_policy(
            judge,
            delegation=data.get("delegation"),
            min_confidence=data.get("minConfidence"),
            kappa_floor=data.get("kappaFloor"),
            audit_percent=data.get("auditPercent"),
            window_days=data.get("windowDays"),
            online_percent=data.get("onlinePercent"),
            show_to_reviewers=data.get("showToReviewers"),
            enabled=data.get("enabled"),
            **({"budget": data["budget"]} if "budget" in data else {}),
        )
    except ActionError as exc:
        if exc.code in (actions.NOT_EARNED, actions.NOT_CALIBRATED):
            raise ApiError(exc.code, exc.message, 409) from None
        raise
    return judge_json(judge, agreement=True)
