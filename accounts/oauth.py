"""OAuth 2.1 for MCP hosts (django-oauth-toolkit): tokens bound to one workspace and its scopes.

A person authorizes an MCP host on the consent page (:mod:`accounts.oauth_views`): they pick one of
their workspaces and the scopes to grant. The grant's scope string then carries the workspace as
one more scope, ``workspace:<id>``, so it follows the authorization code into the access token and
every refreshed token without a table of its own (a refresh can only narrow scopes, never swap the
workspace: :meth:`WorkspaceOAuth2Validator.save_bearer_token` keeps it).

An access token becomes a :class:`accounts.principals.Principal` of that workspace with the scopes
it was granted *and* the person's role still allows (a person demoted or removed loses the rights
at once), so the rights table of runs.actions.permissions applies to it exactly as to API tokens.
Only the authorization-code grant (PKCE S256) and refresh are accepted, for every client.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from oauth2_provider.models import get_access_token_model, get_refresh_token_model, revoke_access_token
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauthlib.common import Request as OAuthRequest
from oauthlib.oauth2.rfc6749 import errors as oauth2_errors

from accounts.models import Scope, SpentAuthorizationCode
from accounts.principals import Principal
from runs.actions.permissions import ROLE_SCOPES
from runs.models import Membership, Role, Workspace

log = logging.getLogger("workbench.oauth")

WORKSPACE_SCOPE = "workspace:"
_WORKSPACE_SCOPE_RE = re.compile(r"^workspace:([1-9][0-9]{0,17})$")
GRANT_TYPES = ("authorization_code", "refresh_token")
# What an MCP host may be granted: the scopes the MCP tools ask for. ``manage`` (webhooks, over
# REST) is not offered: an OAuth token is for /api/mcp only.
OAUTH_SCOPES: tuple[str, ...] = (Scope.READ.value, Scope.WRITE.value, Scope.REVIEW.value)


def workspace_scope(workspace: Workspace) -> str:
    return f"{WORKSPACE_SCOPE}{workspace.pk}"


def workspace_id_of(scopes: list[str] | str) -> int | None:
    """The workspace a token's scopes bind it to; None unless exactly one is named."""
    items = scopes.split() if isinstance(scopes, str) else scopes
    found = [int(m.group(1)) for m in map(_WORKSPACE_SCOPE_RE.match, items) if m]
    return found[0] if len(found) == 1 else None


def granted_scopes(scopes: list[str] | str) -> list[str]:
    """The workbench scopes (read, write, review) among a token's scopes, in their usual order."""
    items = set(scopes.split() if isinstance(scopes, str) else scopes)
    return [s for s in OAUTH_SCOPES if s in items]


LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})


def plaintext_redirect_is_loopback(redirect_uri: str) -> bool:
    """An ``http`` redirect URI is a native app's loopback callback (RFC 8252 §7.3), nothing else."""
    parts = urlsplit(redirect_uri)
    return parts.scheme != "http" or (parts.hostname or "") in LOOPBACK_HOSTS


class WorkspaceOAuth2Validator(OAuth2Validator):
    """django-oauth-toolkit's validator, narrowed: the code grant and refresh only, one workspace."""

    def validate_redirect_uri(self, client_id, redirect_uri, request, *args, **kwargs) -> bool:
        # `http` stays allowed for MCP hosts' loopback callbacks only (see settings: W008).
        if not plaintext_redirect_is_loopback(redirect_uri):
            return False
        return bool(super().validate_redirect_uri(client_id, redirect_uri, request, *args, **kwargs))

    def validate_grant_type(self, client_id, grant_type, client, request, *args, **kwargs) -> bool:
        # No password grant (it would bypass the sign-in throttle) and no client credentials
        # (a token nobody consented to): a registered client can only be authorized by a person.
        if grant_type not in GRANT_TYPES:
            return False
        return super().validate_grant_type(client_id, grant_type, client, request, *args, **kwargs)

    def validate_response_type(self, client_id, response_type, client, request, *args, **kwargs) -> bool:
        if response_type != "code":  # no implicit grant (OAuth 2.1)
            return False
        # PKCE with S256 only, refused before the consent page (DOT would refuse "plain" only once
        # the person has consented; RFC 7636 reads a missing method as "plain").
        if request.code_challenge is not None and request.code_challenge_method != "S256":
            raise oauth2_errors.InvalidRequestError(
                description='PKCE code_challenge_method must be "S256"', request=request
            )
        return super().validate_response_type(client_id, response_type, client, request, *args, **kwargs)

    def validate_scopes(self, client_id, scopes, client, request, *args, **kwargs) -> bool:
        # Only the consent page names a workspace (the one the person picked among their own,
        # accounts.oauth_views); a client asking for one itself is refused (invalid_scope).
        plain = [s for s in scopes if not s.startswith(WORKSPACE_SCOPE)]
        named = [s for s in scopes if s.startswith(WORKSPACE_SCOPE)]
        if named and not (getattr(request, "workbench_consent", False) and workspace_id_of(named)):
            return False
        return super().validate_scopes(client_id, plain, client, request, *args, **kwargs)

    def save_bearer_token(self, token, request, *args, **kwargs):
        # A refresh that asks for fewer scopes keeps the workspace of the original grant.
        refresh = getattr(request, "refresh_token_instance", None)
        scopes = list(request.scopes or [])
        if refresh is not None and workspace_id_of(scopes) is None:
            original = self.get_original_scopes(request.refresh_token, request)
            bound = [s for s in original if s.startswith(WORKSPACE_SCOPE)]
            request.scopes = scopes + bound
            token["scope"] = " ".join(request.scopes)
        saved = super().save_bearer_token(token, request, *args, **kwargs)
        if request.grant_type == "authorization_code" and getattr(request, "code", None):
            _remember_spent_code(request.code, request.client_id, token)
        return saved

    def validate_code(self, client_id, code, client, request, *args, **kwargs) -> bool:
        if super().validate_code(client_id, code, client, request, *args, **kwargs):
            return True
        # A code exchanged before and presented again: revoke what it gave (OAuth 2.1 4.1.3).
        revoke_tokens_of_spent_code(code, client_id)
        return False


def _code_hash(code: str) -> str:
    return hashlib.sha256(code.encode("utf-8")).hexdigest()


def _remember_spent_code(code: str, client_id: str, token: dict) -> None:
    access = (
        get_access_token_model()
        .objects.filter(token_checksum=hashlib.sha256(token["access_token"].encode("utf-8")).hexdigest())
        .first()
    )
    refresh = (
        get_refresh_token_model().objects.filter(access_token=access).only("pk").first()
        if access is not None
        else None
    )
    SpentAuthorizationCode.objects.update_or_create(
        code_sha256=_code_hash(code),
        defaults={
            "client_id": client_id or "",
            "access_token_id": access.pk if access is not None else None,
            "refresh_token_id": refresh.pk if refresh is not None else None,
        },
    )


def revoke_tokens_of_spent_code(code: str, client_id: str) -> int:
    """Revoke every token issued from ``code`` (if it was exchanged before, by ``client_id``):
    its access token and, along the refresh chain, each token refreshed from it. The number of
    access tokens revoked."""
    spent = SpentAuthorizationCode.objects.filter(code_sha256=_code_hash(code), client_id=client_id).first()
    if spent is None:
        return 0
    access_model, refresh_model = get_access_token_model(), get_refresh_token_model()
    revoked = 0
    first = access_model.objects.filter(pk=spent.access_token_id).first() if spent.access_token_id else None
    if first is not None:
        revoke_access_token(first)
        revoked += 1
    refresh_id = spent.refresh_token_id
    seen: set[int] = set()
    while refresh_id is not None and refresh_id not in seen:
        seen.add(refresh_id)
        refresh = refresh_model.objects.filter(pk=refresh_id).first()
        if refresh is not None and refresh.revoked is None:
            refresh.revoke()
        successor = access_model.objects.filter(source_refresh_token_id=refresh_id).first()
        if successor is None:
            break
        following = refresh_model.objects.filter(access_token=successor).only("pk").first()
        revoke_access_token(successor)
        revoked += 1
        refresh_id = following.pk if following is not None else None
    if revoked:
        log.warning(
            "authorization code of client %s presented again: %d token(s) revoked", client_id, revoked
        )
    return revoked


def principal_for_access_token(raw: str, resource: str) -> Principal | None:
    """The principal of a valid OAuth access token for ``resource`` (the URL it was sent to), or
    None: unknown, expired or revoked, issued for another resource (RFC 8707), bound to no
    workspace, or its person is no longer an active member of that workspace."""
    request = OAuthRequest(resource)
    if not WorkspaceOAuth2Validator().validate_bearer_token(raw, [], request):
        return None
    token = request.access_token
    user = token.user
    workspace_id = workspace_id_of(token.scope)
    if user is None or not user.is_active or workspace_id is None:
        return None
    membership = (
        Membership.objects.select_related("workspace").filter(user=user, workspace_id=workspace_id).first()
    )
    if membership is None:
        return None
    allowed = ROLE_SCOPES[Role(membership.role)]
    return Principal(
        workspace=membership.workspace,
        actor=f"user:{user.get_username()}",
        scopes=frozenset(s for s in granted_scopes(token.scope) if s in allowed),
        user=user,
        role=membership.role,
        client=token.application.client_id if token.application_id else "",
    )


# --------------------------------------------------------------------------------------------
# The tokens page: OAuth tokens bound to a workspace, and revoking them


@dataclass(frozen=True)
class OAuthTokenRow:
    pk: int
    client_name: str
    client_id: str
    username: str
    scopes: list[str]
    created: datetime
    expires: datetime


def _of_workspace(workspace: Workspace):
    pattern = rf"(^| ){re.escape(workspace_scope(workspace))}( |$)"
    return get_access_token_model().objects.filter(scope__regex=pattern)


def list_oauth_tokens(workspace: Workspace) -> list[OAuthTokenRow]:
    """The live OAuth access tokens bound to ``workspace`` (newest first)."""
    rows = _of_workspace(workspace).select_related("application", "user").order_by("-created", "-pk")
    return [
        OAuthTokenRow(
            pk=token.pk,
            client_name=(token.application.name if token.application_id else "") or "unnamed client",
            client_id=token.application.client_id if token.application_id else "",
            username=token.user.get_username() if token.user_id else "",
            scopes=granted_scopes(token.scope),
            created=token.created,
            expires=token.expires,
        )
        for token in rows
    ]


def revoke_oauth_token(*, workspace: Workspace, token_pk: int) -> OAuthTokenRow:
    """Revoke an OAuth token of this workspace and its refresh token (the client cannot renew it).
    Raises LookupError for a token that is not this workspace's."""
    token = _of_workspace(workspace).select_related("application", "user").filter(pk=token_pk).first()
    if token is None:
        raise LookupError(token_pk)
    row = OAuthTokenRow(
        pk=token.pk,
        client_name=(token.application.name if token.application_id else "") or "unnamed client",
        client_id=token.application.client_id if token.application_id else "",
        username=token.user.get_username() if token.user_id else "",
        scopes=granted_scopes(token.scope),
        created=token.created,
        expires=token.expires,
    )
    revoke_access_token(token)
    return row
