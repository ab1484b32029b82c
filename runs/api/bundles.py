"""Bundles: signed export (DSSE, Ed25519), atomic import, verification without writing."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from ninja import Query, Router, Schema
from ninja.responses import Status
from pydantic import Field

from runs import actions
from runs.actions.importjobs import async_threshold, do_cancel_import_job, do_create_import_job
from runs.actions.permissions import Action
from runs.actions.signing import do_export_bundle
from runs.api.errors import ApiError
from runs.api.responses import etag_for, readable_run, require, write_result
from runs.api.schemas import DsseEnvelope, ErrorOut, RunBundle, VerifyResult, WriteResult
from runs.ids import content_disposition
from runs.models import ImportJob
from runs.protocol.bundle import check_bundle
from runs.protocol.errors import ErrorCode
from runs.protocol.redaction import POLICIES
from runs.selectors.signing import bundle_signature
from runs.web.spool import spool_body

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
    background: bool = Field(
        default=False,
        description="Import as a background job (`202` with the job) whatever the bundle's size.",
    )


class ImportJobError(Schema):
    code: str
    message: str


class ImportJobOut(Schema):
    job: str = Field(description="The job's id.")
    url: str = Field(description="Where to poll the job (GET).")
    status: str = Field(description="`queued`, `running`, `succeeded` or `failed`.")
    size: int = Field(description="The bundle's size in bytes.")
    bytesRead: int = Field(description="How much of the bundle was read so far.")
    events: int = Field(description="Events stored so far (the run appears when the job succeeds).")
    runId: str | None = Field(description="The imported run's id once the job succeeded.")
    error: ImportJobError | None = Field(description="Why the job failed (nothing was stored).")


def job_out(job) -> dict:
    return {
        "job": job.job_id,
        "url": f"/api/bundles/jobs/{job.job_id}",
        "status": job.status,
        "size": job.size,
        "bytesRead": job.bytes_read,
        "events": job.events,
        "runId": job.run_id or None,
        "error": {"code": job.error_code, "message": job.error_message} if job.error_code else None,
    }


@runs_router.get(
    "/{runid:run_id}/bundle",
    response={200: RunBundle | DsseEnvelope, **ERRORS},
    by_alias=True,
    summary="Export a run as a signed bundle",
    description=(
        "Canonical JSON (RFC 8785) of the RunBundle with `integrity.sha256` (an integrity hash any protocol "
        "1.0.0 implementation verifies) and `integrity.attestations`: a DSSE envelope around an in-toto "
        "statement, signed with this instance's Ed25519 key (public keys at `/.well-known/jwks.json`, "
        "their validity at `/.well-known/workbench-keys.json`). The signature says that this instance "
        "exported the content with that hash for the caller, and who resolved each gate as the server "
        "recorded it; it is not a signature by the approvers themselves. `redact=user|mask|drop` exports "
        "a redacted user bundle instead, hashed and signed over what it holds, the policy (and a hash of "
        'every removed value) named in `run.metadata["workbench.redaction"]` and in the signature. `user` '
        "is the reference runtime's profile: model payloads, tool arguments and results and the run "
        "metadata go; titles, summaries, annotations, notes, error messages and artifact data stay. `mask` "
        "and `drop` leave nothing a person wrote or a model said (free text masked as `[REDACTED]`; `drop` "
        "removes what is optional); ids, steps, timestamps, decisions, usage, cost and model names stay. "
        "`detached=true` answers the signature alone as `<run>.bundle.json.dsse.json` (the envelope covers "
        "the integrity hash, which is the same with or without `integrity.attestations`)."
    ),
)
def export_bundle(request: HttpRequest, run_id: str, redact: str | None = None, detached: bool = False):
    caller = require(request, Action.VIEW_RUN)
    run = readable_run(caller, run_id)
    if redact is not None and redact not in POLICIES:
        raise ApiError(
            ErrorCode.INVALID_INPUT,
            f"unknown redaction policy {redact!r}; expected one of {', '.join(POLICIES)}",
        )
    export = do_export_bundle(run, exported_by=caller.actor, redact=redact)
    name = f"{run.run_id}.bundle.json"
    if detached:
        response = HttpResponse(export.envelope_bytes, content_type="application/json")
        response["Content-Disposition"] = content_disposition(f"{name}.dsse.json")
        return response
    response = HttpResponse(export.data, content_type="application/json")
    response["ETag"] = etag_for(run)
    response["Content-Disposition"] = content_disposition(name)
    return response


def _body(request: HttpRequest) -> bytes:
    data = request.body
    if not data:
        raise ApiError(ErrorCode.INVALID_JSON, "a bundle (JSON) is required as the request body")
    return data


@router.post(
    "",
    response={201: WriteResult, 202: ImportJobOut, **ERRORS, 409: ErrorOut},
    summary="Import a bundle (verified, atomic)",
    description=(
        "A bundle under `WORKBENCH_IMPORT_ASYNC_BYTES` (8 MiB by default) is imported while the request "
        "waits: `201` with the run. A larger one (or any with `background=true`) is imported by a "
        "background job: `202` with the job and its `url` (also in `Location`), which the client polls "
        "(`GET /api/bundles/jobs/{job}`) for `status` (`queued`, `running`, `succeeded`, `failed`), "
        "and may cancel (`POST /api/bundles/jobs/{job}/cancel`), "
        "progress (`events`, `bytesRead` of `size`) and, at the end, `runId` or `error` (`code`, "
        "`message`: the code the synchronous import would answer). Either way the bundle is verified "
        "completely and stored in one transaction: a refused bundle stores nothing. The job path reads "
        "the bundle streamed (bounded memory) and writes its events with COPY on PostgreSQL. The body "
        "may be up to `WORKBENCH_MAX_BUNDLE_BYTES` (8 GiB by default; every other request body is "
        "limited to `WORKBENCH_MAX_BODY_BYTES`, 25 MiB): it is copied to disk as it arrives, never held "
        "in memory. Over its limit: `413 PAYLOAD_TOO_LARGE`."
    ),
    openapi_extra=BUNDLE_BODY,
)
def import_bundle(request: HttpRequest, query: Query[ImportQuery], response: HttpResponse):
    caller = require(request, Action.IMPORT_BUNDLE)
    # The body (up to WORKBENCH_MAX_BUNDLE_BYTES) is copied to a file in chunks, never held in
    # memory; a job takes the file over, else api_view removes it after the answer.
    body = spool_body(request)
    if not body.size:
        raise ApiError(ErrorCode.INVALID_JSON, "a bundle (JSON) is required as the request body")
    if query.background or body.size >= async_threshold():
        job = do_create_import_job(
            workspace=caller.workspace, path=body.path, actor=caller.actor, as_new_id=query.as_new_id
        )
        out = job_out(job)
        response["Location"] = out["url"]
        return Status(202, out)
    run = actions.do_import_bundle(  # under WORKBENCH_IMPORT_ASYNC_BYTES (8 MiB): read whole
        workspace=caller.workspace, data=body.path.read_bytes(), actor=caller.actor, as_new_id=query.as_new_id
    )
    return Status(201, write_result(run, list(range(1, run.last_seq + 1)), created=True))


@router.get(
    "/jobs/{job_id}",
    response={200: ImportJobOut, **ERRORS},
    summary="A background import's progress and outcome",
)
def import_job(request: HttpRequest, job_id: str):
    caller = require(request, Action.VIEW_RUN)
    # a NUL names no job (PostgreSQL refuses it in a query: answered before it gets there)
    job = (
        None
        if "\x00" in job_id
        else ImportJob.objects.filter(workspace=caller.workspace, job_id=job_id).first()
    )
    if job is None:
        raise ApiError("NOT_FOUND", f"no import job {job_id!r}", 404)  # another workspace's: the same
    return job_out(job)


@router.post(
    "/jobs/{job_id}/cancel",
    response={200: ImportJobOut, **ERRORS, 409: ErrorOut},
    summary="Cancel a background import",
    description=(
        "A queued job ends `failed` at once with `error.code` `CANCELLED` and the message "
        '"cancelled by <user>"; a running one ends so after the batch it is writing (nothing is '
        "stored: the import is one transaction), so poll it. Its bundle file is deleted either way. "
        "A job that already ended: `409 CONFLICT`."
    ),
)
def cancel_import_job(request: HttpRequest, job_id: str):
    caller = require(request, Action.IMPORT_BUNDLE)
    job = (
        None
        if "\x00" in job_id
        else ImportJob.objects.filter(workspace=caller.workspace, job_id=job_id).first()
    )
    if job is None:
        raise ApiError("NOT_FOUND", f"no import job {job_id!r}", 404)  # another workspace's: the same
    return job_out(do_cancel_import_job(job, actor=caller.actor))


class VerifyQuery(Schema):
    require_signature: bool = Field(
        default=False, description="Refuse a bundle that carries no signature (code UNSIGNED)."
    )


@router.post(
    "/verify",
    response={200: VerifyResult, **ERRORS},
    summary="Verify a bundle without storing it",
    description=(
        "Checks the schema, the integrity hash and the structure as an import would, then the signature "
        "(`integrity.attestations`) against this instance's published keys. `signature.status` is "
        "`signed` (a key of this instance signed this content; `exportedBy`, `approvals` and `kid` say "
        "what it asserts), `unsigned` (integrity hash only: nobody vouches for who exported or approved) "
        "or `invalid` (`signature.code`: SIGNATURE_INVALID, UNKNOWN_KEY, KEY_REVOKED, "
        "SUBJECT_DIGEST_MISMATCH, APPROVAL_MISMATCH, PAYLOAD_TYPE_MISMATCH, STATEMENT_INVALID). A "
        "signature that is present and not accepted makes `ok` false with that code."
    ),
    openapi_extra=BUNDLE_BODY,
)
def verify_bundle(request: HttpRequest, query: Query[VerifyQuery]):
    require(request, Action.VERIFY_BUNDLE)
    result = check_bundle(_body(request))
    integrity = result.integrity
    out: dict[str, Any] = {
        "ok": bool(result.ok),
        "code": result.code,
        "integrity": None if integrity is None else str(getattr(integrity, "value", integrity)),
        "message": result.message,
        "signature": None,
    }
    if result.ok and result.bundle is not None:
        verdict = bundle_signature(
            result.bundle, result.gate_resolved, require_signature=query.require_signature
        )
        out["signature"] = {**verdict.to_json(), "summary": verdict.summary()}
        if not verdict.ok:
            out.update(ok=False, code=verdict.code, message=verdict.message)
    return out
