"""The go-to dialog's runs (Ctrl-K, templates/_goto.html): JSON, the current workspace's only."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, JsonResponse
from django.urls import reverse
from django.utils.timezone import now as timezone_now
from django.views.decorators.http import require_GET

from runs.actions.permissions import Action
from runs.presenters import times
from runs.selectors.run_list import runs_to_go_to
from runs.web.request import current_workspace, may

GOTO_LIMIT = 8
GOTO_MAX_QUERY = 200


@login_required
@require_GET
def goto_runs(request: HttpRequest) -> JsonResponse:
    """``GET /goto/?q=<text>``: up to 8 runs whose id or title holds the text (the newest runs when
    it is empty): ``{"runs": [{"id", "title", "status", "url", "started"}]}``. A query longer than
    200 characters answers 400 ``INVALID_INPUT``."""
    text = request.GET.get("q", "")
    if len(text) > GOTO_MAX_QUERY:
        return JsonResponse(
            {"error": f"the query is longer than {GOTO_MAX_QUERY} characters", "code": "INVALID_INPUT"},
            status=400,
        )
    workspace = current_workspace(request)
    now = timezone_now()
    runs = runs_to_go_to(
        workspace, text, limit=GOTO_LIMIT, hide_judge_calls=not may(request, Action.MANAGE_JUDGES)
    )
    return JsonResponse(
        {
            "runs": [
                {
                    "id": run.run_id,
                    "title": run.title or run.workflow_id,
                    "status": run.status,
                    "url": reverse("runs:detail", args=[run.run_id]),
                    "started": times.relative(run.started_at, now) if run.started_at else "",
                }
                for run in runs
            ]
        }
    )
