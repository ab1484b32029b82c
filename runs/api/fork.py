"""Fork and replay (seed 002): ``POST /api/runs/{runId}:fork``, the determinism report and the
response cache lookup that host pipelines replaying in another process ask first."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from django.http import HttpRequest
from ninja import Query, Router, Schema
from ninja.responses import Status
from pydantic import Field

from runs.actions import responsecache
from runs.actions.forks import determinism_report, do_fork_with_history
from runs.actions.permissions import Action
from runs.api.errors import NOT_FOUND, ApiError
from runs.api.responses import readable_run, require
from runs.api.schemas import ErrorOut
from runs.protocol.canonical import parse_json
from runs.protocol.errors import ErrorCode
from runs.selectors.runs import get_fork

router = Router(tags=["fork and replay"])
cache_router = Router(tags=["fork and replay"])

ERRORS = {
    400: ErrorOut,
    401: ErrorOut,
    403: ErrorOut,
    404: ErrorOut,
    409: ErrorOut,
    410: ErrorOut,
    413: ErrorOut,
    422: ErrorOut,
    429: ErrorOut,
}
FIELDS = frozenset({"mode", "fromSeq", "runOptionsOverlay"})


class ForkIn(Schema):
    mode: str = Field(description='"replay" (deterministic re-execution) or "branch" (with an overlay).')
    fromSeq: int | None = Field(
        default=None,
        description="Events < fromSeq are copied as fixed history. Optional for replay (default 0), required for branch.",
    )
    runOptionsOverlay: dict[str, Any] | None = Field(
        default=None,
        description="Branch only: {configurable: {...}, tags: [...], gateDecisions: {stepId: decision}}.",
    )


class ForkOut(Schema):
    runId: str
    sourceRunId: str
    fromSeq: int
    mode: str
    status: str = Field(
        description=(
            "pending (the worker re-executes it), running, waiting (stopped at a gate nobody decided: a "
            "reviewer's decision resumes it), completed, failed, or external (the host drives it)."
        )
    )
    eventsUrl: str


class DeterminismOut(Schema):
    sourceRunId: str
    replayRunId: str
    fromSeq: int
    matchedEvents: int
    comparedEvents: int
    firstDivergenceSeq: int | None
    score: float
    status: str
    finished: bool
    cacheHits: int = Field(
        description="Model calls this replay answered from the cache (history not counted)."
    )
    providerCalls: int = Field(description="Model calls this replay sent to the provider.")
    historyEvents: int = Field(description="Source events copied as fixed history (before fromSeq).")
    explanation: str = Field(description='The score in words, e.g. "diverged at #13: expected ... got ...".')


def fork_result(fork) -> dict:
    return {
        "runId": fork.run.run_id,
        "sourceRunId": fork.source_run_id,
        "fromSeq": fork.from_seq,
        "mode": fork.mode,
        "status": fork.status,
        "eventsUrl": f"/api/runs/{quote(fork.run.run_id, safe='')}/events",
    }


def _body(request: HttpRequest) -> dict:
    data = parse_json(request.body) if request.body else {}
    if not isinstance(data, dict):
        raise ApiError(ErrorCode.INVALID_INPUT, "the body must be a JSON object")
    unknown = set(data) - FIELDS
    if unknown:
        raise ApiError(ErrorCode.INVALID_INPUT, f"unknown field(s): {', '.join(sorted(unknown))}")
    return data


@router.post(
    "/{runid:run_id}:fork",
    response={201: ForkOut, **ERRORS},
    summary="Fork a run: replay or branch from any seq",
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ForkIn"}}},
        }
    },
)
def fork(request: HttpRequest, run_id: str):
    caller = require(request, Action.FORK_RUN)
    data = _body(request)
    readable_run(caller, run_id)  # reading the source is needed: 404 for outsiders first
    result = do_fork_with_history(
        workspace=caller.workspace,
        source_run_id=run_id,
        mode=data.get("mode"),
        from_seq=data.get("fromSeq"),
        overlay=data.get("runOptionsOverlay"),
        actor=caller.actor,
    )
    result.refresh_from_db()
    return Status(201, fork_result(result))


@router.get(
    "/{runid:run_id}/determinism",
    response={200: DeterminismOut, **ERRORS},
    summary="Determinism report of a replay",
)
def determinism(request: HttpRequest, run_id: str):
    caller = require(request, Action.VIEW_RUN)
    fork = get_fork(caller.workspace, run_id)
    if fork.mode != "replay":
        raise ApiError(
            "NOT_A_REPLAY", f"run {run_id!r} is a branch: only replays have a determinism report", 409
        )
    return determinism_report(fork)


class CacheQuery(Schema):
    recipe: str = Field(default="v2", description='"v2" (semantic request digest) or "v1" (portable recipe).')
    preferRunId: str | None = Field(
        default=None, description="Prefer the answer this run recorded (a replay's source)."
    )


@cache_router.get(
    "/{key}",
    response={200: dict, **ERRORS},
    summary="Look up a cached model response by LLM cache key (this workspace only)",
)
def cache_lookup(request: HttpRequest, key: str, query: Query[CacheQuery]):
    caller = require(request, Action.VIEW_RUN)
    if query.recipe not in ("v1", "v2"):
        raise ApiError(ErrorCode.INVALID_INPUT, "recipe must be v1 or v2")
    if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
        raise ApiError(ErrorCode.INVALID_INPUT, "a cache key is 64 lowercase hex digits")
    prefer = None
    if query.preferRunId:
        prefer = readable_run(caller, query.preferRunId)
    entry = responsecache.lookup(caller.workspace, key, recipe=query.recipe, prefer_run=prefer)
    if entry is None:
        raise ApiError(NOT_FOUND, "no cached response for this key in this workspace", 404)
    responsecache.record_hit(entry)
    return responsecache.as_json(entry)
