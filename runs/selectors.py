"""Reads. Every selector takes the workspace (or a run already fetched through it) first."""

from __future__ import annotations

from collections.abc import Iterator

from runs.engine.fold import apply_event, fold
from runs.engine.state import RunState
from runs.models import Event, Run, RunFork, RunParent, RunSnapshot, Workspace, loads


class RunNotFound(Exception):
    code = "UNKNOWN_RUN"


def get_run(workspace: Workspace, run_id: str) -> Run:
    """A run of this workspace; another workspace's run is exactly as missing as a missing one."""
    try:
        return Run.objects.for_workspace(workspace).get(pk=run_id)
    except Run.DoesNotExist:
        raise RunNotFound(run_id) from None


def iter_event_bodies(
    run: Run, *, after_seq: int = 0, upto_seq: int | None = None, chunk: int = 2000
) -> Iterator[dict]:
    """Protocol events in seq order, read in keyset-paginated chunks (bounded memory)."""
    last = after_seq
    while True:
        qs = Event.objects.filter(run=run, seq__gt=last)
        if upto_seq is not None:
            qs = qs.filter(seq__lte=upto_seq)
        rows = list(qs.order_by("seq").values_list("seq", "body")[:chunk])
        if not rows:
            return
        for _seq, body in rows:
            yield loads(body)
        last = rows[-1][0]
        if len(rows) < chunk:
            return


def _start_doc(run: Run) -> dict:
    from runs.actions import initial_run_doc

    return initial_run_doc(loads(run.import_doc) if run.import_doc else run.run_doc)


def fold_run(run: Run) -> RunState:
    """The projection recomputed from the stored events (what the run row must always equal)."""
    return state_at(run, run.last_seq, use_snapshots=False)


def state_at(run: Run, seq: int, *, use_snapshots: bool = True) -> RunState:
    """The projection as it was right after event `seq` (0 = before any event).

    Starts from the nearest stored snapshot at or below `seq`, so the work is bounded by the
    snapshot interval rather than by the length of the run.
    """
    seq = max(0, min(seq, run.last_seq))
    snapshot = None
    if use_snapshots:
        snapshot = RunSnapshot.objects.filter(run=run, seq__lte=seq).order_by("-seq").first()
    if snapshot is not None:
        state = RunState.from_json(loads(snapshot.state))
        current = snapshot.seq
    else:
        state = fold(_start_doc(run), [])
        current = 0
    _adopt_import_doc(run, state, current)
    for event in iter_event_bodies(run, after_seq=current, upto_seq=seq):
        apply_event(state, event)
        current += 1
        _adopt_import_doc(run, state, current)
    return state


def _adopt_import_doc(run: Run, state: RunState, seq: int) -> None:
    """Once all of a bundle's events are folded, its run document (what its hash covered) is the truth."""
    if run.import_seq is not None and seq == run.import_seq and run.import_doc:
        state.run = loads(run.import_doc)


def children(workspace: Workspace, run_id: str) -> list[Run]:
    child_ids = RunParent.objects.filter(parent_run_id=run_id, child__workspace=workspace).values("child_id")
    return list(Run.objects.for_workspace(workspace).filter(pk__in=child_ids).order_by("started_at"))


def parents(workspace: Workspace, run: Run) -> list[tuple[str, Run | None]]:
    ids = list(run.parent_links.values_list("parent_run_id", flat=True))
    found = {r.pk: r for r in Run.objects.for_workspace(workspace).filter(pk__in=ids)}
    return [(pid, found.get(pid)) for pid in ids]


def descendants(workspace: Workspace, run_id: str) -> list[Run]:
    """Every run below `run_id` in the lineage graph, breadth first, each once."""
    seen: set[str] = {run_id}
    frontier = [run_id]
    out: list[Run] = []
    while frontier:
        child_ids = (
            set(
                RunParent.objects.filter(parent_run_id__in=frontier, child__workspace=workspace).values_list(
                    "child_id", flat=True
                )
            )
            - seen
        )
        seen |= child_ids
        batch = list(Run.objects.for_workspace(workspace).filter(pk__in=child_ids).order_by("started_at"))
        out.extend(batch)
        frontier = [r.pk for r in batch]
    return out


def get_fork(workspace: Workspace, run_id: str) -> RunFork:
    """The fork record of a run of this workspace (RunNotFound when the run is missing or no fork)."""
    run = get_run(workspace, run_id)
    fork = RunFork.objects.select_related("run", "source").filter(run=run).first()
    if fork is None:
        raise RunNotFound(run_id)
    return fork
