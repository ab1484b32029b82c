"""Storing a whole RunStoreState (the reference's HTTP adapter body) through the one write path.

A new run is imported exactly like a bundle (the state is turned into a bundle and goes
through the importer's full validation). For an existing run the store is append-only: the
stored trace must be a prefix of the new one, and only the new suffix is appended, validated
by the engine like any other events. The engine maps in the body (stepStatus, gateState,
idempotency) are derived again from the trace and not trusted for existing runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction

from runs.actions import ActionError, do_import_bundle
from runs.actions.gatepolicy import do_append_host_events
from runs.models import Run, Workspace
from runs.protocol.canonical import wire_bytes
from runs.protocol.errors import ErrorCode, ProtocolError
from runs.protocol.integrity import seal_bundle
from runs.protocol.runstore import runstore_to_bundle
from runs.selectors.runs import iter_event_bodies

CONFLICT = "CONFLICT"
PRECONDITION_FAILED = "PRECONDITION_FAILED"


@dataclass
class PutResult:
    run: Run
    created: bool
    seqs: list[int] = field(default_factory=list)


def _revision_matches(expected: frozenset[int] | str | None, run: Run | None) -> bool:
    if expected is None:
        return True
    if run is None:
        return False  # If-Match on a run that does not exist (RFC 9110: the condition is false)
    return expected == "*" or run.revision in expected


def do_put_run_state(
    *,
    workspace: Workspace,
    run_id: str,
    state: object,
    actor: str = "",
    expected_revision: frozenset[int] | str | None = None,
    may_decide: bool = True,
) -> PutResult:
    """Store the next revision of run ``run_id`` from a RunStoreState body.

    Raises ActionError: INVALID_RUN_STATE (not a state, or ``run.id`` differs from ``run_id``),
    PRECONDITION_FAILED (``expected_revision`` does not name the stored revision), CONFLICT
    (the stored trace is not a prefix of the new one), and every code of the importer and the
    engine for invalid content.
    """
    if not isinstance(state, dict) or not isinstance(state.get("run"), dict):
        raise ActionError(
            ErrorCode.INVALID_RUN_STATE, "a run store state is an object with a run object", "run"
        )
    body_id = state["run"].get("id")
    if body_id != run_id:
        raise ActionError(
            ErrorCode.INVALID_RUN_STATE,
            f"run.id {body_id!r} differs from the run id in the URL {run_id!r}",
            "run.id",
        )
    trace = state.get("trace", [])
    if not isinstance(trace, list):
        raise ActionError(ErrorCode.INVALID_RUN_STATE, "trace must be an array of events", "trace")
    with transaction.atomic():
        run = Run.objects.by_run_id(workspace, run_id).select_for_update().first()
        if not _revision_matches(expected_revision, run):
            current = "no stored revision" if run is None else f"the stored revision is {run.revision}"
            raise ActionError(PRECONDITION_FAILED, f"If-Match does not match: {current}")
        if run is None:
            return _create(workspace=workspace, state=state, actor=actor)
        return _extend(workspace=workspace, run=run, trace=trace, actor=actor, may_decide=may_decide)


def _create(*, workspace: Workspace, state: dict, actor: str) -> PutResult:
    try:
        bundle = runstore_to_bundle(state)
        data = wire_bytes(seal_bundle(bundle))  # the body's member order is kept (GET gives it back)
    except ProtocolError as exc:
        raise ActionError.wrap(exc) from exc
    except (KeyError, TypeError, AttributeError) as exc:
        raise ActionError(ErrorCode.INVALID_RUN_STATE, f"malformed run store state ({exc})") from exc
    run = do_import_bundle(workspace=workspace, data=data, actor=actor)
    return PutResult(run=run, created=True, seqs=list(range(1, run.last_seq + 1)))


def _extend(*, workspace: Workspace, run: Run, trace: list, actor: str, may_decide: bool) -> PutResult:
    stored = 0
    for i, event in enumerate(iter_event_bodies(run)):
        if i >= len(trace):
            raise ActionError(
                CONFLICT,
                f"the new trace has {len(trace)} events but {run.last_seq} are stored; traces only grow",
            )
        if trace[i] != event:
            raise ActionError(
                CONFLICT,
                f"the stored trace is not a prefix of the new one: event {i} (seq {i + 1}) differs",
                f"trace[{i}]",
            )
        stored += 1
    suffix = trace[stored:]
    if not suffix:
        return PutResult(run=run, created=False, seqs=[])
    result = do_append_host_events(
        workspace=workspace, run_id=run.run_id, events=suffix, actor=actor, may_decide=may_decide
    )
    return PutResult(run=result.run, created=False, seqs=result.seqs)
