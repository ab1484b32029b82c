"""The write path of annotation queues: every change to queues, items, claims and scores is a do_*
function here. A completed review also appends an ``annotation`` event (tag REVIEW_TAG) to its
run through ``runs.actions`` (the run's one write path), so it is in the run's record, its live
page and its export.

Errors are ``runs.actions.ActionError`` with a protocol-style code; nothing is changed then.
"""

from __future__ import annotations

import json
import math
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, connection, transaction
from django.db.models import Count, F, IntegerField, OuterRef, Q, Subquery, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from review.models import Claim, DataType, Item, ItemKind, Queue, Score, ScoreConfig
from review.rules import parse_rules
from runs import actions as run_actions
from runs.actions import ActionError
from runs.engine import commands as cmd
from runs.models import Membership, Run, Workspace
from runs.selectors.runs import RunNotFound, get_run

DATASET_REF = re.compile(r"(?:[A-Za-z0-9_-]{1,60})?")  # a dataset's public id, or none
REVIEW_TAG = "workbench:review"  # reserved: the annotation a completed review appends
INVALID = "INVALID_INPUT"
NAME_MAX = 200
CONFIGS_MAX = 20
ITEMS_MAX = 1000  # per call
RESERVATION_MAX = 24 * 3600
REVIEWS_MAX = 10


def new_id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(8)}"


# --- queues ---------------------------------------------------------------------------------------


def parse_score_config(raw: Any, index: int) -> dict[str, Any]:
    """One score config in Langfuse's shape ({name, dataType, minValue?, maxValue?, categories?,
    description?, isArchived?}) checked, as ScoreConfig fields."""
    where = f"scoreConfigs[{index}]"
    if not isinstance(raw, dict):
        raise ActionError(INVALID, "a score config is an object", where)
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > 100:
        raise ActionError(INVALID, "a score config needs a name (1-100 characters)", f"{where}.name")
    data_type = raw.get("dataType")
    if data_type not in DataType.values:
        raise ActionError(INVALID, "dataType is NUMERIC, CATEGORICAL or BOOLEAN", f"{where}.dataType")
    out: dict[str, Any] = {
        "name": name.strip(),
        "data_type": data_type,
        "description": str(raw.get("description") or "")[:2000],
        "is_archived": bool(raw.get("isArchived", False)),
        "position": index,
        "min_value": None,
        "max_value": None,
        "categories": [],
    }
    if data_type == DataType.NUMERIC:
        for key, field in (("minValue", "min_value"), ("maxValue", "max_value")):
            value = raw.get(key)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
            ):
                raise ActionError(INVALID, f"{key} is a number", f"{where}.{key}")
            out[field] = value
        if (
            out["min_value"] is not None
            and out["max_value"] is not None
            and out["min_value"] > out["max_value"]
        ):
            raise ActionError(INVALID, "minValue is above maxValue", f"{where}.minValue")
    if data_type == DataType.CATEGORICAL:
        categories = raw.get("categories")
        if not isinstance(categories, list) or not 1 <= len(categories) <= 9:
            raise ActionError(INVALID, "a categorical score has 1-9 categories", f"{where}.categories")
        seen = set()
        for i, c in enumerate(categories):
            label = c.get("label") if isinstance(c, dict) else None
            value = c.get("value", i) if isinstance(c, dict) else None
            if not isinstance(label, str) or not label or label in seen or len(label) > 200:
                raise ActionError(INVALID, "each category has a distinct label", f"{where}.categories[{i}]")
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ActionError(INVALID, "a category's value is a number", f"{where}.categories[{i}]")
            seen.add(label)
            out["categories"].append({"label": label, "value": value})
    return out


def _members(workspace: Workspace, reviewers: list[Any]) -> list[Any]:
    """Assigned reviewers: users, or usernames of the workspace's members (anyone else is refused,
    in the same words whether or not such a user exists elsewhere)."""
    if not isinstance(reviewers, list) or len(reviewers) > 200:
        raise ActionError(INVALID, "reviewers is a list of at most 200 usernames", "reviewers")
    names = [getattr(r, "username", r) for r in reviewers]
    if not all(isinstance(n, str) and 0 < len(n) <= 150 for n in names):
        raise ActionError(INVALID, "reviewers are usernames", "reviewers")
    members = {
        m.user.username: m.user
        for m in Membership.objects.filter(workspace=workspace, user__username__in=names).select_related(
            "user"
        )
    }
    unknown = [n for n in names if n not in members]
    if unknown:
        raise ActionError(INVALID, f"{unknown[0]!r} is not a member of this workspace", "reviewers")
    return [members[n] for n in dict.fromkeys(names)]


def do_create_queue(
    *,
    workspace: Workspace,
    name: object,  # request input: checked here
    score_configs: object,
    instructions: str = "",
    reviews_per_item: int = 1,
    reservation_seconds: int = 600,
    blind: bool = True,
    reviewers: list[Any] | None = None,
    rules: Any = None,
    default_dataset: Any = "",
    actor: str = "",
) -> Queue:
    if not isinstance(name, str) or not name.strip() or len(name) > NAME_MAX:
        raise ActionError(INVALID, f"a queue needs a name (1-{NAME_MAX} characters)", "name")
    if not isinstance(score_configs, list) or not 1 <= len(score_configs) <= CONFIGS_MAX:
        raise ActionError(INVALID, f"a queue has 1-{CONFIGS_MAX} score configs", "scoreConfigs")
    if not isinstance(reviews_per_item, int) or not 1 <= reviews_per_item <= REVIEWS_MAX:
        raise ActionError(INVALID, f"reviewsPerItem is 1-{REVIEWS_MAX}", "reviewsPerItem")
    if not isinstance(reservation_seconds, int) or not 30 <= reservation_seconds <= RESERVATION_MAX:
        raise ActionError(INVALID, f"reservationSeconds is 30-{RESERVATION_MAX}", "reservationSeconds")
    if not isinstance(default_dataset, str) or not DATASET_REF.fullmatch(default_dataset):
        raise ActionError(INVALID, "defaultDataset is a dataset's id (ds_...) or empty", "defaultDataset")
    assigned = _members(workspace, reviewers or [])
    configs = [parse_score_config(raw, i) for i, raw in enumerate(score_configs)]
    try:
        checked_rules = parse_rules(rules)
    except ValueError as exc:
        raise ActionError(INVALID, str(exc), "rules") from None
    if len({c["name"] for c in configs}) != len(configs):
        raise ActionError(INVALID, "score config names must differ", "scoreConfigs")
    try:
        with transaction.atomic():
            queue = Queue.objects.create(
                workspace=workspace,
                queue_id=new_id("q"),
                name=name.strip(),
                instructions=str(instructions or "")[:20000],
                reviews_per_item=reviews_per_item,
                reservation_seconds=reservation_seconds,
                blind=bool(blind),
                rules=checked_rules,
                default_dataset=default_dataset,
                created_by=actor[:200],
            )
            ScoreConfig.objects.bulk_create(ScoreConfig(queue=queue, **c) for c in configs)
            if assigned:
                queue.reviewers.set(assigned)
    except IntegrityError:
        raise ActionError(
            "CONFLICT", f"a queue named {name.strip()!r} exists in this workspace", "name"
        ) from None
    return queue


def do_delete_queue(*, queue: Queue) -> None:
    """Deletes the queue, its configs, items and claims; scores stay (queue_name keeps its name)
    and so do the annotations already appended to runs."""
    queue.delete()


# --- items ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AddedItems:
    added: int
    already: int


def item_target(raw: Any, index: int) -> tuple[str, str, int, str]:
    """(run_id, kind, seq, step_id) from {"runId", "kind"?, "seq"?, "stepId"?}."""
    where = f"items[{index}]"
    if not isinstance(raw, dict) or not isinstance(raw.get("runId"), str) or not raw["runId"]:
        raise ActionError(INVALID, "an item names its run (runId)", where)
    kind = raw.get("kind") or ItemKind.RUN
    if kind not in ItemKind.values:
        raise ActionError(INVALID, "kind is run, event or step", f"{where}.kind")
    seq = raw.get("seq") or 0
    step_id = raw.get("stepId") or ""
    if kind == ItemKind.EVENT and (isinstance(seq, bool) or not isinstance(seq, int) or seq < 1):
        raise ActionError(INVALID, "an event item names its seq (1 or more)", f"{where}.seq")
    if kind == ItemKind.STEP and (not isinstance(step_id, str) or not step_id or len(step_id) > 200):
        raise ActionError(INVALID, "a step item names its stepId", f"{where}.stepId")
    if kind != ItemKind.EVENT:
        seq = 0
    if kind != ItemKind.STEP:
        step_id = ""
    return raw["runId"], kind, seq, step_id


def do_add_items(*, queue: Queue, items: object, actor: str = "") -> AddedItems:
    """Adds runs, events or steps of the queue's workspace; one already in the queue is counted, not
    added twice. An unknown run (or another workspace's) refuses the whole call."""
    if not isinstance(items, list) or not 1 <= len(items) <= ITEMS_MAX:
        raise ActionError(INVALID, f"add 1-{ITEMS_MAX} items at a time", "items")
    targets = [item_target(raw, i) for i, raw in enumerate(items)]
    runs: dict[str, Run] = {}
    for i, (run_id, kind, seq, _) in enumerate(targets):
        if run_id not in runs:
            try:
                runs[run_id] = get_run(queue.workspace, run_id)
            except RunNotFound:
                raise ActionError(
                    RunNotFound.code, f"no run {run_id!r} in this workspace", f"items[{i}].runId"
                ) from None
        if kind == ItemKind.EVENT and seq > runs[run_id].last_seq:
            raise ActionError(INVALID, f"run {run_id!r} has no event {seq}", f"items[{i}].seq")
    rows = [
        Item(queue=queue, item_id=new_id("qi"), run=runs[r], kind=k, seq=s, step_id=st, added_by=actor[:200])
        for r, k, s, st in dict.fromkeys(targets)
    ]
    with transaction.atomic():
        before = Item.objects.filter(queue=queue).count()
        Item.objects.bulk_create(rows, ignore_conflicts=True)
        added = Item.objects.filter(queue=queue).count() - before
    return AddedItems(added=added, already=len(targets) - added)


# --- claims ---------------------------------------------------------------------------------------


def active_claims(item_ref: Any, now: datetime) -> Q:
    """Claims that hold a place on an item: completed ones, and reservations not yet expired."""
    return Q(item=item_ref) & (Q(completed_at__isnull=False) | Q(skipped=False, expires_at__gt=now))


def take_write_lock(queue: Queue) -> None:
    """SQLite has no row locks: a write first takes the database's write lock for the transaction
    (claimers queue up behind it). PostgreSQL uses FOR UPDATE SKIP LOCKED instead."""
    if connection.vendor == "sqlite":
        Queue.objects.filter(pk=queue.pk).update(reservation_seconds=F("reservation_seconds"))


def do_claim_next(*, queue: Queue, user: Any, now: datetime | None = None) -> Item | None:
    """The reviewer's current reservation, or the next item with room for another review that they
    have not reviewed, skipped or reserved, reserved for ``queue.reservation_seconds``. None when
    nothing is left for them. Two claimers never both get an item's last place: each locks the
    item row (FOR UPDATE SKIP LOCKED on PostgreSQL, the write lock on SQLite) and counts the
    places held once it holds the lock. A queue with assigned reviewers gives items to them only."""
    now = now or timezone.now()
    until = now + timedelta(seconds=queue.reservation_seconds)
    user_pk = getattr(user, "pk", None)
    if queue.reviewers.exists() and (user_pk is None or not queue.reviewers.filter(pk=user_pk).exists()):
        return None  # the queue is assigned to named reviewers: nothing in it is for anyone else
    with transaction.atomic():
        take_write_lock(queue)
        mine = (
            Claim.objects.select_related("item")
            .filter(
                item__queue=queue, reviewer=user, completed_at__isnull=True, skipped=False, expires_at__gt=now
            )
            .order_by("claimed_at")
            .first()
        )
        if mine is not None:
            return mine.item
        held = Subquery(
            Claim.objects.filter(active_claims(OuterRef("pk"), now))
            .values("item")
            .annotate(n=Count("pk"))
            .values("n")[:1],
            output_field=IntegerField(),
        )
        done_by_me = Claim.objects.filter(reviewer=user).filter(
            Q(completed_at__isnull=False) | Q(skipped=True)
        )
        candidates = (
            Item.objects.filter(queue=queue)
            .exclude(pk__in=done_by_me.values("item"))
            .annotate(held=Coalesce(held, Value(0)))
            .filter(held__lt=queue.reviews_per_item)
            .order_by("pk")
        )
        checked: list[int] = []
        for _ in range(50):
            item = (
                candidates.exclude(pk__in=checked).select_for_update(skip_locked=True, of=("self",)).first()
            )
            if item is None:
                return None
            # holding the row lock: count again in a fresh statement (a claimer that held it before
            # us has committed by now)
            places = Claim.objects.filter(active_claims(item, now)).exclude(reviewer=user).count()
            if places < queue.reviews_per_item:
                Claim.objects.update_or_create(
                    item=item,
                    reviewer=user,
                    defaults={"claimed_at": now, "expires_at": until, "completed_at": None, "skipped": False},
                )
                return item
            checked.append(item.pk)
    return None


def own_claim(item: Item, user: Any) -> Claim:
    claim = Claim.objects.filter(item=item, reviewer=user, completed_at__isnull=True, skipped=False).first()
    if claim is None:
        raise ActionError("NOT_CLAIMED", "claim this item first (it is not reserved for you)", "itemId")
    return claim


def do_skip(*, item: Item, user: Any, now: datetime | None = None) -> None:
    with transaction.atomic():
        take_write_lock(item.queue)
        claim = own_claim(item, user)
        claim.skipped = True
        claim.completed_at = None
        claim.save(update_fields=["skipped", "completed_at"])


def do_release(*, item: Item, user: Any) -> None:
    """Gives a reservation back (the reviewer moved on without skipping)."""
    Claim.objects.filter(item=item, reviewer=user, completed_at__isnull=True, skipped=False).delete()


# --- scores ---------------------------------------------------------------------------------------


def score_value(config: ScoreConfig, raw: Any) -> tuple[float | None, str]:
    """(value, string_value) of one answer, or ActionError in words."""
    where = f"scores.{config.name}"
    if config.data_type == DataType.BOOLEAN:
        if isinstance(raw, str) and raw.lower() in ("true", "false", "1", "0", "yes", "no"):
            raw = raw.lower() in ("true", "1", "yes")
        if not isinstance(raw, bool):
            raise ActionError(INVALID, f"{config.name}: choose yes or no", where)
        return (1.0 if raw else 0.0), ("True" if raw else "False")
    if config.data_type == DataType.CATEGORICAL:
        for c in config.categories:
            if raw == c["label"] or (not isinstance(raw, bool) and raw == c["value"]):
                return float(c["value"]), c["label"]
        labels = ", ".join(c["label"] for c in config.categories)
        raise ActionError(INVALID, f"{config.name}: choose one of {labels}", where)
    try:
        value = float(raw) if not isinstance(raw, bool) else math.nan
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value):
        raise ActionError(INVALID, f"{config.name}: enter a number", where)
    if config.min_value is not None and value < config.min_value:
        raise ActionError(INVALID, f"{config.name}: enter a value of at least {config.min_value:g}", where)
    if config.max_value is not None and value > config.max_value:
        raise ActionError(INVALID, f"{config.name}: enter a value of at most {config.max_value:g}", where)
    return value, ""


def annotation_text(queue: Queue, item: Item, reviewer: str, scores: list[Score], comment: str) -> str:
    """The annotation a completed review appends: JSON (sorted keys) a tool can read back."""
    body = {
        "type": "review.completed",
        "queue": queue.name,
        "queueId": queue.queue_id,
        "item": {"kind": item.kind, "seq": item.seq or None, "stepId": item.step_id or None},
        "reviewer": reviewer,
        "scores": [
            {"name": s.name, "dataType": s.data_type, "value": s.value, "stringValue": s.string_value or None}
            for s in scores
        ],
        "comment": comment or None,
    }
    return json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def do_submit_review(
    *,
    item: Item,
    user: Any,
    answers: object,  # request input: checked here
    comment: str = "",
    actor: str = "",
    now: datetime | None = None,
) -> list[Score]:
    """Stores the reviewer's scores (every active config answered), completes their claim and
    appends the review as an ``annotation`` event (tag REVIEW_TAG) to the run, running or finished
    (an annotation is the one event a finished run takes: it changes no state)."""
    now = now or timezone.now()
    queue = item.queue
    if not isinstance(answers, dict):
        raise ActionError(INVALID, "scores is an object {config name: value}", "scores")
    configs = list(queue.score_configs.filter(is_archived=False))
    unknown = sorted(set(answers) - {c.name for c in configs})
    if unknown:
        raise ActionError(INVALID, f"no score config named {unknown[0]!r} in this queue", "scores")
    missing = [c.name for c in configs if answers.get(c.name) in (None, "")]
    if missing:
        raise ActionError(INVALID, f"{missing[0]}: this field cannot be empty", f"scores.{missing[0]}")
    values = {c.name: score_value(c, answers[c.name]) for c in configs}
    comment = str(comment or "")[:4000]
    reviewer = getattr(user, "username", "") or str(user)
    with transaction.atomic():
        take_write_lock(queue)
        claim = own_claim(item, user)
        if claim.expires_at <= now:
            others = Claim.objects.filter(active_claims(item, now)).exclude(reviewer=user).count()
            if others >= queue.reviews_per_item:
                raise ActionError(
                    "RESERVATION_EXPIRED", "your reservation expired and others took the item", "itemId"
                )
        scores = [
            Score(
                workspace=queue.workspace,
                run=item.run,
                queue=queue,
                item=item,
                config=c,
                queue_name=queue.name,
                name=c.name,
                data_type=c.data_type,
                value=values[c.name][0],
                string_value=values[c.name][1],
                comment=comment,
                kind=item.kind,
                seq=item.seq,
                step_id=item.step_id,
                reviewer=user,
                reviewer_name=reviewer,
                created_at=now,
            )
            for c in configs
        ]
        result = run_actions.do_command(
            workspace=queue.workspace,
            run_id=item.run.run_id,
            command=cmd.Annotate(
                text=annotation_text(queue, item, reviewer, scores, comment),
                tags=[REVIEW_TAG],
                step_id=item.step_id or None,
            ),
            actor=actor or f"user:{reviewer}",
        )
        seq = result.last_seq
        for s in scores:
            s.annotation_seq = seq
        Score.objects.bulk_create(scores)
        claim.completed_at = now
        claim.save(update_fields=["completed_at"])
        Item.objects.filter(pk=item.pk).update(completed_reviews=F("completed_reviews") + 1)
    return scores
