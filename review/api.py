"""REST for annotation queues (/api/review/...): create and list queues, add items, claim the next
item, submit scores, read progress. Rights from the one table (runs.actions.permissions):
MANAGE_QUEUES (owners, write or manage tokens), REVIEW_QUEUE_ITEMS (a person with the review
scope: claims and scores belong to a reviewer, so a bare API token cannot claim), VIEW_RUN for reads.
Another workspace's queue answers 404 like a missing one. Registered on the one NinjaAPI by
review.apps."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import Query, Router, Schema
from ninja.responses import Status
from pydantic import Field

from review import actions as review_actions
from review.models import Item, Queue
from review.selectors import (
    QueueNotFound,
    agreement_by_config,
    get_item,
    get_queue,
    progress,
    queues_with_counts,
)
from runs.actions.permissions import Action
from runs.api.errors import FORBIDDEN, ApiError
from runs.api.paging import NEXT_DOC, PageQuery, named
from runs.api.responses import require
from runs.api.schemas import ErrorOut
from runs.protocol.canonical import parse_json
from runs.protocol.errors import ErrorCode

router = Router(tags=["review queues"])
ERRORS = {400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 409: ErrorOut, 429: ErrorOut}


class ScoreConfigIn(Schema):
    name: str
    dataType: str = Field(description="NUMERIC, CATEGORICAL or BOOLEAN (Langfuse's score config shape).")
    minValue: float | None = None
    maxValue: float | None = None
    categories: list[dict[str, Any]] | None = Field(
        default=None, description='[{"label": str, "value": number}]'
    )
    description: str | None = None
    isArchived: bool = False


class QueueIn(Schema):
    name: str
    instructions: str = ""
    scoreConfigs: list[ScoreConfigIn]
    reviewsPerItem: int = 1
    reservationSeconds: int = 600
    blind: bool = True
    rules: dict[str, Any] | None = Field(
        default=None,
        description='Runs added by themselves: {"rejectedGates": true, "errors": true, "costAbove": {"USD": "0.5"}, '
        '"samplePercent": 10, "workflowId": "..."} (workflowId narrows the others).',
    )
    defaultDataset: str = Field(
        default="", description="A dataset's id: 'Add to dataset' on an item picks it."
    )


class QueueOut(Schema):
    id: str
    name: str
    instructions: str
    reviewsPerItem: int
    reservationSeconds: int
    blind: bool
    rules: dict[str, Any]
    defaultDataset: str
    reviewers: list[str]
    scoreConfigs: list[dict[str, Any]]


class ItemsIn(Schema):
    items: list[dict[str, Any]] = Field(
        description='[{"runId": str, "kind": "run"|"event"|"step", "seq"?, "stepId"?}]'
    )


class ItemOut(Schema):
    id: str
    runId: str
    kind: str
    seq: int | None
    stepId: str | None


class ScoresIn(Schema):
    itemId: str
    scores: dict[str, Any] = Field(
        description="{score config name: value} (a number, a category label, true/false)"
    )
    comment: str = ""


def body(request: HttpRequest, what: str) -> dict[str, Any]:
    data = parse_json(request.body) if request.body else None
    if not isinstance(data, dict):
        raise ApiError(ErrorCode.INVALID_INPUT, f"the body must be a JSON object ({what})")
    return data


def queue_json(queue: Queue) -> dict[str, Any]:
    return {
        "id": queue.queue_id,
        "name": queue.name,
        "instructions": queue.instructions,
        "reviewsPerItem": queue.reviews_per_item,
        "reservationSeconds": queue.reservation_seconds,
        "blind": queue.blind,
        "rules": queue.rules,
        "defaultDataset": queue.default_dataset,
        "reviewers": sorted(u.get_username() for u in queue.reviewers.all()),
        "scoreConfigs": [
            {
                "name": c.name,
                "dataType": c.data_type,
                "minValue": c.min_value,
                "maxValue": c.max_value,
                "categories": c.categories or None,
                "description": c.description,
                "isArchived": c.is_archived,
            }
            for c in queue.score_configs.all()
        ],
    }


def item_json(item: Item) -> dict[str, Any]:
    return {
        "id": item.item_id,
        "runId": item.run.run_id,
        "kind": item.kind,
        "seq": item.seq or None,
        "stepId": item.step_id or None,
    }


def queue_of(caller: Any, queue_id: str) -> Queue:
    try:
        return get_queue(caller.workspace, queue_id)
    except QueueNotFound:
        raise ApiError("UNKNOWN_QUEUE", "no such queue", 404) from None


def reviewer(caller: Any) -> Any:
    if caller.user is None:
        raise ApiError(FORBIDDEN, "claims and scores belong to a person: sign in (session or OAuth)", 403)
    return caller.user


def create_body() -> dict[str, Any]:
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/QueueIn"}}},
        }
    }


@router.post(
    "/queues", response={201: QueueOut, **ERRORS}, summary="Create a queue", openapi_extra=create_body()
)
def create_queue(request: HttpRequest):
    caller = require(request, Action.MANAGE_QUEUES)
    data = body(request, "name, scoreConfigs")
    queue = review_actions.do_create_queue(
        workspace=caller.workspace,
        name=data.get("name"),
        instructions=data.get("instructions") or "",
        score_configs=data.get("scoreConfigs"),
        reviews_per_item=data.get("reviewsPerItem", 1),
        reservation_seconds=data.get("reservationSeconds", 600),
        blind=data.get("blind", True) is not False,
        rules=data.get("rules"),
        default_dataset=data.get("defaultDataset") or "",
        reviewers=data.get("reviewers") or [],
        actor=caller.actor,
    )
    return Status(201, queue_json(queue))


@router.get(
    "/queues",
    response={200: list[QueueOut], **ERRORS},
    summary="The workspace's queues, by name",
    description=NEXT_DOC,
)
def list_queues(request: HttpRequest, response: HttpResponse, page: Query[PageQuery]):
    caller = require(request, Action.VIEW_RUN)
    return [queue_json(q) for q in named(request, response, queues_with_counts(caller.workspace), page)]


@router.get(
    "/queues/{queue_id}",
    response={200: dict[str, Any], **ERRORS},
    summary="A queue, its progress and agreement",
)
def read_queue(request: HttpRequest, queue_id: str):
    caller = require(request, Action.VIEW_RUN)
    queue = queue_of(caller, queue_id)
    return {**queue_json(queue), "progress": progress(queue), "agreement": agreement_by_config(queue)}


@router.delete(
    "/queues/{queue_id}", response={204: None, **ERRORS}, summary="Delete a queue (its reviews stay)"
)
def delete_queue(request: HttpRequest, queue_id: str):
    caller = require(request, Action.MANAGE_QUEUES)
    review_actions.do_delete_queue(queue=queue_of(caller, queue_id))
    return Status(204, None)


@router.post(
    "/queues/{queue_id}/items",
    response={200: dict[str, int], **ERRORS},
    summary="Add runs, steps or events",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ItemsIn"}}},
        }
    },
)
def add_items(request: HttpRequest, queue_id: str):
    caller = require(request, Action.MANAGE_QUEUES)
    queue = queue_of(caller, queue_id)
    added = review_actions.do_add_items(
        queue=queue, items=body(request, "items").get("items"), actor=caller.actor
    )
    return {"added": added.added, "alreadyQueued": added.already}


@router.post(
    "/queues/{queue_id}/claim",
    response={200: ItemOut, 204: None, **ERRORS},
    summary="Claim the next item (reserved for the queue's reservation time); 204 when none is left",
)
def claim_next(request: HttpRequest, queue_id: str):
    caller = require(request, Action.REVIEW_QUEUE_ITEMS)
    queue = queue_of(caller, queue_id)
    item = review_actions.do_claim_next(queue=queue, user=reviewer(caller))
    if item is None:
        return Status(204, None)
    return item_json(item)


@router.post(
    "/queues/{queue_id}/scores",
    response={201: dict[str, Any], **ERRORS},
    summary="Submit scores for a claimed item (appends an annotation to a running run)",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ScoresIn"}}},
        }
    },
)
def submit_scores(request: HttpRequest, queue_id: str):
    caller = require(request, Action.REVIEW_QUEUE_ITEMS)
    queue = queue_of(caller, queue_id)
    data = body(request, "itemId, scores")
    try:
        item = get_item(queue, str(data.get("itemId") or ""))
    except QueueNotFound:
        raise ApiError("UNKNOWN_ITEM", "no such item in this queue", 404) from None
    scores = review_actions.do_submit_review(
        item=item,
        user=reviewer(caller),
        answers=data.get("scores"),
        comment=str(data.get("comment") or ""),
        actor=caller.actor,
    )
    return Status(
        201,
        {
            "itemId": item.item_id,
            "annotationSeq": scores[0].annotation_seq if scores else None,
            "scores": [
                {"name": s.name, "value": s.value, "stringValue": s.string_value or None} for s in scores
            ],
        },
    )
