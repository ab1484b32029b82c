"""Running an experiment: fork each item's source run from the first step the change affects,
let the replay executor re-execute it, then measure and score it.

* An empty change is a **replay** from the start: every model call is answered from the response
  cache (no provider request), gate decisions are the source's recorded ones.
* A change (``configurable``) is a **branch** from the first event of the affected step: the
  events before it are the source's, fixed (their model answers are counted as cache hits: no
  provider was asked), the step and what follows re-execute with the overlay.
* Nothing decides for a person: a fork that reaches a gate nobody decided stops there, and its
  item is reported ``waiting`` (unscored) instead of being approved by the experiment.

Items run with bounded concurrency (``WORKBENCH_EXPERIMENT_CONCURRENCY`` threads, each its own
database connection); the whole experiment runs as one ``django.tasks`` task (:func:`enqueue`),
its row written in the transaction that created the experiment (or right after it).

A task whose worker died is run again by the same task row once the worker's lease expires: the
items the dead attempt left ``running`` resume their fork (claimed under the experiment's task row:
what it recorded is matched, no provider is asked again; one that had no fork yet ends ``failed``
with the reason), the pending ones run. After
``MAX_ATTEMPTS`` starts, or when its task row is gone (:func:`recover_experiments`, a periodic task
of the workers), the experiment ends ``failed`` with the reason in words.

No thread waits for a fork: the runner runs each item's fork itself, and when another executor
(the fork's own task) claimed it first and it is still running, the item stays ``running`` and the
task ends after the other items, with a new task row for the experiment due
``WORKBENCH_EXPERIMENT_RECHECK_SECONDS`` later (:func:`come_back`): that row records what the fork
did once it stopped, and finishes the experiment (or comes back again). The experiment's
``task_id`` names the newest row, so a re-run of an older one finds it taken and does nothing.

Cancel (``evals.actions.do_cancel_experiment``) ends the experiment at once and cancels the forks
of its running items; the runner looks at the experiment before each item and once more after it
started the item's fork (a fork it made just after the Cancel is cancelled by the runner itself),
so no item starts and no fork asks a provider after Cancel.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.db.models import F, Q
from django.tasks import TaskContext, task
from django.utils import timezone
from django_tasks_db.compat import TaskResultStatus
from django_tasks_db.models import DBTaskResult

from evals import actions, selectors
from evals.actions.experiments import (
    affected_step,
    fork_actor,
    is_cancelled,
    money,
    output_text,
    prompt_overlay,
)
from evals.models import Experiment, ExperimentItem, ExperimentStatus, ItemStatus
from runs.actions import ActionError, do_cancel_tree
from runs.actions.forks import do_fork_with_history
from runs.engine.divergence import is_marker, same_event
from runs.execution.replay import run_fork
from runs.models import Event, ForkMode, ForkStatus, Run, RunFork
from runs.protocol.values import loads
from runs.selectors.compare import model_usage
from runs.selectors.runs import find_run, run_state

log = logging.getLogger("workbench.evals")


def concurrency() -> int:
    return max(1, int(getattr(settings, "WORKBENCH_EXPERIMENT_CONCURRENCY", 2)))


def recheck_seconds() -> float:
    """How long the experiment's next task row waits before it looks at forks run elsewhere."""
    return max(0.0, float(getattr(settings, "WORKBENCH_EXPERIMENT_RECHECK_SECONDS", 2.0)))


MAX_ATTEMPTS = 3
WORKER_LOST = "WORKER_LOST"


@task(takes_context=True)
def run_experiment_task(context: TaskContext, experiment_pk: int) -> str:
    """Run one experiment.

    Idempotent: the experiment is claimed by this task row (``Experiment.task_id``) with a
    conditional update, so another row for it finds it taken and does nothing; a re-run of this
    row after its worker died takes it over and runs only the items still ``pending`` (each item
    is recorded once, with its fork), the ones the dead attempt left ``running`` end ``failed``."""
    return run_experiment(experiment_pk, task_id=str(context.task_result.id)).status


def enqueue(experiment: Experiment) -> None:
    """Hand the experiment to the workers: a task row in the caller's transaction (or at once)."""
    result = run_experiment_task.enqueue(experiment.pk)
    Experiment.objects.filter(pk=experiment.pk).update(task_id=str(result.id))
    experiment.task_id = str(result.id)


def run_experiment(experiment_pk: int, *, workers: int | None = None, task_id: str = "") -> Experiment:
    """Run the pending items of an experiment and finish it (scores and summary). With a
    ``task_id`` (the task), only a pending experiment or one running under that same task row.
    An item whose fork another executor runs and has not finished leaves the experiment
    ``running`` with a task row that comes back to it (:func:`come_back`)."""
    claim = Q(status=ExperimentStatus.PENDING)
    if task_id:
        claim |= Q(status=ExperimentStatus.RUNNING, task_id=task_id)
    claimed = Experiment.objects.filter(claim, pk=experiment_pk).update(
        status=ExperimentStatus.RUNNING,
        attempts=F("attempts") + 1,
        **({"task_id": task_id} if task_id else {}),
    )
    experiment = Experiment.objects.select_related("workspace", "dataset").get(pk=experiment_pk)
    if task_id and not claimed:
        if experiment.task_id == task_id and cancelled_as(experiment):
            # cancelled while items' forks ran elsewhere: record what they did once they stopped
            running = list(experiment.items.filter(status=ItemStatus.RUNNING, run__isnull=False))
            if running:
                return _run_items(experiment, running, workers or concurrency(), task_id)
        return experiment
    resumed: list[ExperimentItem] = []
    # running items: left by a dead attempt, or waiting on a fork another executor runs (a come-back)
    for row in experiment.items.filter(status=ItemStatus.RUNNING):
        if row.run_id is not None and experiment.attempts <= MAX_ATTEMPTS:
            resumed.append(row)  # its fork resumes: what it recorded is matched, not redone
            continue
        actions.do_record_item(
            row, status=ItemStatus.FAILED,
            error=f"{WORKER_LOST}: the worker running this item stopped; run the experiment again to retry it",
        )  # fmt: skip
    if experiment.attempts > MAX_ATTEMPTS:
        return actions.do_finish_experiment(
            experiment,
            error=f"{WORKER_LOST}: the experiment was started {MAX_ATTEMPTS} times and its worker stopped each time",
        )
    pending = resumed + list(experiment.items.filter(status=ItemStatus.PENDING).order_by("item_key"))
    return _run_items(experiment, pending, workers or concurrency(), task_id)


def _run_items(experiment: Experiment, rows: list[ExperimentItem], workers: int, task_id: str) -> Experiment:
    """Run the items, then finish the experiment, or (a fork still runs elsewhere) come back later."""
    error = ""
    settled: list[bool] = []
    try:
        if workers <= 1 or len(rows) <= 1:
            settled = [run_item(experiment, row, task_id=task_id) for row in rows]
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="experiment") as pool:
                settled = list(pool.map(lambda row: _in_thread(experiment, row, task_id), rows))
    except Exception as exc:  # the experiment ends failed with the items it finished
        log.exception("experiment %s", experiment.public_id)
        error = f"{type(exc).__name__}: {exc}"
    if not error and not all(settled):
        return come_back(experiment)
    return actions.do_finish_experiment(experiment, error=error)


def come_back(experiment: Experiment) -> Experiment:
    """A new task row for the experiment, due in ``recheck_seconds()``: it takes the experiment
    over (``task_id``, attempts counted afresh) and records the items whose forks were still
    running elsewhere. Row and name are written together: a worker that dies here leaves either
    the old row in charge or the new one."""
    with transaction.atomic():
        due = timezone.now() + timedelta(seconds=recheck_seconds())
        result = run_experiment_task.using(run_after=due).enqueue(experiment.pk)
        Experiment.objects.filter(pk=experiment.pk).update(task_id=str(result.id), attempts=0)
    experiment.refresh_from_db()
    return experiment


def _in_thread(experiment: Experiment, row: ExperimentItem, task_id: str = "") -> bool:
    close_old_connections()
    try:
        return run_item(experiment, row, task_id=task_id)
    finally:
        connection.close()


def _fork_point(source: Run, step_id: str) -> int:
    """The seq of the first event of ``step_id`` in the source (0: the whole run)."""
    if not step_id:
        return 0
    seq = (
        Event.objects.filter(run=source, step_id=step_id)
        .order_by("seq")
        .values_list("seq", flat=True)
        .first()
    )
    return seq or 0


def _settle(fork: RunFork, task_id: str = "") -> RunFork | None:
    """Run the fork here; or, another executor claimed it first, the fork as it stands: ``None``
    while it still runs (nobody waits for it here; the experiment comes back to it). Claimed
    under the experiment's task row (``task_id``): a re-run of that row after its worker died
    resumes the fork (everything it recorded is matched, no provider is asked again)."""
    ran = run_fork(fork.pk, task_id=task_id)
    if ran is not None:
        return ran
    fork.refresh_from_db()
    if fork.status in (ForkStatus.PENDING, ForkStatus.RUNNING):
        return None
    return fork


def cancelled_as(experiment: Experiment) -> str | None:
    """The experiment's cancel reason once it was cancelled (None while it may go on)."""
    error = Experiment.objects.filter(pk=experiment.pk).values_list("error", flat=True).first()
    return error if error is not None and is_cancelled(error) else None


def run_item(experiment: Experiment, row: ExperimentItem, *, task_id: str = "") -> bool:
    """Run one item. False: its fork still runs elsewhere (the item stays ``running``)."""
    if row.status == ItemStatus.RUNNING and row.run_id is not None:  # a re-run resumes its fork
        fork = RunFork.objects.filter(run_id=row.run_id).select_related("run").first()
        source = find_run(experiment.workspace, row.source_run_id) if row.source_run_id else None
        if fork is not None and source is not None:
            return _record(experiment, row, _settle(fork, task_id), source)
    # pending -> running only if nobody cancelled it (Cancel marks the pending items failed)
    if cancelled_as(experiment) or not ExperimentItem.objects.filter(
        pk=row.pk, status=ItemStatus.PENDING
    ).update(status=ItemStatus.RUNNING):
        return True
    row.status = ItemStatus.RUNNING
    source = find_run(experiment.workspace, row.source_run_id) if row.source_run_id else None
    if source is None:
        actions.do_record_item(
            row, status=ItemStatus.FAILED, error="SOURCE_RUN_GONE: the item's source run is gone"
        )
        return True
    change = experiment.change or {}
    step = affected_step(source.workflow_id, change, experiment.from_step_id)
    mode = ForkMode.BRANCH if change else ForkMode.REPLAY
    try:
        fork = do_fork_with_history(
            workspace=experiment.workspace,
            source_run_id=source.run_id,
            mode=mode,
            from_seq=_fork_point(source, step) if mode == ForkMode.BRANCH else 0,
            overlay=_overlay(experiment, change) if mode == ForkMode.BRANCH else None,
            actor=fork_actor(experiment),
        )
    except ActionError as exc:
        actions.do_record_item(row, status=ItemStatus.FAILED, error=f"{exc.code}: {exc.message}")
        return True
    # the item names its fork at once: a re-run after this worker died resumes that fork
    actions.do_record_item(row, run=fork.run, run_id_text=fork.run.run_id)
    reason = cancelled_as(experiment)
    if reason is not None:  # cancelled while this fork was made: its listing may have missed it
        try:
            do_cancel_tree(
                workspace=experiment.workspace,
                run_id=fork.run.run_id,
                actor=fork_actor(experiment),
                reason=reason,
            )
        except ActionError:
            pass
    if fork.status == ForkStatus.EXTERNAL:
        actions.do_record_item(
            row,
            run=fork.run,
            run_id_text=fork.run.run_id,
            status=ItemStatus.FAILED,
            error="NOT_EXECUTABLE: the workbench has no step code for this workflow (its host replays it)",
        )
        return True
    return _record(experiment, row, _settle(fork, task_id), source)


def _record(experiment: Experiment, row: ExperimentItem, fork: RunFork | None, source: Run) -> bool:
    """What the item's stopped fork did (False, nothing recorded: the fork still runs)."""
    if fork is None:
        return False
    actions.do_record_item(row, **measure(fork, source, _item_of(experiment, row)))
    return True


def _overlay(experiment: Experiment, change: dict[str, Any]) -> dict[str, Any]:
    """The fork's overlay: the change's configurable, with the prompt version a prompt change names."""
    return {"configurable": prompt_overlay(experiment.workspace, change)}


def _item_of(experiment: Experiment, row: ExperimentItem) -> dict[str, Any]:
    for item in selectors.items_at(experiment.dataset, experiment.as_of_revision):
        if item["id"] == row.item_key:
            return item
    return {}


STATUS: dict[str, ItemStatus] = {  # fork status (a TextChoices value) -> item status
    ForkStatus.COMPLETED: ItemStatus.COMPLETED,
    ForkStatus.WAITING: ItemStatus.WAITING,
    ForkStatus.FAILED: ItemStatus.FAILED,
}


def measure(fork: RunFork, source: Run, item: dict[str, Any]) -> dict[str, Any]:
    """What the item records of its fork: status, output, calls, cache hits, cost, tokens, time,
    and the first event that differs from the source."""
    run = Run.unscoped.get(pk=fork.run_id)
    history_answers = Event.objects.filter(
        run=run, type="model_io", seq__lte=fork.history, body__contains='"direction":"response"'
    ).count()
    latency = None
    if fork.started_at and fork.finished_at:
        latency = int((fork.finished_at - fork.started_at).total_seconds() * 1000)
    return {
        "run": run,
        "run_id_text": run.run_id,
        "status": STATUS.get(fork.status, ItemStatus.FAILED),
        "error": f"{fork.error_code}: {fork.error_message}" if fork.error_code else "",
        "output": output_text(output_of(run, item)),
        "provider_calls": fork.provider_calls,
        "cache_hits": fork.cache_hits + history_answers,
        "tokens": run.total_tokens,
        "cost": _usd(run),
        "source_cost": _usd(source),
        "latency_ms": latency,
        "first_divergence_seq": first_divergence(fork, source, run),
    }


def _usd(run: Run) -> Decimal:
    return money(model_usage(run)["exact_cost"].get("USD", "0"))


def output_of(run: Run, item: dict[str, Any]) -> Any:
    """The fork's output as the item's expected value is shaped: the item's output keys (a gate
    item: its step's outputs), else the last step's outputs, else every artifact."""
    state = run_state(run)
    metadata = item.get("metadata") or {}
    keys = metadata.get("outputKeys")
    if not keys:
        steps = (state.run.get("workflowSnapshot") or {}).get("steps") or []
        keys = list((steps[-1].get("outputs") or []) if steps else [])
    if not keys:
        return {key: version.get("data") for key, version in sorted(state.artifacts.items())} or None
    values = {k: state.artifacts[k].get("data") for k in keys if k in state.artifacts}
    return selectors.output_value(values, keys)


def first_divergence(fork: RunFork, source: Run, run: Run) -> int | None:
    """The first source seq whose event the fork did not produce again (None: all the same)."""
    if fork.mode == ForkMode.REPLAY:
        if fork.divergence:
            return fork.divergence.get("sourceSeq")
        return None if fork.cursor >= source.last_seq else fork.cursor + 1
    mine = [
        loads(b)
        for b in Event.objects.filter(run=run, seq__gt=fork.history)
        .order_by("seq")
        .values_list("body", flat=True)
    ]
    mine = [e for e in mine if not is_marker(e) and e.get("type") != "run_forked"]
    theirs = [
        loads(b)
        for b in Event.objects.filter(run=source, seq__gt=fork.history)
        .order_by("seq")
        .values_list("body", flat=True)
    ]
    for offset in range(max(len(mine), len(theirs))):
        a = theirs[offset] if offset < len(theirs) else None
        b = mine[offset] if offset < len(mine) else None
        if not same_event(a, b):
            return fork.history + offset + 1
    return None


def recover_experiments(*, grace_seconds: float = 60) -> int:
    """Experiments pending or running whose task row is gone or finished: end them ``failed`` with
    the reason (a periodic task of the workers). Idempotent: an ended experiment is not touched
    again. Returns how many were ended."""
    horizon = timezone.now() - timedelta(seconds=grace_seconds)
    open_ = list(
        Experiment.objects.filter(
            status__in=[ExperimentStatus.PENDING, ExperimentStatus.RUNNING], created_at__lt=horizon
        ).exclude(task_id="")
    )
    if not open_:
        return 0
    alive = {
        str(pk)
        for pk in DBTaskResult.objects.filter(
            id__in=[e.task_id for e in open_], status__in=[TaskResultStatus.READY, TaskResultStatus.RUNNING]
        ).values_list("id", flat=True)
    }
    ended = 0
    for experiment in open_:
        if experiment.task_id in alive:
            continue
        for row in experiment.items.filter(status__in=[ItemStatus.PENDING, ItemStatus.RUNNING]):
            actions.do_record_item(
                row, status=ItemStatus.FAILED,
                error=f"{WORKER_LOST}: the experiment's worker stopped before this item finished",
            )  # fmt: skip
        actions.do_finish_experiment(
            experiment, error=f"{WORKER_LOST}: the worker running the experiment stopped before it finished"
        )
        ended += 1
    return ended


def refresh_waiting_item(fork: RunFork) -> None:
    """After a fork ends (runs.execution.replay.register_fork_finished): the experiment item it
    belongs to, reported ``waiting`` at a gate nobody had decided then (a ``budget`` gate among
    them), records what the fork did once a person decided; a finished experiment's scores and
    summary follow. One query for a fork that is no waiting item's."""
    rows = list(
        ExperimentItem.objects.filter(run_id=fork.run_id, status=ItemStatus.WAITING).select_related(
            "experiment", "experiment__workspace", "experiment__dataset"
        )
    )
    source = Run.unscoped.filter(pk=fork.source_id).first() if rows and fork.source_id is not None else None
    if source is None:
        return
    for row in rows:
        experiment = row.experiment
        actions.do_record_item(row, **measure(fork, source, _item_of(experiment, row)))
        if experiment.status in (ExperimentStatus.COMPLETED, ExperimentStatus.FAILED):
            actions.do_refresh_experiment(experiment)
