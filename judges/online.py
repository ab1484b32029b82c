"""Online evaluation: the gate judges score a sample of live runs of their workflow (SDK runs,
OTLP-ingested traces, the workbench's own) once they finish, as annotations on the run tagged
``judge-score`` by ``judge:<name>@<version>``, never as decisions. The sample is a stable choice per
run (``online_percent`` of the judge), the same for every version of a judge, so a new version
re-scores what the older ones scored (:func:`do_rescore`): its model requests equal to theirs are
answered from the response cache, with no provider call.

    score_run(run_pk)      # the task's work after a run finished: every sampling judge, once
    do_rescore(judge)      # the runs older versions scored, scored by this one (a task)
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F

from judges import calls
from judges.models import GateJudge, OnlineScore, ProposalStatus
from review.rules import in_sample
from runs import actions
from runs.actions import ActionError
from runs.engine import commands as cmd
from runs.engine.state import TERMINAL_STATUSES
from runs.models import Run
from runs.selectors.runs import run_state

log = logging.getLogger("workbench.judges")

TAG = "judge-score"
RESCORE_LIMIT = 500  # runs one re-scoring looks at (the newest the older versions scored)


def sampled(judge: GateJudge, run: Run) -> bool:
    """Whether the run is in the judge's online sample (the same runs for every version)."""
    return judge.online_percent > 0 and in_sample(f"{run.run_id}|online|{judge.name}", judge.online_percent)


def online_judges(run: Run) -> list[GateJudge]:
    return list(
        GateJudge.objects.filter(
            workspace_id=run.workspace_id, workflow_id=run.workflow_id, enabled=True, online_percent__gt=0
        )
    )


def _gate(judge: GateJudge) -> dict[str, Any]:
    """What the judge's prompt sees of a finished run: its gate's step and payload, if any."""
    return {
        "stepId": judge.step_id,
        "gate": judge.gate,
        "checkpoint": judge.checkpoint or None,
        "reason": "online evaluation of a finished run",
    }


def _annotate(judge: GateJudge, run: Run, row: OnlineScore) -> None:
    text = (
        f"Judge {judge.label} scores this run {row.decision} (confidence {row.confidence:.2f}): {row.rationale}"
    )[:4000]
    try:
        result = actions.do_command(
            workspace=run.workspace,
            run_id=run.run_id,
            command=cmd.Annotate(text=text, tags=(TAG, judge.actor)),
            actor=judge.actor,
        )
    except ActionError as exc:
        log.info("judge %s: score on %s not annotated: %s", judge.label, run.run_id, exc)
        return
    OnlineScore.objects.filter(pk=row.pk).update(annotation_seq=result.last_seq or None)


def score(judge: GateJudge, run: Run) -> OnlineScore | None:
    """Score one finished run once (None: scored already, or being scored)."""
    try:
        with transaction.atomic():
            row = OnlineScore.objects.create(judge=judge, run=run)
    except IntegrityError:
        return None
    judge.refresh_from_db()
    if judge.budget is not None and judge.spent >= judge.budget:
        row.status, row.error = ProposalStatus.OVER_BUDGET, f"its budget of USD {judge.budget} is spent"
        row.save(update_fields=["status", "error"])
        return row
    try:
        verdict = calls.ask(judge, run, run_state(run), _gate(judge))
    except calls.JudgeOverBudget as exc:
        row.status, row.error = ProposalStatus.OVER_BUDGET, str(exc)[:500]
        row.save(update_fields=["status", "error"])
        return row
    except (calls.JudgeFailed, ActionError) as exc:
        row.status, row.error = ProposalStatus.FAILED, str(exc)[:500]
        row.save(update_fields=["status", "error"])
        return row
    row.status = ProposalStatus.PROPOSED
    row.decision, row.confidence, row.rationale = verdict.decision, verdict.confidence, verdict.rationale
    row.cost, row.judge_run_id = verdict.cost, verdict.run_id
    row.save()
    if verdict.cost:
        GateJudge.objects.filter(pk=judge.pk).update(spent=F("spent") + verdict.cost)
    _annotate(judge, run, row)
    return row


def score_run(run_pk: int) -> str:
    """The task's work after a run finished: each judge of its workflow that samples it, once."""
    run = Run.unscoped.select_related("workspace").filter(pk=run_pk).first()
    if run is None:
        return "gone"
    if run.status not in TERMINAL_STATUSES or run.status == "cancelled":
        return "not finished"
    scored = [judge for judge in online_judges(run) if sampled(judge, run) and score(judge, run)]
    return f"scored by {len(scored)}"


def rescore(judge_pk: int) -> int:
    """Score, with this judge, the runs older versions of it scored (the newest RESCORE_LIMIT)."""
    judge = GateJudge.objects.filter(pk=judge_pk).first()
    if judge is None:
        return 0
    run_ids = list(
        OnlineScore.objects.filter(
            judge__workspace_id=judge.workspace_id, judge__name=judge.name, judge__version__lt=judge.version
        )
        .order_by("-pk")
        .values_list("run_id", flat=True)[:RESCORE_LIMIT]
    )
    done = 0
    for run in Run.unscoped.select_related("workspace").filter(pk__in=set(run_ids)).order_by("pk"):
        if score(judge, run) is not None:
            done += 1
    return done
