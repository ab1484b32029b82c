"""Reads of annotation queues, workspace first: a queue or item of another workspace is exactly as
missing as a missing one."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from review.agreement import agreement
from review.models import Claim, DataType, Item, Queue, Score
from runs.models import Workspace


class QueueNotFound(Exception):
    code = "UNKNOWN_QUEUE"


def get_queue(workspace: Workspace, queue_id: str) -> Queue:
    if "\x00" in queue_id:  # names no queue (and PostgreSQL cannot compare text holding a NUL)
        raise QueueNotFound(queue_id)
    try:
        return Queue.objects.for_workspace(workspace).get(queue_id=queue_id)
    except Queue.DoesNotExist:
        raise QueueNotFound(queue_id) from None


def get_item(queue: Queue, item_id: str) -> Item:
    if "\x00" in item_id:  # as get_queue
        raise QueueNotFound(item_id)
    try:
        return Item.objects.select_related("run", "queue").get(queue=queue, item_id=item_id)
    except Item.DoesNotExist:
        raise QueueNotFound(item_id) from None


def queues_with_counts(workspace: Workspace) -> QuerySet[Queue]:
    return Queue.objects.filter(workspace=workspace).annotate(item_count=Count("items", distinct=True))


def progress(queue: Queue) -> dict[str, Any]:
    """Items, reviews needed and done, and per reviewer: completed, skipped, holding a reservation."""
    now = timezone.now()
    items = queue.items.count()
    needed = items * queue.reviews_per_item
    done_items = queue.items.filter(completed_reviews__gte=queue.reviews_per_item).count()
    per = (
        Claim.objects.filter(item__queue=queue)
        .values("reviewer__username")
        .annotate(
            n_completed=Count("pk", filter=Q(completed_at__isnull=False)),
            n_skipped=Count("pk", filter=Q(skipped=True)),
            n_reserved=Count("pk", filter=Q(completed_at__isnull=True, skipped=False, expires_at__gt=now)),
        )
        .order_by("reviewer__username")
    )
    reviews = sum(row["n_completed"] for row in per)
    return {
        "items": items,
        "items_done": done_items,
        "reviews_needed": needed,
        "reviews_done": reviews,
        "reviewers": [
            {
                "reviewer": row["reviewer__username"],
                "completed": row["n_completed"],
                "skipped": row["n_skipped"],
                "reserved": row["n_reserved"],
            }
            for row in per
        ],
    }


def agreement_by_config(queue: Queue) -> list[dict[str, Any]]:
    """Per active score config: agreement once 20 items have two or more reviews (None before)."""
    out = []
    for config in queue.score_configs.filter(is_archived=False):
        ratings: dict[Any, dict[Any, Any]] = defaultdict(dict)
        for item_id, reviewer, value, label in Score.objects.filter(queue=queue, config=config).values_list(
            "item_id", "reviewer_name", "value", "string_value"
        ):
            ratings[item_id][reviewer] = label or value
        result = agreement(
            dict(ratings), level="interval" if config.data_type == DataType.NUMERIC else "nominal"
        )
        out.append({"config": config.name, "dataType": config.data_type, "agreement": result})
    return out


def visible_scores(item: Item, user: Any) -> list[Score]:
    """Others' scores on an item: hidden in blind mode until this reviewer has completed theirs."""
    queue = item.queue
    if (
        queue.blind
        and not Claim.objects.filter(item=item, reviewer=user, completed_at__isnull=False).exists()
    ):
        return []
    return list(Score.objects.filter(item=item).order_by("reviewer_name", "pk"))
