"""MCP tools for annotation queues, added to the one MCP server (runs.mcp.register_tool_module,
from review.apps): create a queue, add items, claim the next item, submit scores, read progress.
Rights from the one table (runs.actions.permissions); another workspace's queue is reported
exactly like a missing one; claims and scores need a person (an OAuth token of a member)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

from accounts.principals import Principal
from review import actions as review_actions
from review.models import Item, Queue
from review.selectors import QueueNotFound, agreement_by_config, get_item, get_queue, progress
from runs.actions import ActionError
from runs.actions.permissions import Action
from runs.mcp import Forwarder
from runs.mcp.operations import FORBIDDEN, Refused
from runs.mcp.operations import authorized_caller as caller

SCOPES = {
    "create_review_queue": "write or manage",
    "add_review_items": "write or manage",
    "claim_review_item": "review",
    "submit_review_scores": "review",
    "get_review_progress": "read",
}
READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
WRITES = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
QueueId = Annotated[str, Field(min_length=1, max_length=40, description="The queue's id (q_...).")]


def queue_of(principal: Principal, queue_id: str) -> Queue:
    try:
        return get_queue(principal.workspace, queue_id)
    except QueueNotFound:
        raise Refused("UNKNOWN_QUEUE", f"no queue {queue_id!r}") from None


def person(principal: Principal) -> Any:
    if principal.user is None:
        raise Refused(FORBIDDEN, "claims and scores belong to a person: connect with a member's OAuth token")
    return principal.user


def refusing(fn: Any, **kwargs: Any) -> Any:
    try:
        return fn(**kwargs)
    except ActionError as exc:
        raise Refused(exc.code, exc.message) from None


class QueueResult(BaseModel):
    queueId: str
    name: str


class ItemsResult(BaseModel):
    added: int
    alreadyQueued: int


class ClaimResult(BaseModel):
    itemId: str | None = Field(description="None when nothing is left for you.")
    runId: str | None = None
    kind: str | None = None
    seq: int | None = None
    stepId: str | None = None


class ScoresResult(BaseModel):
    itemId: str
    annotationSeq: int | None
    scores: list[dict[str, Any]]


class ProgressResult(BaseModel):
    queueId: str
    progress: dict[str, Any]
    agreement: list[dict[str, Any]]


def create_review_queue(principal: Principal | None, **kwargs: Any) -> dict[str, Any]:
    who = caller(principal, Action.MANAGE_QUEUES)
    queue = refusing(
        review_actions.do_create_queue,
        workspace=who.workspace,
        name=kwargs["name"],
        score_configs=kwargs["score_configs"],
        instructions=kwargs.get("instructions") or "",
        reviews_per_item=kwargs.get("reviews_per_item") or 1,
        reservation_seconds=kwargs.get("reservation_seconds") or 600,
        blind=kwargs.get("blind") is not False,
        actor=who.actor,
    )
    return {"queueId": queue.queue_id, "name": queue.name}


def add_review_items(principal: Principal | None, *, queue_id: str, items: list[Any]) -> dict[str, Any]:
    who = caller(principal, Action.MANAGE_QUEUES)
    queue = queue_of(who, queue_id)
    added = refusing(review_actions.do_add_items, queue=queue, items=items, actor=who.actor)
    return {"added": added.added, "alreadyQueued": added.already}


def claim_review_item(principal: Principal | None, *, queue_id: str) -> dict[str, Any]:
    who = caller(principal, Action.REVIEW_QUEUE_ITEMS)
    queue = queue_of(who, queue_id)
    item: Item | None = review_actions.do_claim_next(queue=queue, user=person(who))
    if item is None:
        return {"itemId": None}
    return {
        "itemId": item.item_id,
        "runId": item.run.run_id,
        "kind": item.kind,
        "seq": item.seq or None,
        "stepId": item.step_id or None,
    }


def submit_review_scores(
    principal: Principal | None,
    *,
    queue_id: str,
    item_id: str,
    scores: dict[str, Any],
    comment: str | None = None,
) -> dict[str, Any]:
    who = caller(principal, Action.REVIEW_QUEUE_ITEMS)
    queue = queue_of(who, queue_id)
    try:
        item = get_item(queue, item_id)
    except QueueNotFound:
        raise Refused("UNKNOWN_ITEM", f"no item {item_id!r} in this queue") from None
    saved = refusing(
        review_actions.do_submit_review,
        item=item,
        user=person(who),
        answers=scores,
        comment=comment or "",
        actor=who.actor,
    )
    return {
        "itemId": item.item_id,
        "annotationSeq": saved[0].annotation_seq if saved else None,
        "scores": [{"name": s.name, "value": s.value, "stringValue": s.string_value or None} for s in saved],
    }


def get_review_progress(principal: Principal | None, *, queue_id: str) -> dict[str, Any]:
    who = caller(principal, Action.VIEW_RUN)
    queue = queue_of(who, queue_id)
    return {"queueId": queue.queue_id, "progress": progress(queue), "agreement": agreement_by_config(queue)}


forward = Forwarder()  # the server's forwarder (a global: a tool's locals() are sent on)


def add_tools(mcp: Any, server_forward: Callable[..., Any]) -> dict[str, str]:
    """The review tools on the server being built (runs.mcp.server.build_server); their scopes."""
    forward.bind(server_forward)

    @mcp.tool(name="create_review_queue", title="Create a review queue", annotations=WRITES)
    async def create_review_queue_tool(
        ctx: Context,
        name: Annotated[str, Field(min_length=1, max_length=200)],
        scoreConfigs: list[dict[str, Any]],
        instructions: str | None = None,
        reviewsPerItem: Annotated[int, Field(ge=1, le=10)] = 1,
        reservationSeconds: Annotated[int, Field(ge=30, le=86400)] = 600,
        blind: bool = True,
    ) -> QueueResult:
        """Create an annotation queue with score configs in Langfuse's shape ({name, dataType:
        NUMERIC|CATEGORICAL|BOOLEAN, minValue?, maxValue?, categories?, description?})."""
        return await forward(ctx, create_review_queue, QueueResult, locals())

    @mcp.tool(name="add_review_items", title="Add items to a review queue", annotations=WRITES)
    async def add_review_items_tool(
        ctx: Context, queueId: QueueId, items: list[dict[str, Any]]
    ) -> ItemsResult:
        """Add runs, steps or events: [{runId, kind?: run|step|event, stepId?, seq?}]."""
        return await forward(ctx, add_review_items, ItemsResult, locals())

    @mcp.tool(name="claim_review_item", title="Claim the next review item", annotations=WRITES)
    async def claim_review_item_tool(ctx: Context, queueId: QueueId) -> ClaimResult:
        """Reserve the next item of the queue for you (for the queue's reservation time)."""
        return await forward(ctx, claim_review_item, ClaimResult, locals())

    @mcp.tool(name="submit_review_scores", title="Submit review scores", annotations=WRITES)
    async def submit_review_scores_tool(
        ctx: Context,
        queueId: QueueId,
        itemId: Annotated[str, Field(min_length=1, max_length=40)],
        scores: dict[str, Any],
        comment: str | None = None,
    ) -> ScoresResult:
        """Scores for an item you claimed ({config name: value}); a running run gets an annotation."""
        return await forward(ctx, submit_review_scores, ScoresResult, locals())

    @mcp.tool(name="get_review_progress", title="Read a review queue's progress", annotations=READ_ONLY)
    async def get_review_progress_tool(ctx: Context, queueId: QueueId) -> ProgressResult:
        """Items, reviews done per reviewer, and agreement per score once 20 items overlap."""
        return await forward(ctx, get_review_progress, ProgressResult, locals())

    return SCOPES
