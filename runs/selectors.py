"""Reads. Every selector takes the workspace (or a run already fetched through it) first."""

from __future__ import annotations

from collections.abc import Iterator

from runs.engine.fold import apply_event, fold
from runs.engine.state import RunState
from runs.models import Event, Run, RunParent, RunSnapshot, Workspace, loads


class RunNotFound(Exception):
    code = "UNKNOWN_RUN"


def get_run(workspace: Workspace, run_id: str) -> Run:
    """A run of this workspace; another workspace's run is exactly as missing as a missing one."""
    try:
        return Run.objects.by_run_id(workspace, run_id).get()
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
    child_pks = RunParent.objects.filter(parent_run_id=run_id, child__workspace=workspace).values("child_id")
    return list(Run.objects.for_workspace(workspace).filter(pk__in=child_pks).order_by("started_at"))


def parents(workspace: Workspace, run: Run) -> list[tuple[str, Run | None]]:
    ids = list(run.parent_links.values_list("parent_run_id", flat=True))
    found = {r.run_id: r for r in Run.objects.for_workspace(workspace).filter(run_id__in=ids)}
    return [(pid, found.get(pid)) for pid in ids]


def descendants(workspace: Workspace, run_id: str) -> list[Run]:
    """Every run below `run_id` in the lineage graph, breadth first, each once."""
    seen: set[str] = {run_id}
    frontier = [run_id]
    out: list[Run] = []
    while frontier:
        batch = [
            run
            for run in Run.objects.for_workspace(workspace)
            .filter(parent_links__parent_run_id__in=frontier)
            .distinct()
            .order_by("started_at")
            if run.run_id not in seen
        ]
        seen |= {run.run_id for run in batch}
        out.extend(batch)
        frontier = [r.run_id for r in batch]
    return out


class AmbiguousRunId(Exception):
    """Several workspaces hold a run with this id (operator tools must name the workspace)."""

    code = "INVALID_INPUT"


def dangerously_find_run_any_workspace(run_id: str, workspace_slug: str | None = None) -> Run:
    """Operator tools (manage.py) only: a run by id across workspaces, or in the named one.

    Run ids are unique per workspace only; when several workspaces hold the id, the caller must
    name the workspace (AmbiguousRunId lists the candidates). Never use this behind a request.
    """
    qs = Run.objects.select_related("workspace").filter(run_id=run_id)
    if workspace_slug:
        qs = qs.filter(workspace__slug=workspace_slug)
    found = list(qs[:10])
    if not found:
        raise RunNotFound(run_id)
    if len(found) > 1:
        slugs = ", ".join(sorted(run.workspace.slug for run in found))
        raise AmbiguousRunId(f"run id {run_id!r} exists in several workspaces ({slugs}): pass --workspace")
    return found[0]
