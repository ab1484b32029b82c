"""`GET /api/runs/{run_id}/transcript.jsonl`: the run's agent exchange transcript, streamed.

Token or session auth with the read scope; another workspace's run answers 404 like a missing one.
"""

from __future__ import annotations

import time

from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, StreamingHttpResponse
from ninja import Router

from runs.actions.permissions import Action
from runs.api.auth import principal
from runs.api.errors import ApiError
from runs.api.responses import readable_run
from runs.ids import content_disposition
from runs.protocol.errors import ErrorCode
from runs.protocol.redaction import POLICIES
from runs.selectors.transcript import aiter_run_transcript, iter_run_transcript
from runs.telemetry import transcript_log
from runs.telemetry.transcript_log import afollow, sync_run, transcript_path

router = Router(tags=["runs"])


@router.get(
    "/{runid:run_id}/transcript.jsonl",
    summary="A run as JSON lines (agent exchange transcript), in seq order",
    description=(
        "One complete JSON object per line: seq, run_id, path, ts, type, payload (typed content blocks "
        "with a fidelity marker), parent/child run linkage. Consumable with jq. With `follow=true` the "
        "run's recorded transcript file is streamed and then tailed: each line arrives as its events "
        "are committed, until the run.completed line or `wait` seconds (default 300, max 3600); "
        "`after_seq` skips lines a reconnecting follower already has. `redact=user|mask|drop` renders the "
        "transcript as the redacted bundle of that policy would hold it (not with `follow`); a run that "
        "carries a redaction policy (an imported redacted bundle) is always shown redacted by it."
    ),
    openapi_extra={
        "responses": {
            # int keys, as django-ninja writes its own: a "200" beside its 200 is a duplicate key in
            # openapi.json, which Swagger UI refuses to parse
            200: {
                "description": "JSON lines",
                "content": {"application/jsonl": {"schema": {"type": "string"}}},
            },
            **{
                code: {
                    "description": text,
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}},
                }
                for code, text in (
                    (400, "Bad query"),
                    (401, "Unauthorized"),
                    (403, "Forbidden"),
                    (404, "No such run"),
                    (429, "Too many requests"),
                )
            },
        }
    },
)
def run_transcript(
    request: HttpRequest,
    run_id: str,
    follow: bool = False,
    after_seq: int = 0,
    wait: float = 300,
    redact: str | None = None,
):
    caller = principal(request)
    caller.require_action(Action.VIEW_RUN)
    run = readable_run(caller, run_id)
    if redact is not None and redact not in POLICIES:
        raise ApiError(
            ErrorCode.INVALID_INPUT,
            f"unknown redaction policy {redact!r}; expected one of {', '.join(POLICIES)}",
        )
    if redact is not None and follow:
        raise ApiError(
            ErrorCode.INVALID_INPUT,
            "redact cannot be combined with follow (the recorded file is the run's own transcript)",
        )
    if follow:
        # The recorded file (runs.telemetry.transcript_log), then each line as it is appended, until the
        # run's run.completed line or `wait` seconds (at most an hour) without the run ending.
        sync_run(run)
        path = transcript_path(run)
        deadline = time.monotonic() + max(0.0, min(float(wait), 3600.0))
        if isinstance(request, ASGIRequest):
            lines = afollow(path, after_seq=after_seq, deadline=deadline)
        else:
            lines = transcript_log.follow(
                path, after_seq=after_seq, until=lambda done: done or time.monotonic() >= deadline
            )
    # Under ASGI an async iterator streams in bounded memory (Django would buffer a sync one whole);
    # under WSGI (tests, management tools) the plain generator streams.
    elif isinstance(request, ASGIRequest):
        lines = aiter_run_transcript(run, redact=redact)
    else:
        lines = iter_run_transcript(run, redact=redact)
    response = StreamingHttpResponse(lines, content_type="application/jsonl; charset=utf-8")
    response["Content-Disposition"] = content_disposition(f"{run.run_id}.jsonl", attachment=False)
    response["Cache-Control"] = "no-store"
    return response
