"""API authentication: bearer tokens first, then the Django session (with CSRF).

Each successful authentication yields an :class:`accounts.principals.Principal` and counts
the request against the caller's rate limits. A write carrying ``Idempotency-Key`` is then
reserved (or answered from the stored first response) before the handler runs.
"""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest
from ninja.security import APIKeyCookie, HttpBearer

from accounts import idempotency
from accounts.principals import Principal, principal_for_membership, principal_for_token, principal_for_user
from accounts.ratelimit import check_request
from accounts.tokens import authenticate_token
from runs.web.request import current_membership
from runs.web.spool import spool_body
from runs.web.uploads import is_bundle_route

WORKSPACE_HEADER = "X-Workspace"
IDEMPOTENCY_HEADER = "Idempotency-Key"
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class ReplayStored(Exception):
    """The request repeats an earlier one with the same Idempotency-Key: answer as it was answered."""

    def __init__(self, replay: idempotency.Replay) -> None:
        super().__init__("replayed response")
        self.replay = replay


def _fingerprint(request: HttpRequest) -> str:
    """The Idempotency-Key's fingerprint of a request. A bundle import's body (up to
    WORKBENCH_MAX_BUNDLE_BYTES) is not read into memory for it: it is copied to its file (which the
    view then uses) and its SHA-256 stands for it."""
    method, path = request.method or "", request.get_full_path()
    if is_bundle_route(method, request.path):
        return idempotency.fingerprint(method, path, f"sha256:{spool_body(request).sha256}".encode())
    return idempotency.fingerprint(method, path, request.body)


def _admit(request: HttpRequest, principal: Principal) -> Principal:
    check_request(
        workspace_id=principal.workspace.pk,
        credential=principal.credential,
        credential_limit=principal.rate_limit,
    )
    request.principal = principal  # type: ignore[attr-defined]
    key = request.headers.get(IDEMPOTENCY_HEADER)
    if key is not None and request.method in WRITE_METHODS:
        outcome = idempotency.begin(
            workspace=principal.workspace,
            key=key,
            fingerprint=_fingerprint(request),
            actor=principal.actor,
        )
        if isinstance(outcome, idempotency.Replay):
            raise ReplayStored(outcome)
        request.idempotency_record = outcome  # type: ignore[attr-defined]
    return principal


class TokenAuth(HttpBearer):
    """``Authorization: Bearer wbt_...``: an API token of one workspace."""

    openapi_description = "An API token of a workspace (created by an owner; shown once)."

    def __call__(self, request: HttpRequest) -> Principal | None:
        # Replaces HttpBearer.__call__, which logs the whole Authorization header at ERROR when its
        # scheme is not "Bearer" (a token sent as "Token wbt_..." ended up in the logs). Here
        # another scheme is simply not this authentication, and nothing about it is logged.
        scheme, _, token = (request.headers.get(self.header) or "").partition(" ")
        if scheme.lower() != self.openapi_scheme or not token:
            return None
        return self.authenticate(request, token.strip())

    def authenticate(self, request: HttpRequest, token: str) -> Principal | None:
        api_token = authenticate_token(token)
        if api_token is None:
            return None
        return _admit(request, principal_for_token(api_token))


class WorkspaceSessionAuth(APIKeyCookie):
    """A signed-in person (Django session cookie); unsafe methods need the CSRF token.

    Without a session cookie this returns None before any CSRF check, so cookie-less bearer
    requests are never refused for CSRF. ``X-Workspace: <slug>`` picks one of the person's
    workspaces (default: the one chosen in the pages, else their first, else a personal one).
    """

    param_name = settings.SESSION_COOKIE_NAME

    def _get_key(self, request: HttpRequest) -> str | None:
        if self.param_name not in request.COOKIES:
            return None
        return super()._get_key(request)

    def authenticate(self, request: HttpRequest, key: str | None) -> Principal | None:
        if key is None:
            return None
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return None
        slug = request.headers.get(WORKSPACE_HEADER)
        if slug:
            principal = principal_for_user(user, slug)
        else:
            membership = current_membership(request)  # the workspace chosen in the pages
            principal = principal_for_membership(membership) if membership is not None else None
        if principal is None:
            return None
        return _admit(request, principal)


def principal(request: HttpRequest) -> Principal:
    return request.auth  # type: ignore[attr-defined,return-value]
