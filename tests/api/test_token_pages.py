"""Owner-only token pages: list, create (shown once), revoke; others get 403, strangers never see tokens."""

from __future__ import annotations

from accounts.models import ApiToken
from accounts.tokens import authenticate_token, create_token


def test_owner_creates_a_token_shown_once(client, alice):
    client.force_login(alice)
    page = client.get("/workspace/tokens/")
    assert page.status_code == 200 and b"Create a token" in page.content
    response = client.post(
        "/workspace/tokens/", {"name": "pipeline", "scopes": ["read", "write"], "expires_in_days": "30"}
    )
    assert response.status_code == 201
    token = ApiToken.objects.get(name="pipeline")
    assert token.scopes == ["read", "write"] and token.expires_at is not None and token.created_by == alice
    secret = response.context["issued"].secret
    assert secret.encode() in response.content and authenticate_token(secret) == token
    assert response["Cache-Control"] == "no-store"
    again = client.get("/workspace/tokens/")
    assert secret.encode() not in again.content and token.key_id.encode() in again.content


def test_invalid_form_is_400(client, alice):
    client.force_login(alice)
    response = client.post("/workspace/tokens/", {"name": "", "scopes": []})
    assert response.status_code == 400 and not ApiToken.objects.exists()


def test_owner_revokes(client, alice, workspace):
    issued = create_token(workspace=workspace, name="old", scopes=["read"])
    client.force_login(alice)
    response = client.post(f"/workspace/tokens/{issued.token.key_id}/revoke/")
    assert response.status_code == 302
    assert authenticate_token(issued.secret) is None
    assert b"revoked" in client.get("/workspace/tokens/").content


def test_non_owners_are_refused(client, bob, vera, workspace):
    issued = create_token(workspace=workspace, name="keep", scopes=["read"])
    for user in (bob, vera):
        client.force_login(user)
        assert client.get("/workspace/tokens/").status_code == 403
        assert client.post("/workspace/tokens/", {"name": "x", "scopes": ["read"]}).status_code == 403
        assert client.post(f"/workspace/tokens/{issued.token.key_id}/revoke/").status_code == 403
    assert authenticate_token(issued.secret) is not None and ApiToken.objects.count() == 1


def test_other_workspaces_owner_cannot_revoke(client, charlie, workspace):
    issued = create_token(workspace=workspace, name="keep", scopes=["read"])
    client.force_login(charlie)
    assert issued.token.key_id.encode() not in client.get("/workspace/tokens/").content
    assert client.post(f"/workspace/tokens/{issued.token.key_id}/revoke/").status_code == 404
    assert authenticate_token(issued.secret) is not None


def test_anonymous_is_sent_to_login(client, db):
    response = client.get("/workspace/tokens/")
    assert response.status_code == 302 and "login" in response["Location"]
