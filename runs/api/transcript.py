"""`GET /api/runs/{run_id}/transcript.jsonl`: the run's agent exchange transcript, streamed.

Token or session auth with the read scope; another workspace's run answers 404 like a missing one.
"""

from __future__ import annotations

from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, StreamingHttpResponse
from ninja import Router

from runs.api.auth import principal
from runs.ids import content_disposition
from runs.permissions import Action
from runs.selectors import get_run
from runs.transcript import aiter_run_transcript, iter_run_transcript

router = Router(tags=["runs"])


@router.get(
    "/{run_id}/transcript.jsonl",
    summary="A run as JSON lines (agent exchange transcript), in seq order",
    description=(
        "One complete JSON object per line: seq, run_id, path, ts, type, payload (typed content blocks "
        "with a fidelity marker), parent/child run linkage. Consumable with jq."
    ),
)
def run_transcript(request: HttpRequest, run_id: str):
    caller = principal(request)
    caller.require_action(Action.VIEW_RUN)
    run = get_run(caller.workspace, run_id)
    # Under ASGI an async iterator streams in bounded memory (Django would buffer a sync one whole);
    # under WSGI (tests, management tools) the plain generator streams.
    lines = aiter_run_transcript(run) if isinstance(request, ASGIRequest) else iter_run_transcript(run)
    response = StreamingHttpResponse(lines, content_type="application/jsonl; charset=utf-8")
    response["Content-Disposition"] = content_disposition(f"{run.run_id}.jsonl", attachment=False)
    response["Cache-Control"] = "no-store"
    return response
