"""Reads of datasets and experiments, workspace first (another workspace's answers 404 as missing),
and the run reads that turn runs, gates and events into dataset items."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db.models import Max, QuerySet

from evals.models import Dataset, DatasetItemRevision, Experiment, ExperimentItem, ItemOp, ItemStatus
from runs.engine import programs
from runs.models import Event, ForkMode, Run, RunFork, Workspace
from runs.presenters.errors import split
from runs.protocol.values import loads
from runs.selectors.run_list import RunListFilters, runs_matching
from runs.selectors.runs import find_run, runs_of, start_doc, state_at

DATASET_NOT_FOUND = "DATASET_NOT_FOUND"
EXPERIMENT_NOT_FOUND = "EXPERIMENT_NOT_FOUND"


class EvalNotFound(LookupError):
    def __init__(self, code: str, what: str) -> None:
        super().__init__(what)
        self.code = code
        self.what = what


def datasets_of(workspace: Workspace) -> QuerySet[Dataset]:
    return Dataset.objects.filter(workspace=workspace)


def get_dataset(workspace: Workspace, public_id: str) -> Dataset:
    # a NUL names no dataset (and PostgreSQL cannot compare text holding one)
    found = (
        None
        if "\x00" in public_id
        else Dataset.objects.filter(workspace=workspace, public_id=public_id).first()
    )
    if found is None:
        raise EvalNotFound(DATASET_NOT_FOUND, f"no dataset {public_id!r} in this workspace")
    return found


def experiments_of(workspace: Workspace) -> QuerySet[Experiment]:
    return Experiment.objects.filter(workspace=workspace).select_related("dataset", "baseline")


def get_experiment(workspace: Workspace, public_id: str) -> Experiment:
    found = None if "\x00" in public_id else experiments_of(workspace).filter(public_id=public_id).first()
    if found is None:
        raise EvalNotFound(EXPERIMENT_NOT_FOUND, f"no experiment {public_id!r} in this workspace")
    return found


def revision_at(dataset: Dataset, when: datetime) -> int:
    """The dataset's revision as it stood at ``when`` (0: before anything was added)."""
    found = DatasetItemRevision.objects.filter(dataset=dataset, created_at__lte=when).aggregate(
        m=Max("revision")
    )
    return found["m"] or 0


def items_at(dataset: Dataset, revision: int) -> list[dict[str, Any]]:
    """The items as of ``revision``: the last change of each key at or before it, puts only,
    ordered by key. The same revision gives the same list forever (rows are only appended)."""
    latest: dict[str, DatasetItemRevision] = {}
    rows = DatasetItemRevision.objects.filter(dataset=dataset, revision__lte=revision).order_by("revision")
    for row in rows.iterator(chunk_size=2000):
        latest[row.item_key] = row
    return [item_json(row) for key, row in sorted(latest.items()) if row.op == ItemOp.PUT]


def item_json(row: DatasetItemRevision) -> dict[str, Any]:
    body = loads(row.body) if row.body else {}
    item: dict[str, Any] = {"id": row.item_key, "input": body.get("input"), "expected": body.get("expected")}
    for field in ("label", "note", "metadata"):
        if body.get(field) is not None:
            item[field] = body[field]
    item["source"] = {
        "runId": row.source_run_id or None,
        "eventId": row.source_event_id or None,
        "seq": row.source_seq,
    }
    item["revision"] = row.revision
    return item


def known_sources(dataset: Dataset, keys: set[str]) -> set[str]:
    """Which of these source keys the dataset already holds (in a put that was not deleted)."""
    if not keys:
        return set()
    rows = DatasetItemRevision.objects.filter(dataset=dataset, source_key__in=keys).values_list(
        "item_key", "source_key"
    )
    found = {item: source for item, source in rows}
    if not found:
        return set()
    last = dict(
        DatasetItemRevision.objects.filter(dataset=dataset, item_key__in=list(found))
        .order_by("revision")
        .values_list("item_key", "op")
    )
    return {found[item] for item, op in last.items() if op == ItemOp.PUT}


# runs as item sources --------------------------------------------------------------------------


def step_of(run: Run, step_id: str) -> dict[str, Any] | None:
    steps = (start_doc(run).get("workflowSnapshot") or {}).get("steps") or []
    return next((s for s in steps if s.get("id") == step_id), None)


def artifacts_at(run: Run, seq: int, keys: list[str]) -> dict[str, Any]:
    state = state_at(run, seq)
    return {key: state.artifacts[key].get("data") for key in keys if key in state.artifacts}


def output_value(values: dict[str, Any], keys: list[str]) -> Any:
    """One declared output: its data; several: {key: data}; none written: None."""
    if len(keys) == 1:
        return values.get(keys[0])
    return values or None


def _copied_history(run: Run) -> int:
    """Events of a fork that are its source's (copied): decisions there are not new labels. A
    replay's whole log repeats its source's decisions."""
    fork = RunFork.objects.filter(run=run).values_list("mode", "history").first()
    if fork is None:
        return 0
    mode, history = fork
    return run.last_seq if mode == ForkMode.REPLAY else history


def gate_resolutions(
    workspace: Workspace, step_id: str, *, workflow_id: str | None = None, limit: int = 1000
) -> list[tuple[Run, dict[str, Any], int, str]]:
    """(run, resolution event, seq, actor) of the decided gates of ``step_id``, oldest first,
    leaving out decisions a fork only copied from its source."""
    runs = runs_of(workspace)
    if workflow_id:
        runs = runs.filter(workflow_id=workflow_id)
    rows = (
        Event.objects.filter(run__in=runs, type="human_gate_resolved", step_id=step_id)
        .select_related("run")
        .order_by("recorded_at", "run_id", "seq")
    )
    out: list[tuple[Run, dict[str, Any], int, str]] = []
    copied: dict[int, int] = {}
    for row in rows.iterator(chunk_size=500):
        if row.run_id not in copied:
            copied[row.run_id] = _copied_history(row.run)
        if row.seq <= copied[row.run_id]:
            continue
        out.append((row.run, loads(row.body), row.seq, row.actor))
        if len(out) >= limit:
            break
    return out


def event_of(run: Run, *, seq: int | None = None, event_id: str | None = None) -> tuple[int, dict] | None:
    qs = Event.objects.filter(run=run)
    if seq is not None:
        row = qs.filter(seq=seq).values_list("seq", "body").first()
        return (row[0], loads(row[1])) if row else None
    for found_seq, body in qs.filter(body__contains=f'"id":"{event_id}"').values_list("seq", "body"):
        event = loads(body)
        if event.get("id") == event_id:
            return found_seq, event
    return None


def find_source_run(workspace: Workspace, run_id: str) -> Run | None:
    return find_run(workspace, run_id)


def experiment_items(experiment: Experiment) -> list[ExperimentItem]:
    return list(experiment.items.all().order_by("item_key"))


def filter_of(params: Any) -> RunListFilters:
    """The runs list's filters from a query string or form (the list's own parsing function)."""
    return RunListFilters.from_query(params)


def run_ids_matching(workspace: Workspace, filters: RunListFilters, *, limit: int) -> list[str]:
    """The ids of every run the runs list shows for ``filters``, across all its pages, newest
    first (the list's own query), at most ``limit`` of them."""
    qs = runs_matching(workspace, filters).order_by("-started_at", "-pk")
    return list(qs.values_list("run_id", flat=True)[:limit])


def count_matching(workspace: Workspace, filters: RunListFilters) -> int:
    return runs_matching(workspace, filters).count()


def failed_experiment_concern(workspace: Workspace, ref: str) -> str:
    """A prompt promotion's check (registered in EvalsConfig.ready): the experiment ``ref`` names
    failed on every one of its items, so it tested nothing. The sentence says how many items and
    the first reason, e.g. "Experiment tone failed on all 6 items: NOT_EXECUTABLE (...)."."""
    if not ref.startswith("exp_") or "\x00" in ref:
        return ""
    experiment = experiments_of(workspace).filter(public_id=ref).first()
    if experiment is None:
        return ""
    items = list(experiment.items.values_list("status", "error"))
    if not items or any(status != ItemStatus.FAILED for status, _ in items):
        return ""
    code, words = split(next((error for _, error in items if error), "") or experiment.error)
    because = f": {words[:1].lower()}{words[1:].rstrip('.')}" if words else ""
    because += f" ({code})" if code else ""
    n = len(items)
    return f"Experiment {experiment.name} failed on {'all ' if n > 1 else 'its '}{n} item{'s' if n != 1 else ''}{because}."


def unrunnable_workflows(workspace: Workspace, dataset: Dataset) -> tuple[int, int, list[str]]:
    """Whether an experiment can run the dataset's items here: (items with a source run whose
    workflow has step code in this workbench, all items, the workflows without step code). A
    host-replayed workflow's fork waits for its host: every such item would fail NOT_EXECUTABLE."""
    items = items_at(dataset, dataset.revision)
    run_ids = {(item.get("source") or {}).get("runId") for item in items} - {None}
    workflows = dict(runs_of(workspace).filter(run_id__in=run_ids).values_list("run_id", "workflow_id"))
    missing = sorted({w for w in workflows.values() if programs.get(w) is None})
    runnable = 0
    for item in items:
        run_id = (item.get("source") or {}).get("runId")
        workflow = workflows.get(run_id) if isinstance(run_id, str) else None
        if workflow is not None and workflow not in missing:
            runnable += 1
    return runnable, len(items), missing
