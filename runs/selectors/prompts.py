"""Reads of prompts, workspace first: the list, one prompt's versions and labels, a version by
label or number (what pipelines fetch), diffs, promotion requests, and the runs that used a version.

A model call made with a fetched prompt carries ``{"prompt": {"name": ..., "version": N}}`` in its
model_io event's ``metadata`` (the SDK writes it; see :func:`prompt_ref`); a run that used a
version is found by that text in its events.
"""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any, TypedDict

from django.db.models import Count, Max, Prefetch, QuerySet

from runs.models import (
    Event,
    PromotionRequest,
    PromotionStatus,
    Prompt,
    PromptLabel,
    PromptVersion,
    ProtectedLabel,
    Run,
    Workspace,
)
from runs.presenters.prompts import config_changes, diff_lines, diff_summary, render_version, variables

# PROMPT_KEY: where a model_io response payload names its prompt (workbench_sdk.prompt_context)
from runs.protocol.telemetry import PROMPT_KEY
from runs.protocol.values import loads

MAX_COST_EVENTS = 5000

if TYPE_CHECKING:  # django-stubs' helper (a dev dependency): annotated model instances
    from django_stubs_ext import WithAnnotations

DEFAULT_LABEL = "production"


class PromptCounts(TypedDict):
    version_count: int
    last_number: int | None


def prompts_of(workspace: Workspace) -> QuerySet[WithAnnotations[Prompt, PromptCounts]]:
    return (
        Prompt.objects.filter(workspace=workspace)
        .annotate(version_count=Count("versions", distinct=True), last_number=Max("versions__number"))
        .prefetch_related(
            Prefetch("labels", queryset=PromptLabel.objects.select_related("version").order_by("name"))
        )
        .order_by("name")
    )


def _nul(*texts: str | None) -> bool:
    """A NUL names no prompt or label (and PostgreSQL cannot compare text holding one)."""
    return any(t is not None and "\x00" in t for t in texts)


def get_prompt(workspace: Workspace, name: str) -> Prompt | None:
    if _nul(name):
        return None
    return Prompt.objects.filter(workspace=workspace, name=name).first()


def versions_of(prompt: Prompt) -> list[PromptVersion]:
    return list(prompt.versions.select_related("created_by").order_by("-number"))


def labels_of(prompt: Prompt) -> dict[str, int]:
    """label -> version number."""
    rows = PromptLabel.objects.filter(prompt=prompt).values_list("name", "version__number")
    return dict(sorted(rows))


def labels_by_version(prompt: Prompt) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for name, number in labels_of(prompt).items():
        out.setdefault(number, []).append(name)
    return out


def protected_labels(workspace: Workspace) -> list[str]:
    return list(
        ProtectedLabel.objects.filter(workspace=workspace).order_by("name").values_list("name", flat=True)
    )


def find_version(
    workspace: Workspace, name: str, *, label: str | None = None, version: int | None = None
) -> PromptVersion | None:
    """The version a label points at, or the numbered one (``production`` when neither is given)."""
    if _nul(name, label):
        return None
    qs = PromptVersion.objects.select_related("prompt", "created_by").filter(
        prompt__workspace=workspace, prompt__name=name
    )
    if version is not None:
        return qs.filter(number=version).first()
    return qs.filter(labels__name=label or DEFAULT_LABEL).first()


def version_doc(version: PromptVersion, *, labels: list[str] | None = None) -> dict[str, Any]:
    """A version as the API, MCP and SDK see it."""
    prompt = version.prompt
    body = version.body_json
    return {
        "name": prompt.name,
        "type": prompt.type,
        "version": version.number,
        "labels": labels if labels is not None else labels_by_version(prompt).get(version.number, []),
        "tags": list(prompt.tags or []),
        "body": body,
        "config": version.config_json,
        "variables": variables(body),
        "message": version.message,
        "created_by": version.created_by.get_username() if version.created_by else None,
        "created_at": version.created_at.isoformat(),
    }


def previous_version(version: PromptVersion) -> PromptVersion | None:
    return (
        PromptVersion.objects.filter(prompt_id=version.prompt_id, number__lt=version.number)
        .order_by("-number")
        .first()
    )


def version_diff(old: PromptVersion | None, new: PromptVersion) -> dict[str, Any]:
    """Line diff of two versions (body and config); ``old`` None: everything is added."""
    before = render_version(old.body_json, old.config_json) if old else []
    rows = diff_lines(before, render_version(new.body_json, new.config_json))
    return {
        "old": old.number if old else None,
        "new": new.number,
        "rows": rows,
        "summary": diff_summary(rows),
    }


def promotion_diff(old: PromptVersion | None, new: PromptVersion) -> dict[str, Any]:
    """What a promotion changes, for its card: the message lines that differ (without the lines
    both versions share) and the config key by key (added, removed, changed; never the whole
    config as a JSON diff)."""
    before = render_version(old.body_json, {}) if old else []
    rows = [row for row in diff_lines(before, render_version(new.body_json, {})) if row["kind"] != "same"]
    return {
        "old": old.number if old else None,
        "new": new.number,
        "rows": rows,
        "summary": diff_summary(rows),
        "config": config_changes(old.config_json if old else {}, new.config_json),
    }


def pending_promotions(workspace: Workspace, *, limit: int = 100) -> list[PromotionRequest]:
    return list(
        PromotionRequest.objects.filter(workspace=workspace, status=PromotionStatus.PENDING)
        .select_related("workspace", "prompt", "from_version", "to_version", "requested_by")
        .order_by("requested_at", "pk")[:limit]
    )


def pending_promotion_count(workspace: Workspace) -> int:
    return PromotionRequest.objects.filter(workspace=workspace, status=PromotionStatus.PENDING).count()


def promotion_history(prompt: Prompt, *, limit: int = 50) -> list[PromotionRequest]:
    return list(
        prompt.promotions.select_related("from_version", "to_version", "requested_by", "decided_by").order_by(
            "-requested_at", "-pk"
        )[:limit]
    )


def get_promotion(workspace: Workspace, request_id: int) -> PromotionRequest | None:
    return (
        PromotionRequest.objects.filter(workspace=workspace, pk=request_id)
        .select_related("prompt", "from_version", "to_version", "requested_by", "decided_by")
        .first()
    )


def prompt_ref(name: str, number: int) -> str:
    """The text a model_io event holds when the call used this version (``"prompt": {...}``)."""
    return json.dumps({"name": name, "version": number}, separators=(",", ":"), ensure_ascii=False)


def parse_prompt_filter(text: str) -> tuple[str, int] | None:
    """``name@N`` -> (name, N); None when the text is not of that form."""
    name, sep, number = text.strip().rpartition("@")
    if not sep or not name or not number.isdigit() or len(number) > 9:
        return None
    return name, int(number)


def runs_using_version(workspace: Workspace, name: str, number: int, *, limit: int = 50) -> QuerySet[Run]:
    """Runs with a model call made with prompt ``name`` version ``number`` (newest first)."""
    run_pks = (
        Event.objects.filter(
            run__workspace=workspace, type="model_io", body__contains=prompt_ref(name, number)
        )
        .values("run_id")
        .distinct()
    )
    return Run.objects.for_workspace(workspace).filter(pk__in=run_pks).order_by("-started_at")[:limit]


def _total_tokens(usage: Any) -> int:
    if not isinstance(usage, dict):
        return 0
    total = usage.get("totalTokens")
    if isinstance(total, int):
        return total
    return sum(v for k, v in usage.items() if k in ("inputTokens", "outputTokens") and isinstance(v, int))


def cost_by_version(workspace: Workspace, name: str, *, limit: int = MAX_COST_EVENTS) -> dict[str, Any]:
    """Model calls made with each version of prompt ``name``: calls, tokens and cost per currency
    (the newest ``limit`` calls; ``truncated`` says when there were more)."""
    needle = f'"{PROMPT_KEY}":{{"name":{json.dumps(name, ensure_ascii=False)}'
    bodies = list(
        Event.objects.filter(run__workspace=workspace, type="model_io", body__contains=needle)
        .order_by("-recorded_at")
        .values_list("body", flat=True)[: limit + 1]
    )
    rows: dict[int, dict[str, Any]] = {}
    for body in bodies[:limit]:
        event = loads(body)
        payload = event.get("payload") if isinstance(event, dict) else None
        ref = payload.get(PROMPT_KEY) if isinstance(payload, dict) else None
        if not isinstance(ref, dict) or ref.get("name") != name or type(ref.get("version")) is not int:
            continue
        row = rows.setdefault(
            ref["version"], {"version": ref["version"], "calls": 0, "tokens": 0, "cost": {}}
        )
        row["calls"] += 1
        row["tokens"] += _total_tokens(event.get("usage"))
        cost = event.get("cost")
        if isinstance(cost, dict) and isinstance(cost.get("currency"), str):
            try:
                amount = Decimal(str(cost.get("amount")))
            except InvalidOperation:
                continue
            row["cost"][cost["currency"]] = row["cost"].get(cost["currency"], Decimal(0)) + amount
    return {"rows": [rows[k] for k in sorted(rows, reverse=True)], "truncated": len(bodies) > limit}
