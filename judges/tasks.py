"""The judges' background task (Django's tasks framework, django-tasks-db): one per run change
that may open or close a gate a judge watches."""

from __future__ import annotations

from django.tasks import task

from judges import online
from judges.actions import judge_run as judge_run_now


@task()
def judge_run(run_pk: int) -> str:
    """Propose on the run's pending gates and join decided ones. Running it twice is harmless: a
    gate request is judged once (a unique proposal per judge, run and request), and a decision
    joined once."""
    return judge_run_now(run_pk)


@task()
def score_online(run_pk: int) -> str:
    """Online evaluation of a finished run by the judges that sample it (each scores a run once)."""
    return online.score_run(run_pk)


@task()
def rescore_judge(judge_pk: int) -> int:
    """A new judge version scores the runs its older versions scored (cached answers reused)."""
    return online.rescore(judge_pk)
