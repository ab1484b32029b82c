"""Deleting old runs in bounded batches: no transaction holds more than ``batch`` events' worth of
locks or work, however long the run (a ten-million-event run included).

``do_delete_run`` deletes a run in one transaction: for a run of millions of events that is one
DELETE of millions of rows (and one read of every ``model_io`` body for the rollups) holding the
run's lock and its rollup rows for the whole time. :func:`do_purge_run` does the same work in
steps, each its own short transaction:

1. the run leaves its workspace at once: its count in the run rollups and its model calls in the
   cost rollups go (subtracted by the run's own rollup rows, ``rollups.forget_calls``: no event
   body is read), what it recorded in the response cache is no longer served (its run is not in
   the answer's workspace any more: ``responsecache.retained``), and the row moves to the hidden
   ``_purging`` workspace under the id ``purging-<pk>-ws<its workspace's pk>`` (no page, API or
   MCP read of any workspace sees it any more; the deletion is announced as ``do_delete_run``
   announces it);
2. its events go ``batch`` at a time, newest first, each batch one ``DELETE`` of a seq range
   bounded on both sides (the key's index; nothing else is read or locked);
3. its artifact and rule-set versions and projection snapshots go ``batch`` rows at a time (a
   ten-million-event run may hold a million);
4. what it recorded in the response cache goes, ``batch`` answers at a time;
5. the run row goes with what is left (links, its own rollup rows), which is small (its events
   and versions are not looked for again: see :func:`_delete_run_row`; events have no foreign-key
   constraint to check, and the versions' and answers' checks skip the index entries of the rows
   the batches deleted: :func:`_pass_over`).

A purge interrupted after step 1 leaves a hidden run that :func:`resume_purges` (run by
``manage.py prune_runs``) finishes (a run hidden by an older version, whose remaining calls were
still counted under its workspace, has them subtracted then: its own rollup rows hold them). Nothing here runs on its own: ``manage.py prune_runs`` deletes
what an operator asks for (``--days``, or ``WORKBENCH_RUN_RETENTION_DAYS`` when set; 0 = keep).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection, router, transaction
from django.db.models import CharField, Q, Value
from django.db.models.deletion import Collector
from django.db.models.functions import Cast, Concat

from runs.actions import partitions, rollups
from runs.actions.core import lock_run
from runs.actions.notify import RunChange, notify_on_commit
from runs.engine.state import TERMINAL_STATUSES
from runs.models import ArtifactVersion, CachedResponse, Event, RuleSetVersion, Run, RunSnapshot, Workspace

PURGING_SLUG = "_purging"
PURGE_BATCH = 10_000


@dataclass
class PurgeReport:
    runs: int = 0
    events: int = 0
    transactions: int = 0
    longest_transaction_ms: float = 0.0
    longest_step: str = ""  # which step the longest transaction was
    seconds: float = 0.0
    run_ids: list[str] = field(default_factory=list)
    step_ms: dict[str, float] = field(default_factory=dict)  # each step's longest transaction
    partitions_dropped: list[str] = field(default_factory=list)  # PostgreSQL: event ranges dropped

    def timed(self, started: float, step: str) -> None:
        self.transactions += 1
        took = (time.perf_counter() - started) * 1000
        self.step_ms[step] = max(took, self.step_ms.get(step, 0.0))
        if took > self.longest_transaction_ms:
            self.longest_transaction_ms, self.longest_step = took, step


def _purging_workspace() -> Workspace:
    workspace, _ = Workspace.objects.get_or_create(slug=PURGING_SLUG, defaults={"name": "runs being deleted"})
    return workspace


def do_purge_run(*, workspace: Workspace, run_id: str, batch: int = PURGE_BATCH) -> PurgeReport:
    """Delete one run in bounded transactions (see the module's docstring)."""
    report = PurgeReport()
    began = time.perf_counter()
    run = _hide(workspace, run_id, report)
    _purge_rows(run, batch, report)
    report.runs, report.run_ids = 1, [run_id]
    report.seconds = time.perf_counter() - began
    return report


def _hide(workspace: Workspace, run_id: str, report: PurgeReport) -> Run:
    """Step 1, one transaction: the run leaves its workspace and its rollups."""
    started = time.perf_counter()
    with transaction.atomic():
        run = lock_run(workspace, run_id)
        notify_on_commit(RunChange.of(run, 0, 0, status="deleted"))
        # its answers stop being served now (responsecache.retained: their run left the workspace)
        # and are deleted in batches (step 4), not here: a long run holds hundreds of thousands
        rollups.count_new_run(run, sign=-1)
        rollups.forget_calls(run)
        hidden_id = f"purging-{run.pk}-ws{run.workspace_id}"  # the workspace its rollups are under
        Run.unscoped.filter(pk=run.pk).update(workspace=_purging_workspace(), run_id=hidden_id)
    report.timed(started, "hide the run")
    return run


def _purge_rows(run: Run, batch: int, report: PurgeReport) -> None:
    """Steps 2 to 5 for a run already hidden and subtracted from the rollups: its seqs deleted
    ``batch`` at a time from the top, each DELETE bounded on both sides (the rows a previous batch
    deleted stay in the key's index until a VACUUM: a range open at the top walked all of them
    again, every batch, which made a ten-million-event purge quadratic)."""
    top = Event.objects.filter(run_id=run.pk).order_by("-seq").values_list("seq", flat=True).first()
    high = None  # the first batch also takes anything above the top it saw
    while top is not None and top >= 1:
        low = max(1, top - batch + 1)
        started = time.perf_counter()
        with transaction.atomic():
            rows = Event.objects.filter(run_id=run.pk, seq__gte=low)
            if high is not None:
                rows = rows.filter(seq__lte=high)
            deleted, _ = rows.delete()
        report.events += deleted
        report.timed(started, "events")
        top = high = low - 1
    for model in _VERSIONED:
        _purge_versions(model, run.pk, batch, report)
    # what it recorded in the response cache (no lookup has served it since step 1:
    # responsecache.retained)
    _purge_versions(CachedResponse, run.pk, batch, report, "cached responses")
    for rows_model in (*_VERSIONED, CachedResponse):  # (events have no foreign-key constraint: Event.run)
        _pass_over(rows_model.objects.filter(run_id=run.pk).order_by())
    started = time.perf_counter()
    with transaction.atomic():
        _delete_run_row(run.pk)
    report.timed(started, "the run row")


# What a run keeps one row of per version besides its events: as many as its events, at worst (a
# ten-million-event run held a million artifact versions, which the run row's cascade deleted in
# one transaction; that purge's longest took 12.6 s, not attributed per step then).
_VERSIONED = (ArtifactVersion, RuleSetVersion, RunSnapshot)


def _purge_versions(model, pk: int | list[int], batch: int, report: PurgeReport, step: str = "") -> None:
    """``model``'s rows of the run (or runs), ``batch`` at a time, each batch its own transaction."""
    while True:
        started = time.perf_counter()
        with transaction.atomic():
            deleted = _delete_some(model, pk, batch)
        if not deleted:
            return
        report.timed(started, step or model._meta.model_name)
        if deleted < batch:
            return


def _delete_some(model, pk: int | list[int], batch: int) -> int:
    """At most ``batch`` of ``model``'s rows of run ``pk``, in ONE statement: ``DELETE ... WHERE id
    IN (SELECT id ... WHERE run_id = pk LIMIT batch)``, found through the run's index, unordered (a
    sort would read them all every time). Reading the ids first and sending them back as a list of
    10,000 parameters cost PostgreSQL more to parse and plan than the delete (a batch of 10,000
    artifact versions: ~250 ms)."""
    mine = model.objects.filter(run_id__in=pk) if isinstance(pk, list) else model.objects.filter(run_id=pk)
    some = mine.order_by().values("pk")[:batch]
    deleted, _ = model.objects.filter(pk__in=some).delete()
    return deleted


def _pass_over(rows) -> None:
    """Read through the index entries of rows deleted earlier, outside any write transaction (a
    read that finds nothing and locks nothing a writer waits for). A plain index scan that passes
    entries whose rows are dead to every transaction marks them dead, and later scans skip them
    without visiting the table: deleting the run row checks, at commit and under the run row's
    lock, that no version or cached answer still names it (their foreign keys). Measured on
    PostgreSQL 15: a pass right after a batch's commit marked few or none (the rows were not yet
    dead to every transaction as the scan judged it), one a second later marked all, so the
    passes come after every batch. And it must be a plain index scan: an index-only one (what a
    bare EXISTS or a read of the indexed columns gets) marks nothing."""
    list(rows.values_list("pk", flat=True)[:1])


def _delete_run_row(pk: int | list[int]) -> None:
    """The run row and what cascades from it, but for its events and versions, which the batches
    deleted: the cascade's ``DELETE ... WHERE run_id IN (pk)`` found none, after walking the index
    entries of every deleted one (8.6 s for a ten-million-event run's events before a VACUUM).
    Nothing can have been added meanwhile: the run was renamed, under its lock, before the first
    batch."""
    rows = list(Run.unscoped.filter(pk__in=pk if isinstance(pk, list) else [pk]))
    if not rows:
        return
    collector = Collector(using=router.db_for_write(Run))
    collector.collect(rows)
    batched = (Event, *_VERSIONED)
    collector.fast_deletes = [q for q in collector.fast_deletes if getattr(q, "model", None) not in batched]
    collector.delete()


def old_runs(workspace: Workspace | None, before: datetime) -> list[tuple[Workspace, str]]:
    """Ended runs that ended (or, without an end, started) before ``before``."""
    query = Run.unscoped.filter(status__in=TERMINAL_STATUSES).filter(
        Q(ended_at__lt=before) | Q(ended_at__isnull=True, started_at__lt=before)
    )
    query = query.exclude(workspace__slug=PURGING_SLUG)
    if workspace is not None:
        query = query.filter(workspace=workspace)
    return [(row.workspace, row.run_id) for row in query.select_related("workspace").order_by("pk")]


def do_prune_runs(
    *, before: datetime, workspace: Workspace | None = None, batch: int = PURGE_BATCH
) -> PurgeReport:
    """Purge every ended run older than ``before`` (one workspace, or all), and finish interrupted
    purges. On PostgreSQL, the event partitions whose every run goes are dropped first
    (:func:`drop_partitions`); the runs left are purged one by one in batches."""
    total = resume_purges(batch=batch)
    drop_partitions(workspace=workspace, before=before, batch=batch, report=total)
    for owner, run_id in old_runs(workspace, before):
        report = do_purge_run(workspace=owner, run_id=run_id, batch=batch)
        total.runs += 1
        total.events += report.events
        total.transactions += report.transactions
        if report.longest_transaction_ms > total.longest_transaction_ms:
            total.longest_transaction_ms, total.longest_step = (
                report.longest_transaction_ms,
                report.longest_step,
            )
        for step, took in report.step_ms.items():
            total.step_ms[step] = max(took, total.step_ms.get(step, 0.0))
        total.run_ids.append(run_id)
    return total


def _eligible(workspace: Workspace | None, before: datetime) -> Q:
    """What :func:`old_runs` selects, as a condition (the runs a prune deletes)."""
    query = Q(status__in=TERMINAL_STATUSES) & (
        Q(ended_at__lt=before) | Q(ended_at__isnull=True, started_at__lt=before)
    )
    query &= ~Q(workspace__slug=PURGING_SLUG)
    return query & Q(workspace=workspace) if workspace is not None else query


def drop_partitions(
    *, workspace: Workspace | None, before: datetime, batch: int = PURGE_BATCH, report: PurgeReport
) -> list[str]:
    """PostgreSQL: drop every event partition (runs.actions.partitions) whose range is closed (no
    new run can get a key in it) and whose every run this prune deletes. A range that holds a
    run the prune keeps is not dropped: a run still running or waiting at a gate, one that ended
    after ``before``, one of another workspace (``workspace`` given), one another purge is
    deleting; its deleted runs go one by one in batches after this, as on SQLite. A run is never
    split between partitions (the range is by its key), so a kept run keeps every event.

    For each range dropped: its runs are hidden one by one (step 1 of :func:`do_purge_run`:
    they leave their workspaces and rollups), the partition is detached and dropped (its events
    gone in one catalog change, not deleted row by row), then steps 3 to 5 run for each of them
    (the events' step finds none). Interrupted, the hidden runs are finished by
    :func:`resume_purges` (their events in batches if the partition is still attached) and a
    range detached but not dropped by :func:`partitions.finish_detaches`."""
    if not partitions.partitioned():
        return []
    partitions.finish_detaches()
    keep = ~_eligible(workspace, before)
    dropped: list[str] = []
    with connection.cursor() as cursor:
        closed = [part for part in partitions.partitions(cursor) if partitions.closed(cursor, part)]
    for part in closed:
        runs = Run.unscoped.filter(pk__lt=part.high)
        if part.low is not None:
            runs = runs.filter(pk__gte=part.low)
        if runs.filter(keep).exists():
            continue
        _hide_all(runs, report)
        started = time.perf_counter()
        partitions.detach_and_drop(part)
        report.timed(started, "drop a partition")
        for chunk in _chunks(runs):  # all hidden now: their versions, cached answers, run rows
            _purge_rest(chunk, batch, report)
        dropped.append(part.name)
    report.partitions_dropped += dropped
    return dropped


HIDE_CHUNK = 500  # runs of a dropped partition hidden (and their rows deleted) per transaction


def _chunks(runs, chunk: int = HIDE_CHUNK):
    """The runs of ``runs`` by key, ``chunk`` at a time (a range may hold a million)."""
    last = None
    while True:
        page = runs.order_by("pk") if last is None else runs.filter(pk__gt=last).order_by("pk")
        rows = list(page[:chunk])
        if not rows:
            return
        yield rows
        last = rows[-1].pk


def _hide_all(runs, report: PurgeReport) -> None:
    """Step 1 for the runs of a partition about to be dropped, HIDE_CHUNK runs a transaction."""
    purging = _purging_workspace()
    for chunk in _chunks(runs.exclude(workspace=purging)):
        started = time.perf_counter()
        with transaction.atomic():
            keys = [run.pk for run in chunk]
            locked = list(
                Run.unscoped.select_for_update().filter(pk__in=keys).exclude(workspace=purging).order_by("pk")
            )
            for run in locked:
                notify_on_commit(RunChange.of(run, 0, 0, status="deleted"))
            rollups.forget_runs(locked)  # what forget_run does for each, one write per rollup table
            hidden = Concat(
                Value("purging-"), Cast("id", CharField()), Value("-ws"), Cast("workspace_id", CharField())
            )
            Run.unscoped.filter(pk__in=[run.pk for run in locked]).update(workspace=purging, run_id=hidden)
        report.timed(started, "hide the runs")
        report.runs += len(locked)
        report.events += sum(run.event_count for run in locked)
        report.run_ids += [run.run_id for run in locked]


def _purge_rest(chunk: list[Run], batch: int, report: PurgeReport) -> None:
    """Steps 3 to 5 for hidden runs whose events are gone with their partition."""
    keys = [run.pk for run in chunk]
    for model in _VERSIONED:
        _purge_versions(model, keys, batch, report)
    _purge_versions(CachedResponse, keys, batch, report, "cached responses")
    for rows_model in (*_VERSIONED, CachedResponse):
        _pass_over(rows_model.objects.filter(run_id__in=keys).order_by())
    started = time.perf_counter()
    with transaction.atomic():
        _delete_run_row(keys)
    report.timed(started, "the run rows")


def resume_purges(*, batch: int = PURGE_BATCH) -> PurgeReport:
    """Finish the purges that stopped after hiding their run (its workspace's id is in the hidden
    id: a run hidden by an older version still has its remaining calls counted there)."""
    report = PurgeReport()
    for run in Run.unscoped.filter(workspace__slug=PURGING_SLUG).order_by("pk"):
        run.workspace_id = int(run.run_id.rsplit("-ws", 1)[1])
        with transaction.atomic():
            rollups.forget_calls(run)  # nothing left to subtract unless an older version hid it
        _purge_rows(run, batch, report)
        report.runs += 1
    return report
