"""The run store, compatible with the reference's HTTP run repository, plus starting a run.

GET/PUT bodies are RunStoreState; PUT is append-only (409 CONFLICT when the stored trace is not
a prefix of the new one) and honours ``If-Match: "<revision>"`` (412 on mismatch).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from django.http import HttpRequest, HttpResponse
from ninja import Query, Router, Schema
from ninja.responses import Status
from pydantic import Field

from runs import actions
from runs.actions.permissions import Action
from runs.actions.runstore import do_put_run_state
from runs.api.errors import ApiError
from runs.api.paging import NEXT_DOC, keyset
from runs.api.responses import etag_for, parse_if_match, readable_run, require, write_result
from runs.api.schemas import ErrorOut, RunStoreState, RunUpdateIn, SavedRunMeta, StartRunIn, WriteResult
from runs.models import Run, RunStatus
from runs.protocol.canonical import parse_json, wire_bytes
from runs.protocol.errors import ErrorCode
from runs.protocol.runstore import bundle_to_runstore
from runs.protocol.values import loads
from runs.selectors.bundles import build_bundle
from runs.selectors.run_list import REJECTED_FILTER, RunListFilters, keyset_page, runs_matching

router = Router(tags=["run store"])

ERRORS = {400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 429: ErrorOut}
MAX_LIST = 500  # runs a page holds at most; the Link header's next page goes on
TRACE_ID = re.compile(r"[0-9a-fA-F]{32}")


class ListQuery(Schema):
    limit: int = Field(
        default=100, description="How many runs a page holds, newest first (clamped to 1..500)."
    )
    cursor: str = Field(default="", description="The opaque cursor of the `Link` header's next page.")
    status: str = Field(
        default="",
        description="Only runs of this status (`running`, `completed`, `failed`, `cancelled`), "
        "or `rejected`: runs with a rejected gate.",
    )
    workflow: str = Field(default="", description="Only runs of this workflow id.")
    tag: str = Field(default="", description="Only runs carrying this tag.")
    startedAfter: datetime | None = Field(
        default=None, description="Only runs started (created) at or after this instant (ISO 8601)."
    )
    startedBefore: datetime | None = Field(
        default=None, description="Only runs started (created) before this instant (ISO 8601)."
    )
    traceId: str = Field(
        default="",
        description="The run an OTLP trace became (32 hex digits; a trace whose spans named a run "
        "with `workbench.run.id` is in that run instead).",
    )


def _aware(value: datetime | None) -> datetime | None:
    return value if value is None or value.tzinfo else value.replace(tzinfo=UTC)


def _filters(query: ListQuery, *, hide_judge_calls: bool) -> RunListFilters:
    if query.status and query.status not in (*RunStatus.values, REJECTED_FILTER):
        raise ApiError(ErrorCode.INVALID_INPUT, f"status: one of {', '.join(RunStatus.values)}, rejected")
    if query.traceId and not TRACE_ID.fullmatch(query.traceId):
        raise ApiError(ErrorCode.INVALID_INPUT, "traceId: 32 hexadecimal digits")
    return RunListFilters(
        status=query.status,
        workflow=query.workflow,
        tag=query.tag,
        started_after=_aware(query.startedAfter),
        started_before=_aware(query.startedBefore),
        trace_id=query.traceId.lower(),
        hide_judge_calls=hide_judge_calls,
    )


def _saved_meta(run: Run) -> dict:
    doc = loads(run.doc)
    meta = {
        "id": run.run_id,
        "workflowId": doc.get("workflowId", run.workflow_id),  # the column may be cut to its width
        "startedAt": doc.get("startedAt"),
        "status": run.status,
    }
    if doc.get("endedAt"):
        meta["endedAt"] = doc["endedAt"]
    if doc.get("tags") is not None:
        meta["tags"] = doc["tags"]
    return meta


@router.get(
    "",
    response={200: list[SavedRunMeta], **ERRORS},
    exclude_none=True,
    summary="List runs (SavedRunMeta[]), newest first, in keyset pages",
    description="Filters combine (all must hold). " + NEXT_DOC,
)
def list_runs(request: HttpRequest, response: HttpResponse, query: Query[ListQuery]):
    caller = require(request, Action.VIEW_RUN)
    limit = min(max(query.limit, 1), MAX_LIST)
    filters = _filters(query, hide_judge_calls=not caller.may(Action.MANAGE_JUDGES))
    runs = keyset(
        request,
        response,
        lambda: keyset_page(
            runs_matching(caller.workspace, filters),
            cursor=query.cursor,
            limit=limit,
            fields=("run_id", "workflow_id", "status", "doc", "started_at"),
        ),
    )
    return [_saved_meta(run) for run in runs]


@router.post("", response={201: WriteResult, **ERRORS, 409: ErrorOut}, summary="Start a run")
def start_run(request: HttpRequest, payload: StartRunIn):
    caller = require(request, Action.START_RUN)
    run = actions.do_start_run(
        workspace=caller.workspace,
        workflow=payload.workflow,
        actor=caller.actor,
        run_id=payload.runId,
        subject=payload.subject,
        metadata=payload.metadata,
        tags=payload.tags,
        context=payload.context,
        title=payload.title,
    )
    return Status(201, write_result(run, [], created=True))


@router.patch(
    "/{runid:run_id}",
    response={200: WriteResult, **ERRORS},
    summary="Update a run's title",
    description='Sets `run.metadata["workbench.title"]` (any status; no trace event: the protocol has '
    "none for run metadata). Needs the `write` scope, like starting a run.",
)
def update_run(request: HttpRequest, run_id: str, payload: RunUpdateIn):
    caller = require(request, Action.START_RUN)
    readable_run(caller, run_id)  # 404 before anything else for another workspace's run
    run = actions.do_set_run_title(workspace=caller.workspace, run_id=run_id, title=payload.title)
    return write_result(run, [])


@router.get(
    "/{runid:run_id}",
    response={200: RunStoreState, **ERRORS},
    by_alias=True,
    summary="Get a run's RunStoreState",
    description="The body the reference's HTTP run repository loads. The ETag is the revision.",
)
def get_run_state(request: HttpRequest, run_id: str):
    caller = require(request, Action.VIEW_RUN)
    run = readable_run(caller, run_id)
    body = bundle_to_runstore(build_bundle(run))
    response = HttpResponse(wire_bytes(body), content_type="application/json")
    response["ETag"] = etag_for(run)
    return response


@router.put(
    "/{runid:run_id}",
    response={200: WriteResult, 201: WriteResult, **ERRORS, 409: ErrorOut, 412: ErrorOut, 413: ErrorOut},
    summary="Store the next revision of a run (append-only)",
    description=(
        "Body: RunStoreState. A new run is imported (validated like a bundle); for an existing run the "
        "stored trace must be a prefix of the new one (else 409 CONFLICT) and the new events are appended "
        'through the engine. `If-Match: "<revision>"` makes the write conditional (412 on mismatch). '
        "`run.id` must equal the URL's run id (else 400)."
    ),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RunStoreState"}}},
        },
        "parameters": [
            {
                "in": "header",
                "name": "If-Match",
                "required": False,
                "schema": {"type": "string"},
                "description": "The revision ETag the write is based on.",
            }
        ],
    },
)
def put_run_state(request: HttpRequest, run_id: str):
    caller = require(request, Action.APPEND_EVENTS)
    expected = parse_if_match(request.headers.get("If-Match"))
    if not request.body:
        raise ApiError("INVALID_RUN_STATE", "a RunStoreState body is required")
    state = parse_json(request.body)
    result = do_put_run_state(
        workspace=caller.workspace,
        run_id=run_id,
        state=state,
        actor=caller.actor,
        expected_revision=expected,
        may_decide=caller.may(Action.RESOLVE_GATE),
    )
    status = 201 if result.created else 200
    response = HttpResponse(
        wire_bytes(write_result(result.run, result.seqs, created=result.created)),
        status=status,
        content_type="application/json",
    )
    response["ETag"] = etag_for(result.run)
    return response


@router.delete("/{runid:run_id}", response={204: None, **ERRORS}, summary="Delete a run")
def delete_run(request: HttpRequest, run_id: str):
    caller = require(request, Action.DELETE_RUN)
    actions.do_delete_run(workspace=caller.workspace, run_id=run_id)
    return HttpResponse(status=204)
