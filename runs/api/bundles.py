"""Bundles: signed export, atomic import, verification without writing."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from ninja import Query, Router, Schema
from ninja.responses import Status
from pydantic import Field

from runs import actions
from runs.actions.permissions import Action
from runs.api.errors import ApiError
from runs.api.responses import etag_for, require, write_result
from runs.api.schemas import ErrorOut, RunBundle, VerifyResult, WriteResult
from runs.ids import content_disposition
from runs.protocol.bundle import check_bundle
from runs.protocol.errors import ErrorCode
from runs.protocol.redaction import POLICIES
from runs.selectors.bundles import export_bundle_bytes
from runs.selectors.runs import get_run

router = Router(tags=["bundles"])
runs_router = Router(tags=["bundles"])

ERRORS = {400: ErrorOut, 401: ErrorOut, 403: ErrorOut, 404: ErrorOut, 413: ErrorOut, 429: ErrorOut}
BUNDLE_BODY = {
    "requestBody": {
        "required": True,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/RunBundle"}}},
    }
}


class ImportQuery(Schema):
    as_new_id: bool = Field(
        default=False, description="Import under a fresh run id (the integrity then no longer applies)."
    )


@runs_router.get(
    "/{runid:run_id}/bundle",
    response={200: RunBundle, **ERRORS},
    by_alias=True,
    summary="Export a run as a signed bundle",
    description=(
        "Canonical JSON (RFC 8785) of the RunBundle with `integrity.sha256`; verifiable by any protocol 1.0.0 "
        "implementation. `redact=user|mask|drop` exports a redacted user bundle instead, signed over what it "
        "holds, the policy (and a hash of every removed value) named in "
        '`run.metadata["workbench.redaction"]`. `user` is the reference runtime\'s profile: model payloads, '
        "tool arguments and results and the run metadata go; titles, summaries, annotations, notes, error "
        "messages and artifact data stay. `mask` and `drop` leave nothing a person wrote or a model said "
        "(free text masked as `[REDACTED]`; `drop` removes what is optional); ids, steps, timestamps, "
        "decisions, usage, cost and model names stay."
    ),
)
def export_bundle(request: HttpRequest, run_id: str, redact: str | None = None):
    caller = require(request, Action.VIEW_RUN)
    run = get_run(caller.workspace, run_id)
    if redact is not None and redact not in POLICIES:
        raise ApiError(
            ErrorCode.INVALID_INPUT,
            f"unknown redaction policy {redact!r}; expected one of {', '.join(POLICIES)}",
        )
    response = HttpResponse(export_bundle_bytes(run, redact=redact), content_type="application/json")
    response["ETag"] = etag_for(run)
    response["Content-Disposition"] = content_disposition(f"{run.run_id}.bundle.json")
    return response


def _body(request: HttpRequest) -> bytes:
    data = request.body
    if not data:
        raise ApiError(ErrorCode.INVALID_JSON, "a bundle (JSON) is required as the request body")
    return data


@router.post(
    "",
    response={201: WriteResult, **ERRORS, 409: ErrorOut},
    summary="Import a bundle (verified, atomic)",
    openapi_extra=BUNDLE_BODY,
)
def import_bundle(request: HttpRequest, query: Query[ImportQuery]):
    caller = require(request, Action.IMPORT_BUNDLE)
    run = actions.do_import_bundle(
        workspace=caller.workspace, data=_body(request), actor=caller.actor, as_new_id=query.as_new_id
    )
    return Status(201, write_result(run, list(range(1, run.last_seq + 1)), created=True))


@router.post(
    "/verify",
    response={200: VerifyResult, **ERRORS},
    summary="Verify a bundle without storing it",
    openapi_extra=BUNDLE_BODY,
)
def verify_bundle(request: HttpRequest):
    require(request, Action.VERIFY_BUNDLE)
    result = check_bundle(_body(request))
    integrity = result.integrity
    return {
        "ok": bool(result.ok),
        "code": result.code,
        "integrity": None if integrity is None else str(getattr(integrity, "value", integrity)),
        "message": result.message,
    }
