"""An OAuth access token's principal (accounts.oauth): its workspace, and the scopes it was granted
that the person's role there still allows; nothing for a token bound to no workspace, to a
workspace the person left, or sent to another resource than the one it was issued for."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application

from accounts.oauth import principal_for_access_token, workspace_id_of, workspace_scope
from runs.actions.permissions import Action
from runs.models import Membership

pytestmark = pytest.mark.django_db
MCP = "http://testserver/api/mcp"


def _token(user, scope: str, *, resource: list[str] | None = None, raw: str = "oauth-raw-token") -> str:
    app = Application.objects.create(
        name="host",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="http://127.0.0.1:9/callback",
    )
    AccessToken.objects.create(
        user=user,
        application=app,
        token=raw,
        expires=timezone.now() + timedelta(hours=1),
        scope=scope,
        resource=resource or [],
    )
    return raw


def test_the_scopes_granted_within_the_role(workspace, vera):
    raw = _token(vera, f"read write review {workspace_scope(workspace)}")  # vera is a viewer
    principal = principal_for_access_token(raw, MCP)
    assert principal is not None and principal.workspace == workspace
    assert principal.scopes == frozenset({"read"}) and principal.actor == f"user:{vera.username}"
    assert principal.may(Action.VIEW_RUN) and not principal.may(Action.START_RUN)
    assert principal.credential.startswith("oauth:")


def test_a_person_who_left_the_workspace_has_no_principal(workspace, alice):
    raw = _token(alice, f"read {workspace_scope(workspace)}")
    assert principal_for_access_token(raw, MCP) is not None
    Membership.objects.filter(user=alice, workspace=workspace).delete()
    assert principal_for_access_token(raw, MCP) is None


def test_no_workspace_no_principal(alice):
    assert principal_for_access_token(_token(alice, "read write"), MCP) is None
    assert workspace_id_of("read workspace:1 workspace:2") is None  # two is none
    assert principal_for_access_token("no-such-token", MCP) is None


def test_a_token_issued_for_another_resource_is_refused(workspace, alice):
    raw = _token(alice, f"read {workspace_scope(workspace)}", resource=["http://elsewhere.example/api/mcp"])
    assert principal_for_access_token(raw, MCP) is None
    assert principal_for_access_token(raw, "http://elsewhere.example/api/mcp") is not None


def test_an_expired_token_is_refused(workspace, alice):
    raw = _token(alice, f"read {workspace_scope(workspace)}")
    AccessToken.objects.update(expires=timezone.now() - timedelta(seconds=1))
    assert principal_for_access_token(raw, MCP) is None
