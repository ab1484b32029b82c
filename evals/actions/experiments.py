"""Experiments: created over a dataset at a revision, one item row per dataset item; the runner
(``evals.runner``) forks each item's source run through runs' write path and records the outcome
here; ``rescore`` scores the stored outputs again without running anything."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from evals import scoring, selectors
from evals.actions.datasets import invalid, text_field
from evals.judge import judge_for
from evals.models import Dataset, Experiment, ExperimentItem, ExperimentStatus, ItemStatus
from runs.actions import ActionError, do_cancel_tree
from runs.engine import programs
from runs.execution.prompts import PROMPT_OVERLAY, ProgramPrompt
from runs.models import Run, RunStatus, Workspace
from runs.protocol.canonical import canonical_str
from runs.protocol.values import loads, new_id
from runs.selectors.prompts import find_version

CHANGE_KEYS = frozenset({"configurable", "prompt"})
MAX_EXPERIMENT_ITEMS = 5000


def check_change(change: Any) -> dict[str, Any]:
    """``{}`` (replay), ``{"configurable": {...}}`` and/or ``{"prompt": {"name", "version"}}``
    (a branch: the forks' step code gets that prompt version, see runs.execution.prompts)."""
    if change is None:
        return {}
    if not isinstance(change, dict):
        raise invalid(
            'change must be {} (replay), {"configurable": {...}} or {"prompt": {"name", "version"}}', "change"
        )
    unknown = set(change) - CHANGE_KEYS
    if unknown:
        raise invalid(
            f"unknown change field(s): {', '.join(sorted(unknown))}; use configurable or prompt", "change"
        )
    if "configurable" in change and not isinstance(change["configurable"], dict):
        raise invalid("change.configurable must be an object", "change.configurable")
    if "configurable" in change and PROMPT_OVERLAY in change["configurable"]:
        raise invalid(f"{PROMPT_OVERLAY} is set by change.prompt", f"change.configurable.{PROMPT_OVERLAY}")
    out = {k: v for k, v in change.items() if k != "configurable" or v}
    if "prompt" in change:
        out["prompt"] = _check_prompt_change(change["prompt"])
    return out


def _check_prompt_change(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict) or set(value) != {"name", "version"}:
        raise invalid('change.prompt is {"name": ..., "version": N}', "change.prompt")
    name, version = value["name"], value["version"]
    if not isinstance(name, str) or not name or "\x00" in name or len(name) > 200:
        raise invalid("change.prompt.name is a prompt's name", "change.prompt.name")
    if type(version) is not int or not 0 < version < 10**9:
        raise invalid("change.prompt.version is a version number (1, 2, ...)", "change.prompt.version")
    return {"name": name, "version": version}


def prompt_overlay(workspace: Workspace, change: dict[str, Any]) -> dict[str, Any]:
    """The fork overlay's ``configurable`` for a change: its own, plus the named prompt version's
    text and config under ``PROMPT_OVERLAY`` (INVALID_INPUT when the workspace has no such version)."""
    configurable = dict(change.get("configurable") or {})
    ref = change.get("prompt")
    if ref:
        found = find_version(workspace, ref["name"], version=ref["version"])
        if found is None:
            raise invalid(f"prompt {ref['name']} has no version {ref['version']}", "change.prompt")
        doc = ProgramPrompt(ref["name"], found.number, found.prompt.type, found.body_json, found.config_json)
        configurable[PROMPT_OVERLAY] = {ref["name"]: doc.overlay()}
    return configurable


def resolve_as_of(dataset: Dataset, as_of: Any) -> int:
    """A revision number, an ISO 8601 time, or None (the latest revision)."""
    if as_of is None or as_of == "":
        return dataset.revision
    if type(as_of) is int or (isinstance(as_of, str) and as_of.isdigit()):
        revision = int(as_of)
        if not 0 <= revision <= dataset.revision:
            raise invalid(f"asOf {revision} is beyond the dataset's revision {dataset.revision}", "asOf")
        return revision
    when: datetime | None = None
    if isinstance(as_of, str):
        try:
            when = parse_datetime(as_of)
        except ValueError:
            when = None
    if when is None:
        raise invalid("asOf is a revision number or an ISO 8601 time", "asOf")
    if timezone.is_naive(when):
        when = timezone.make_aware(when, UTC)
    return selectors.revision_at(dataset, when)


def affected_step(workflow_id: str, change: dict[str, Any], from_step_id: str) -> str:
    """The first step the change affects: named by the caller, else declared by the workflow's
    step code (``program.configurable_steps``: configurable key -> step id), else "" (the whole run)."""
    if from_step_id or not change:
        return from_step_id
    program = programs.get(workflow_id)
    declared = getattr(program, "configurable_steps", None) or {}
    steps: list[str | None] = [declared.get(key) for key in change.get("configurable", {})]
    if change.get("prompt"):  # the step that uses the prompt (``program.prompt_steps``: name -> step id)
        steps.append((getattr(program, "prompt_steps", None) or {}).get(change["prompt"]["name"]))
    named = [step for step in steps if step]
    if steps and len(named) == len(steps):  # every change names its step
        order = list(dict.fromkeys(getattr(program, "step_order", None) or named))
        return min(named, key=lambda s: order.index(s) if s in order else len(order))
    return ""


def do_create_experiment(
    *,
    workspace: Workspace,
    dataset: Dataset,
    name: Any,
    change: Any = None,
    as_of: Any = None,
    baseline: Experiment | None = None,
    evaluator: Any = None,
    from_step_id: Any = None,
    actor: str = "",
) -> Experiment:
    name = text_field(name, "name", required=True)
    change = check_change(change)
    prompt_overlay(workspace, change)  # the prompt version exists in this workspace
    from_step = text_field(from_step_id, "fromStepId")
    try:
        spec = scoring.check_evaluator(evaluator)
    except scoring.EvaluatorError as exc:
        raise invalid(str(exc), "evaluator") from None
    if baseline is not None and baseline.dataset_id != dataset.pk:
        raise invalid("the baseline is an experiment over another dataset", "baselineId")
    revision = resolve_as_of(dataset, as_of)
    items = selectors.items_at(dataset, revision)
    if not items:
        raise invalid(f"the dataset holds no items at revision {revision}", "asOf")
    if len(items) > MAX_EXPERIMENT_ITEMS:
        raise invalid(f"an experiment runs at most {MAX_EXPERIMENT_ITEMS} items", "datasetId")
    with transaction.atomic():
        experiment = Experiment.objects.create(
            public_id=new_id("exp"),
            workspace=workspace,
            dataset=dataset,
            as_of_revision=revision,
            name=name,
            change=change,
            from_step_id=from_step,
            evaluator=spec,
            baseline=baseline,
            created_by=actor,
            created_at=timezone.now(),
        )
        ExperimentItem.objects.bulk_create(
            [
                ExperimentItem(
                    experiment=experiment, item_key=item["id"], source_run_id=item["source"]["runId"] or ""
                )
                for item in items
            ]
        )
    return experiment


def do_record_item(item: ExperimentItem, **fields: Any) -> None:
    """The runner's outcome of one item (status, run, output, score and measurements)."""
    for name, value in fields.items():
        setattr(item, name, value)
    item.save()


def _score(
    experiment: Experiment, spec: dict[str, Any], output_text: str, item: dict[str, Any] | None
) -> tuple[float | None, dict]:
    if item is None:
        return None, {"error": "the item is no longer in the dataset"}
    output = loads(output_text) if output_text else None
    try:
        judge = judge_for(experiment.workspace, actor=f"experiment:{experiment.public_id}")
        return scoring.evaluate(spec, output, item.get("expected"), item, judge=judge), {}
    except scoring.EvaluatorError as exc:
        return None, {"error": str(exc)}
    except Exception as exc:  # a registered evaluator crashed: that item is unscored, not the experiment
        return None, {"error": f"{type(exc).__name__}: {exc}"}


def score_item(experiment: Experiment, row: ExperimentItem, item: dict[str, Any] | None) -> None:
    if row.status != ItemStatus.COMPLETED:
        row.score, row.score_detail = None, {}
        return
    score, detail = _score(experiment, experiment.evaluator, row.output, item)
    history = dict(row.score_detail.get("history") or {}) if isinstance(row.score_detail, dict) else {}
    history[scoring.evaluator_label(experiment.evaluator)] = score
    row.score, row.score_detail = score, {**detail, "history": history}


def _item_dicts(experiment: Experiment) -> dict[str, dict[str, Any]]:
    return {i["id"]: i for i in selectors.items_at(experiment.dataset, experiment.as_of_revision)}


def item_facts(row: ExperimentItem) -> dict[str, Any]:
    return {
        "itemId": row.item_key,
        "status": row.status,
        "score": row.score,
        "providerCalls": row.provider_calls,
        "cacheHits": row.cache_hits,
        "tokens": row.tokens,
        "cost": str(row.cost),
        "costDelta": str(row.cost - row.source_cost),
        "latencyMs": row.latency_ms,
        "firstDivergenceSeq": row.first_divergence_seq,
    }


def summarize(experiment: Experiment) -> dict[str, Any]:
    rows = list(experiment.items.all())
    facts = [item_facts(r) for r in rows]
    baseline_scores: dict[str, float | None] | None = None
    if experiment.baseline_id is not None:
        baseline_scores = dict(
            ExperimentItem.objects.filter(experiment_id=experiment.baseline_id).values_list(
                "item_key", "score"
            )
        )
    return scoring.summarize(facts, baseline_scores)


def do_finish_experiment(experiment: Experiment, *, error: str = "") -> Experiment:
    """Score what the runner recorded and write the summary; ends the experiment. A cancelled
    experiment keeps its status and reason, and is not scored (a judge would ask a provider)."""
    with transaction.atomic():
        ended = Experiment.objects.filter(pk=experiment.pk).values_list("error", "finished_at").first()
        cancelled = ended is not None and is_cancelled(ended[0])
        if not cancelled:
            items = _item_dicts(experiment)
            for row in experiment.items.all():
                score_item(experiment, row, items.get(row.item_key))
                row.save(update_fields=["score", "score_detail"])
        experiment.summary = summarize(experiment)
        if cancelled and ended is not None:
            experiment.status, experiment.error, experiment.finished_at = ExperimentStatus.FAILED, *ended
        else:
            experiment.status = ExperimentStatus.FAILED if error else ExperimentStatus.COMPLETED
            experiment.error = error
            experiment.finished_at = timezone.now()
        experiment.save(update_fields=["summary", "status", "error", "finished_at"])
    return experiment


def do_refresh_experiment(experiment: Experiment) -> Experiment:
    """Score the items again and rewrite the summary of a finished experiment whose waiting item
    went on after a person decided (its status and end stay)."""
    with transaction.atomic():
        items = _item_dicts(experiment)
        for row in experiment.items.all():
            score_item(experiment, row, items.get(row.item_key))
            row.save(update_fields=["score", "score_detail"])
        experiment.summary = summarize(experiment)
        experiment.save(update_fields=["summary"])
    return experiment


CANCELLED = "CANCELLED"
OPEN = (ExperimentStatus.PENDING, ExperimentStatus.RUNNING)


def is_cancelled(error: str) -> bool:
    return error.startswith(f"{CANCELLED}:")


def fork_actor(experiment: Experiment) -> str:
    """Who the experiment's forks are started by (how its Cancel finds them)."""
    return f"experiment:{experiment.public_id}"


def do_cancel_experiment(experiment: Experiment, *, actor: str) -> Experiment:
    """Cancel a pending or running experiment: it ends ``failed`` now ("CANCELLED: cancelled by
    <user>"), its pending items never run, and the forks its running items re-execute are
    cancelled (each stops before its next provider call; the call under way is shut). The runner
    sees it between items and records what the running ones did. Refused with ``CONFLICT`` once
    it ended (nothing changes)."""
    who = actor.removeprefix("user:")[:200] or "someone"
    error = f"{CANCELLED}: cancelled by {who}"
    with transaction.atomic():
        if not Experiment.objects.filter(pk=experiment.pk, status__in=OPEN).update(
            status=ExperimentStatus.FAILED, error=error, finished_at=timezone.now()
        ):
            experiment.refresh_from_db()
            raise ActionError(
                "CONFLICT", f"the experiment already ended ({experiment.status}): nothing to cancel"
            )
        experiment.items.filter(status=ItemStatus.PENDING).update(
            status=ItemStatus.FAILED, error=f"{error} before this item ran"
        )
    forks = Run.unscoped.filter(
        workspace=experiment.workspace, created_by=fork_actor(experiment), status=RunStatus.RUNNING
    ).values_list("run_id", flat=True)
    for run_id in list(forks):
        try:
            do_cancel_tree(workspace=experiment.workspace, run_id=run_id, actor=actor, reason=error)
        except ActionError:  # it ended meanwhile
            pass
    experiment.refresh_from_db()
    experiment.summary = summarize(experiment)
    experiment.save(update_fields=["summary"])
    return experiment


def do_rescore_experiment(experiment: Experiment, *, evaluator: Any = None, actor: str = "") -> Experiment:
    """Score the stored outputs again (another evaluator or a new version of one): no fork, no
    task model call. The earlier scores stay in each item's score history."""
    if experiment.status not in (ExperimentStatus.COMPLETED, ExperimentStatus.FAILED):
        raise ActionError("CONFLICT", "the experiment is still running: rescore it once it has finished")
    try:
        spec = scoring.check_evaluator(evaluator if evaluator is not None else experiment.evaluator)
    except scoring.EvaluatorError as exc:
        raise invalid(str(exc), "evaluator") from None
    with transaction.atomic():
        experiment.evaluator = spec
        items = _item_dicts(experiment)
        for row in experiment.items.all():
            score_item(experiment, row, items.get(row.item_key))
            row.save(update_fields=["score", "score_detail"])
        experiment.rescored += 1
        experiment.summary = summarize(experiment)
        experiment.save(update_fields=["evaluator", "rescored", "summary"])
    return experiment


def output_text(value: Any) -> str:
    return canonical_str(value)


def money(value: Any) -> Decimal:
    try:
        return Decimal(str(value))
    except Exception:
        return Decimal(0)
