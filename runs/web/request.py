"""Request helpers for the pages: current workspace, role checks, the one way a view gets a run.

    workspace = current_workspace(request)          # from the session, membership-scoped
    run = get_run_for_user(request, run_id)          # 404 for missing runs AND other workspaces' runs
    require_role(request, Role.REVIEWER)             # 404 outsider / 403 insufficient role

A run of another workspace answers 404, never 403: its existence is not revealed.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest
from django_htmx.middleware import HtmxDetails

from runs.actions.permissions import Action, minimum_role, role_allows
from runs.actions.workspaces import PUBLIC_DEMO_WORKSPACE, personal_workspace
from runs.models import Membership, Run, Workspace
from runs.selectors.prompts import pending_promotion_count
from runs.selectors.run_list import pending_gate_count
from runs.selectors.runs import RunNotFound, get_run, is_judge_call

SESSION_KEY = "workbench_workspace"
# The public demo (`/runs/demo`, no sign-in) is a read-only snapshot: a copy of the demo run in a
# workspace of its own that has no members and no tokens, so no page, API, MCP call or token can
# change it and every visitor sees its pending gate (runs.demo.public). The signed-in demo user
# works on the original, in workspace "demo".
DEMO_WORKSPACE = PUBLIC_DEMO_WORKSPACE
DEMO_RUN_ID = "run_demo_jobsearch"


class HtmxHttpRequest(HttpRequest):
    """A request that went through django-htmx's middleware (installed for every view): the
    views that answer both full pages and fragments take this type to read ``request.htmx``."""

    htmx: HtmxDetails


class AuthenticatedHttpRequest(HttpRequest):
    """A request to a ``@login_required`` view: its user is signed in (django-stubs' recipe)."""

    user: User


def current_membership(request: HttpRequest) -> Membership | None:
    """The membership of the signed-in user in the workspace chosen in the session (cached per request)."""
    cached: Membership | bool | None = getattr(request, "_workbench_membership", False)
    if cached is not False:
        return cached if isinstance(cached, Membership) else None
    membership: Membership | None = None
    user = request.user
    if user.is_authenticated:
        slug = request.session.get(SESSION_KEY)
        qs = Membership.objects.select_related("workspace").filter(user=user)
        if slug:
            membership = qs.in_workspace(slug).first()
        if membership is None:
            membership = qs.order_by("created_at", "pk").first()
        if membership is None:
            personal_workspace(user)
            membership = qs.order_by("created_at", "pk").first()
        if membership is not None and slug != membership.workspace.slug:
            request.session[SESSION_KEY] = membership.workspace.slug
    request._workbench_membership = membership  # type: ignore[attr-defined]
    return membership


def current_workspace(request: HttpRequest) -> Workspace:
    membership = current_membership(request)
    if membership is None:
        raise Http404("no workspace")
    return membership.workspace


def has_role(request: HttpRequest, role: str) -> bool:
    membership = current_membership(request)
    return membership is not None and membership.has_role(role)


def require_role(request: HttpRequest, role: str) -> Membership:
    """The caller's membership when it carries at least `role`; 403 otherwise (the run was visible)."""
    membership = current_membership(request)
    if membership is None:
        raise Http404("no workspace")
    if not membership.has_role(role):
        raise PermissionDenied(f"needs the {role} role")
    return membership


def may(request: HttpRequest, action: Action | str) -> bool:
    """Whether the permission table (runs.actions.permissions) lets the caller do ``action`` here."""
    membership = current_membership(request)
    return membership is not None and role_allows(membership.role, action)


def require_action(request: HttpRequest, action: Action | str) -> Membership:
    """The caller's membership when the permission table allows ``action``: 404 without a
    workspace (nothing is revealed), 403 when their role does not allow it."""
    membership = current_membership(request)
    if membership is None:
        raise Http404("no workspace")
    if not role_allows(membership.role, action):
        raise PermissionDenied(f"{str(action).replace('_', ' ')} needs the {minimum_role(action)} role")
    return membership


def switch_workspace(request: HttpRequest, slug: str) -> Workspace:
    """Choose the session's workspace among the user's own memberships only (404 otherwise)."""
    user = request.user
    membership = (
        Membership.objects.select_related("workspace").filter(user=user).in_workspace(slug).first()
        if user.is_authenticated
        else None
    )
    if membership is None:
        raise Http404("no such workspace")
    request.session[SESSION_KEY] = membership.workspace.slug
    request._workbench_membership = membership  # type: ignore[attr-defined]
    return membership.workspace


def get_run_for_user(request: HttpRequest, run_id: str) -> Run:
    """A run of the current workspace, or 404 (missing and foreign runs look the same, and so does
    a gate judge's own call to whoever may not manage judges: its answer is a pending proposal)."""

    try:
        run = get_run(current_workspace(request), run_id)
    except RunNotFound:
        raise Http404("no such run") from None
    if is_judge_call(run) and not may(request, Action.MANAGE_JUDGES):
        raise Http404("no such run")
    return run


def get_demo_run() -> Run:
    """The public demo run (read-only, no sign-in): `run_demo_jobsearch` in workspace `public-demo`."""

    workspace = Workspace.objects.filter(slug=DEMO_WORKSPACE).first()
    if workspace is None:
        raise Http404("no demo")
    try:
        return get_run(workspace, DEMO_RUN_ID)
    except RunNotFound:
        raise Http404("no demo run") from None


def actor_for(request: HttpRequest) -> str:
    return f"user:{request.user.get_username()}"


@dataclass
class Nav:
    """What base.html's navigation needs; evaluated lazily so pages that do not render it pay nothing."""

    request: HttpRequest

    @cached_property
    def membership(self) -> Membership | None:
        if not self.request.user.is_authenticated:
            return None
        return current_membership(self.request)

    @cached_property
    def workspace(self) -> Workspace | None:
        return self.membership.workspace if self.membership else None

    @cached_property
    def memberships(self) -> list[Membership]:
        if not self.request.user.is_authenticated:
            return []
        return list(
            Membership.objects.select_related("workspace")
            .filter(user=self.request.user)
            .order_by("workspace__name")
        )

    def _may(self, action: Action) -> bool:
        return bool(self.membership and role_allows(self.membership.role, action))

    @cached_property
    def pending_gates(self) -> int:
        """Gates waiting for a decision in the current workspace (the inbox count in the navigation)."""
        if self.workspace is None:
            return 0

        return pending_gate_count(self.workspace)

    @cached_property
    def pending_promotions(self) -> int:
        """Prompt promotion requests waiting for a decision in the current workspace (a second count
        on the inbox link: the inbox is where they are decided)."""
        if self.workspace is None:
            return 0
        return pending_promotion_count(self.workspace)

    @property
    def undo_ms(self) -> int:
        """How long an approval waits for its Undo (static/workbench/review.js reads it from <body>)."""
        return settings.WORKBENCH_APPROVE_UNDO_MS

    @cached_property
    def can_manage_queues(self) -> bool:
        """Annotation queues: create them, add runs to them (the run page's and run list's controls)."""
        return self._may(Action.MANAGE_QUEUES)

    @cached_property
    def is_owner(self) -> bool:
        return self._may(Action.MANAGE_MEMBERS)

    @cached_property
    def can_review(self) -> bool:
        return self._may(Action.RESOLVE_GATE)

    @cached_property
    def can_import(self) -> bool:
        return self._may(Action.IMPORT_BUNDLE)


def nav(request: HttpRequest) -> dict:
    """Context processor: `nav` for base.html (workspace, memberships, role flags)."""
    return {"nav": Nav(request)}
