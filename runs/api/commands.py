"""Fine-grained commands on a run: what a host application should use.

Each returns the seqs it appended and the run's new revision. With an ``Idempotency-Key``
header a retried request gets the first response.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from ninja import Query, Router, Schema
from pydantic import Field

from runs import actions
from runs.actions import budgets
from runs.actions.gatepolicy import do_append_host_events, do_decide_gate
from runs.actions.permissions import Action
from runs.api.errors import ApiError
from runs.api.responses import append_result, readable_run, require, write_result
from runs.api.schemas import (
    AnnotateIn,
    AppendEventsIn,
    CancelIn,
    CancelResult,
    ErrorOut,
    EventsPage,
    GateEditIn,
    PatchArtifactIn,
    ResolveGateIn,
    WriteArtifactIn,
    WriteResult,
)
from runs.engine import commands as cmd
from runs.protocol.canonical import wire_bytes
from runs.protocol.errors import ErrorCode
from runs.selectors.runs import iter_event_bodies

router = Router(tags=["commands"])

ERRORS = {
    400: ErrorOut,
    401: ErrorOut,
    403: ErrorOut,
    404: ErrorOut,
    409: ErrorOut,
    413: ErrorOut,
    429: ErrorOut,
}
MAX_EVENTS_PAGE = 5000


class EventsQuery(Schema):
    after_seq: int = Field(default=0, ge=0, description="Return events with seq > after_seq.")
    limit: int = Field(default=1000, ge=1, le=MAX_EVENTS_PAGE)


@router.get(
    "/{runid:run_id}/events", response={200: EventsPage, **ERRORS}, summary="Read events incrementally"
)
def list_events(request: HttpRequest, run_id: str, query: Query[EventsQuery]):
    caller = require(request, Action.VIEW_RUN)
    run = readable_run(caller, run_id)
    after = min(query.after_seq, run.last_seq)
    upto = min(after + query.limit, run.last_seq)
    events = [
        {"seq": after + i + 1, "event": body}
        for i, body in enumerate(iter_event_bodies(run, after_seq=after, upto_seq=upto))
    ]
    page = {
        "runId": run.run_id,
        "afterSeq": query.after_seq,
        "lastSeq": run.last_seq,
        "nextAfterSeq": upto,
        "hasMore": upto < run.last_seq,
        "events": events,
    }
    return HttpResponse(wire_bytes(page), content_type="application/json")


@router.post(
    "/{runid:run_id}/events",
    response={200: WriteResult, **ERRORS},
    summary="Append a batch of events",
    description=(
        "Events as the host recorded them, checked by the engine. A `human_gate_resolved` that decides "
        "a gate already waiting on the run is a reviewer's decision: it needs the `review` scope (403 "
        "`FORBIDDEN` otherwise), and the gate's policy applies (409 `VOTES_REQUIRED` where it counts "
        "votes: decide through `POST /api/runs/{id}/gates/resolve`; 403 `SEPARATION_OF_DUTIES`). A "
        "gate's request and decision appended together are the host's own record. Nothing is written "
        "on a refusal."
    ),
)
def append_events(request: HttpRequest, run_id: str, payload: AppendEventsIn):
    caller = require(request, Action.APPEND_EVENTS)
    result = do_append_host_events(
        workspace=caller.workspace,
        run_id=run_id,
        events=payload.events,
        actor=caller.actor,
        may_decide=caller.may(Action.RESOLVE_GATE),
    )
    # calls the host made itself, past the workspace's monthly cap: recorded, the month's alert raised
    budgets.alert_after_reported(caller.workspace, payload.events, source="the SDK")
    return append_result(result)


def _edit_command(edit: GateEditIn | None) -> cmd.WriteArtifact | cmd.PatchArtifact | None:
    if edit is None:
        return None
    if edit.patch is not None:
        if edit.fromVersion is None:
            raise ApiError(ErrorCode.INVALID_INPUT, "an edit with a patch needs fromVersion")
        return cmd.PatchArtifact(key=edit.artifactKey, from_version=edit.fromVersion, patch=edit.patch)
    if edit.typeId is None:
        raise ApiError(ErrorCode.INVALID_INPUT, "an edit with data needs typeId")
    return cmd.WriteArtifact(key=edit.artifactKey, type_id=edit.typeId, data=edit.data)


@router.post(
    "/{runid:run_id}/gates/resolve",
    response={200: WriteResult, **ERRORS},
    summary="Resolve a gate",
    description=(
        "Decide a waiting gate under its policy (quorum, separation of duties). A run's budget gate "
        "(gate CHECKPOINT, checkpoint `budget`) goes on only with a new budget: approving it here is "
        "refused with 409 `BUDGET_LIMIT_REQUIRED` (nothing is written); raise the budget with "
        '`POST /api/runs/{id}/budget` `{"limit": "0.05"}`, or reject it to stop the run at its budget.'
    ),
)
def resolve_gate(request: HttpRequest, run_id: str, payload: ResolveGateIn):
    caller = require(request, Action.RESOLVE_GATE)
    decided = do_decide_gate(  # under the gate's policy (quorum, separation of duties)
        workspace=caller.workspace,
        run_id=run_id,
        step_id=payload.stepId,
        gate=payload.gate,
        decision=payload.decision,
        note=payload.note,
        checkpoint=payload.checkpoint,
        edit=_edit_command(payload.edit),
        actor=caller.actor,
        channel="api",
    )
    return append_result(decided.result)


@router.post(
    "/{runid:run_id}/artifacts", response={200: WriteResult, **ERRORS}, summary="Write an artifact version"
)
def write_artifact(request: HttpRequest, run_id: str, payload: WriteArtifactIn):
    caller = require(request, Action.EDIT_ARTIFACT)
    command = cmd.WriteArtifact(
        key=payload.artifactKey,
        type_id=payload.typeId,
        data=payload.data,
        idempotency_key=payload.idempotencyKey,
        step_id=payload.stepId,
    )
    return append_result(
        actions.do_command(workspace=caller.workspace, run_id=run_id, command=command, actor=caller.actor)
    )


@router.post(
    "/{runid:run_id}/artifacts/{runid:artifact_key}/patch",
    response={200: WriteResult, **ERRORS},
    summary="Patch an artifact (RFC 6902)",
)
def patch_artifact(request: HttpRequest, run_id: str, artifact_key: str, payload: PatchArtifactIn):
    caller = require(request, Action.EDIT_ARTIFACT)
    options: dict[str, str] = {}
    if payload.idempotencyKey is not None:
        options["idempotency_key"] = payload.idempotencyKey
    if payload.stepId is not None:
        options["step_id"] = payload.stepId
    command = cmd.PatchArtifact(
        key=artifact_key, from_version=payload.fromVersion, patch=payload.patch, **options
    )
    return append_result(
        actions.do_command(workspace=caller.workspace, run_id=run_id, command=command, actor=caller.actor)
    )


@router.post("/{runid:run_id}/annotations", response={200: WriteResult, **ERRORS}, summary="Annotate a run")
def annotate(request: HttpRequest, run_id: str, payload: AnnotateIn):
    caller = require(request, Action.ANNOTATE)
    command = cmd.Annotate(text=payload.text, tags=payload.tags)
    return append_result(
        actions.do_command(workspace=caller.workspace, run_id=run_id, command=command, actor=caller.actor)
    )


@router.post(
    "/{runid:run_id}/cancel",
    response={200: CancelResult, **ERRORS},
    summary="Cancel a run (optionally its tree)",
)
def cancel(request: HttpRequest, run_id: str, payload: CancelIn):
    caller = require(request, Action.CANCEL_RUN)
    run = readable_run(caller, run_id)
    before = run.last_seq
    if payload.cascade:
        report = actions.do_cancel_tree(
            workspace=caller.workspace, run_id=run_id, actor=caller.actor, reason=payload.reason
        )
        cancelled, skipped = report.cancelled, [[rid, why] for rid, why in report.skipped]
    else:
        actions.do_command(
            workspace=caller.workspace,
            run_id=run_id,
            command=cmd.CancelRun(reason=payload.reason),
            actor=caller.actor,
        )
        cancelled, skipped = [run_id], []
    run = readable_run(caller, run_id)
    result = write_result(run, list(range(before + 1, run.last_seq + 1)))
    return {**result, "cancelled": cancelled, "skipped": skipped}
