"""Who may see or change the run a page shows: the public demo, a member, a reviewer."""

from __future__ import annotations

from dataclasses import dataclass
from functools import wraps
from urllib.parse import quote

from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from runs.actions.permissions import Action
from runs.models import Run
from runs.selectors.runs import find_by_short_id
from runs.web.request import (
    current_workspace,
    get_demo_run,
    get_run_for_user,
    may,
    require_action,
)


@dataclass
class RunAccess:
    run: Run
    url_id: str
    demo: bool
    can_review: bool
    can_cancel: bool = False

    @property
    def read_only(self) -> bool:
        return not self.can_review


def run_access(request: HttpRequest, run_id: str) -> RunAccess:
    """The run a page shows: the public demo (read-only) or a run of the user's current workspace."""
    if run_id == "demo":
        return RunAccess(run=get_demo_run(), url_id="demo", demo=True, can_review=False)
    run = get_run_for_user(request, run_id)
    return RunAccess(
        run=run,
        url_id=run.run_id,
        demo=False,
        can_review=may(request, Action.RESOLVE_GATE),
        can_cancel=may(request, Action.CANCEL_RUN),
    )


def run_page(view):
    """Read-only run views: the demo is public, every other run needs a signed-in member."""

    @wraps(view)
    def wrapper(request: HttpRequest, run_id: str, *args, **kwargs):
        if run_id != "demo" and not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        try:
            access = run_access(request, run_id)
        except Http404:
            # the short id the lists show (``3f2a9c1e``) resolves to its run's page
            full = find_by_short_id(current_workspace(request), run_id) if request.method == "GET" else None
            if full is None:
                raise
            return redirect(request.get_full_path().replace(f"/{run_id}/", f"/{quote(full, safe='')}/", 1))
        return view(request, access, *args, **kwargs)

    return wrapper


def run_write(action: Action):
    """Writing run views: POST, signed in, and `action` allowed by the permission table."""

    def decorate(view):
        @wraps(view)
        @login_required
        @require_POST
        def wrapper(request: HttpRequest, run_id: str, *args, **kwargs):
            run = get_run_for_user(request, run_id)  # 404 first: a foreign run is never revealed
            require_action(request, action)
            return view(request, run, *args, **kwargs)

        return wrapper

    return decorate
