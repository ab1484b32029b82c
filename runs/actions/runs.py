"""The one write path.

Every state change (REST, MCP, pages, playground, importer, CLI, the in-process session API) ends
here: lock the run row, load its projection, ask the engine, append the events with consecutive
seqs, update the projection, commit, and only then notify listeners.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from runs.actions import outbox, responsecache, rollups
from runs.actions.channels import record_channels
from runs.actions.core import (
    ActionError,
    Appender,
    AppendResult,
    engine_context,
    is_replay_state,
    load_state,
    lock_run,
    new_run_row,
    redaction_policy,
    save_new_run,
    set_projection,
    update_projection,
)
from runs.actions.forks import track_replay
from runs.actions.notify import RunChange, notify_on_commit
from runs.engine import commands as cmd
from runs.engine.check import append_in_place
from runs.engine.decide import decide
from runs.engine.errors import EngineError
from runs.engine.lifecycle import fork_run, new_run, with_title
from runs.engine.state import RunState
from runs.models import Run, Workspace, held_event_ids
from runs.protocol.errors import ErrorCode, ProtocolError
from runs.protocol.redaction import redact_events
from runs.protocol.validate import validate_event
from runs.protocol.values import dumps, loads
from runs.selectors.runs import descendants, fold_run, state_at

# --------------------------------------------------------------------------------------------
# Projection bookkeeping


# --------------------------------------------------------------------------------------------
# Actions


def do_start_run(
    *,
    workspace: Workspace,
    workflow: dict,
    actor: str = "",
    run_id: str | None = None,
    subject: dict | None = None,
    metadata: dict | None = None,
    tags: list[str] | None = None,
    context: dict | None = None,
    title: str | None = None,
) -> Run:
    ctx = engine_context()
    try:
        state = new_run(
            ctx=ctx,
            workflow=workflow,
            run_id=run_id,
            subject=subject,
            metadata=metadata,
            tags=tags,
            context=context,
            title=title,
        )
    except (EngineError, ProtocolError) as exc:
        raise ActionError.wrap(exc) from exc
    with transaction.atomic():
        run = new_run_row(workspace=workspace, state=state, actor=actor)
        save_new_run(run)
        outbox.record_new_run(workspace, run, state, actor=actor)  # a gate waiting from the start
        notify_on_commit(RunChange.of(run, 0, 0))
    return run


def do_set_run_title(*, workspace: Workspace, run_id: str, title: str) -> Run:
    """Name a run (any status): ``run.metadata["workbench.title"]`` in its document, the title
    column of the projection. No trace event: the protocol has none for run metadata, and the
    document (with its metadata) is what a bundle's hash covers, so an export carries the title."""
    with transaction.atomic():
        run = lock_run(workspace, run_id)
        state = load_state(run)
        try:
            state.run = with_title(state.run, title)
        except EngineError as exc:
            raise ActionError.wrap(exc) from exc
        if run.import_doc:
            # an imported run folds from the bundle's document: it must name the title as well
            run.import_doc = dumps(with_title(loads(run.import_doc), title))
        set_projection(run, state)
        run.save()
        notify_on_commit(RunChange.of(run, 0, 0))
    return run


def do_command(
    *, workspace: Workspace, run_id: str, command: Any, actor: str = "", channel: str = "page"
) -> AppendResult:
    """Run one engine command against a run: the single door for every state change. ``channel``
    says where a gate decision came from ("page", "api", "judge", ...): the outbox's
    ``gate.resolved`` names it, never the protocol event."""
    return do_commands(workspace=workspace, run_id=run_id, commands=[command], actor=actor, channel=channel)


def do_commands(
    *, workspace: Workspace, run_id: str, commands: Iterable[Any], actor: str = "", channel: str = "page"
) -> AppendResult:
    """Several commands in one transaction: all of them land, or none does."""
    ctx = engine_context()
    with transaction.atomic():
        run = lock_run(workspace, run_id)
        state = load_state(run)
        watcher = outbox.watch(workspace, run, state)  # one query; None when nobody listens
        appender = Appender(run, state, actor)
        policy = redaction_policy(state)
        try:
            for command in commands:
                if isinstance(command, cmd.AppendEvents):
                    # A host's batch: shape-check, then check and apply each event in place (a
                    # failure rolls the whole transaction back, so no trial copy is needed).
                    for i, event in enumerate(command.events):
                        validate_event(event, f"events[{i}]", code=ErrorCode.INVALID_TRACE_EVENT)
                    _refuse_duplicate_event_ids(run, command.events)
                    events = command.events if policy is None else redact_events(command.events, policy)
                    append_in_place(state, events, ctx, on_applied=appender.record, shape_checked=True)
                    continue
                for event in decide(state, command, ctx):
                    appender.append(event if policy is None else redact_events([event], policy)[0])
        except (EngineError, ProtocolError) as exc:
            raise ActionError.wrap(exc) from exc
        if not appender.events:
            return AppendResult(run=run, state=state)
        if is_replay_state(state):
            track_replay(run, appender, ctx)
        first, last = appender.save(keep_rows=True)
        update_projection(run, state, event_rows=appender.event_rows)
        record_channels(run, appender.events, first, channel)  # beside each gate decision
        if watcher is not None:
            watcher.record(
                appender.events, state, actor=actor, channel=channel
            )  # the outbox, in this transaction
        notify_on_commit(RunChange.of(run, first, last, events=appender.events, actor=actor))
    return AppendResult(run=run, state=state, events=appender.events, first_seq=first, last_seq=last)


DUPLICATE_EVENT_ID = "DUPLICATE_EVENT_ID"


def _refuse_duplicate_event_ids(run: Run, events: Sequence[dict]) -> None:
    """A host's events must carry ids new to the run: a retried batch whose first attempt did land
    is refused (409 DUPLICATE_EVENT_ID), never appended twice under new seqs. (Bundles may repeat
    ids, as the reference's exports sometimes do; they are stored as they are, not checked here.)"""
    seen: set[str] = set()
    for i, event in enumerate(events):
        event_id = event["id"]
        if event_id in seen:
            raise ActionError(
                DUPLICATE_EVENT_ID, f"event id {event_id!r} appears twice in the batch", f"events[{i}].id"
            )
        seen.add(event_id)
    taken = held_event_ids(run, list(seen))
    if taken:
        raise ActionError(
            DUPLICATE_EVENT_ID,
            f"the run already holds event id(s) {', '.join(repr(t) for t in sorted(taken))}",
            "events",
        )


def do_append_events(
    *, workspace: Workspace, run_id: str, events: list[dict], actor: str = ""
) -> AppendResult:
    return do_command(
        workspace=workspace, run_id=run_id, command=cmd.AppendEvents(events=tuple(events)), actor=actor
    )


def do_fork_from_state(
    *,
    workspace: Workspace,
    parent_run_id: str,
    actor: str = "",
    from_seq: int | None = None,
    from_step_id: str | None = None,
    new_run_id: str | None = None,
    extra_parent_ids: Sequence[str] = (),
) -> Run:
    """Branch a run (optionally as it was at `from_seq`): the child starts with its parent's
    workflow snapshot, latest artifacts, rules and subject, and records `run_forked`."""
    ctx = engine_context()
    with transaction.atomic():
        parent = lock_run(workspace, parent_run_id)
        for extra in extra_parent_ids:
            if not Run.objects.by_run_id(workspace, extra).exists():
                raise ActionError(ErrorCode.UNKNOWN_RUN, f"no run {extra!r}")
        parent_state = state_at(parent, from_seq) if from_seq is not None else load_state(parent)
        try:
            child_state, events = fork_run(
                parent_state,
                ctx=ctx,
                new_run_id=new_run_id,
                from_seq=from_seq,
                from_step_id=from_step_id,
                extra_parents=tuple(extra_parent_ids),
            )
        except (EngineError, ProtocolError) as exc:
            raise ActionError.wrap(exc) from exc
        # The child's first events re-write the parent's latest artifacts and rule sets.
        child = new_run_row(workspace=workspace, state=child_state, actor=actor)
        save_new_run(child)
        appender = Appender(child, child_state, actor)
        for event in events:
            appender.append(event)
        first, last = appender.save()
        update_projection(child, child_state)
        outbox.record_new_run(workspace, child, child_state, actor=actor)
        notify_on_commit(RunChange.of(child, first, last))
    return child


@dataclass
class CancelReport:
    cancelled: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (run id, why)


def do_cancel_tree(
    *, workspace: Workspace, run_id: str, actor: str = "", reason: str | None = None
) -> CancelReport:
    """Cancel a run and every descendant; finished runs are skipped and reported, not touched."""
    root = Run.objects.by_run_id(workspace, run_id).first()
    if root is None:
        raise ActionError(ErrorCode.UNKNOWN_RUN, f"no run {run_id!r}")
    report = CancelReport()
    for run in [root, *descendants(workspace, run_id)]:
        if run.is_finished:
            report.skipped.append((run.run_id, f"already {run.status}"))
            continue
        try:
            do_command(
                workspace=workspace, run_id=run.run_id, command=cmd.CancelRun(reason=reason), actor=actor
            )
        except ActionError as exc:
            report.skipped.append((run.run_id, str(exc)))
        else:
            report.cancelled.append(run.run_id)
    return report


def do_delete_run(*, workspace: Workspace, run_id: str) -> None:
    with transaction.atomic():
        run = lock_run(workspace, run_id)
        change = RunChange.of(run, 0, 0, status="deleted")
        responsecache.forget_run(run)  # what it recorded goes with it: no replay brings it back
        rollups.forget_run(run)  # its calls and the run leave the workspace's rollups
        run.delete()
        notify_on_commit(change)


def rebuild_projection(run: Run) -> RunState:
    """Recompute a run's projection by folding its stored events (the fold is the truth)."""
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        state = fold_run(run)
        imported = run.imported_engine
        set_projection(run, state)
        run.imported_engine = imported
        run.save()
    return state


def projection_matches_fold(run: Run) -> bool:
    """True when the stored projection equals the fold of the stored events."""
    return loads(run.state) == loads(dumps(fold_run(run).to_json()))
