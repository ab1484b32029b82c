"""Re-scoring with a new judge version (online evaluation): the runs its older versions scored are
scored again by the background task ``judges.tasks.rescore_judge``; model requests equal to the
older versions' are answered from the response cache (no provider call, no new spend)."""

from __future__ import annotations

from django.db import transaction

from judges.models import GateJudge, OnlineScore
from judges.tasks import rescore_judge
from runs.actions import ActionError

NOTHING_TO_RESCORE = "NOTHING_TO_RESCORE"


def do_rescore(judge: GateJudge) -> int:
    """Queue the re-scoring; the number of runs older versions scored (NOTHING_TO_RESCORE: none)."""
    runs = (
        OnlineScore.objects.filter(
            judge__workspace_id=judge.workspace_id, judge__name=judge.name, judge__version__lt=judge.version
        )
        .values("run_id")
        .distinct()
        .count()
    )
    if not runs:
        raise ActionError(NOTHING_TO_RESCORE, f"no older version of {judge.name} scored a run")
    transaction.on_commit(lambda: rescore_judge.enqueue(judge.pk))
    return runs
