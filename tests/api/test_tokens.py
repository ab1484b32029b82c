"""API tokens: shown once, stored hashed, scopes, expiry, revocation, and the tokens CLI."""

from __future__ import annotations

import io
import json
import logging
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from accounts.models import ApiToken
from accounts.tokens import (
    TokenError,
    authenticate_token,
    create_token,
    hash_secret,
    parse_duration,
    revoke_token,
)


def test_token_is_stored_only_as_hash(workspace):
    issued = create_token(workspace=workspace, name="ci", scopes=["write", "read"])
    row = ApiToken.objects.get(pk=issued.token.pk)
    secret_part = issued.secret.split("_", 2)[2]
    assert issued.secret.startswith(f"wbt_{row.key_id}_")
    assert row.secret_hash == hash_secret(secret_part)
    assert secret_part not in (row.secret_hash, row.key_id, row.name)
    assert row.scopes == ["read", "write"]  # normalised order
    assert authenticate_token(issued.secret) == row


@pytest.mark.parametrize(
    "mangle",
    [
        lambda s: s[:-1] + ("A" if s[-1] != "A" else "B"),
        lambda s: s + "x",
        lambda s: "",
        lambda s: "nonsense",
    ],
)
def test_wrong_or_malformed_token_is_refused(workspace, mangle):
    issued = create_token(workspace=workspace, name="ci", scopes=["read"])
    assert authenticate_token(mangle(issued.secret)) is None


def test_expired_and_revoked_tokens_are_refused(workspace):
    issued = create_token(workspace=workspace, name="short", scopes=["read"], expires_in=timedelta(hours=1))
    assert authenticate_token(issued.secret) is not None
    ApiToken.objects.filter(pk=issued.token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert authenticate_token(issued.secret) is None

    other = create_token(workspace=workspace, name="long", scopes=["read"])
    revoke_token(workspace=workspace, key_id=other.token.key_id)
    assert authenticate_token(other.secret) is None


def test_revoke_is_scoped_to_the_workspace(workspace, other_workspace):
    issued = create_token(workspace=workspace, name="ci", scopes=["read"])
    with pytest.raises(ApiToken.DoesNotExist):
        revoke_token(workspace=other_workspace, key_id=issued.token.key_id)
    assert authenticate_token(issued.secret) is not None


@pytest.mark.parametrize(
    "kwargs", [{"scopes": []}, {"scopes": ["admin"]}, {"name": " "}, {"expires_in": timedelta(seconds=-1)}]
)
def test_invalid_token_requests(workspace, kwargs):
    args = {"workspace": workspace, "name": "x", "scopes": ["read"], **kwargs}
    with pytest.raises(TokenError):
        create_token(**args)


def test_parse_duration():
    assert parse_duration("30d") == timedelta(days=30)
    assert parse_duration("90m") == timedelta(minutes=90)
    with pytest.raises(TokenError):
        parse_duration("soon")


def test_cli_create_list_revoke(workspace, alice):
    out = io.StringIO()
    call_command(
        "tokens",
        "create",
        "--workspace",
        "acme",
        "--name",
        "pipeline",
        "--scopes",
        "read,write",
        "--expires-in",
        "30d",
        "--user",
        "alice",
        "--json",
        stdout=out,
    )
    created = json.loads(out.getvalue())
    assert created["scopes"] == ["read", "write"] and created["status"] == "active"
    token = authenticate_token(created["token"])
    assert token is not None and token.created_by == alice and token.expires_at is not None

    out = io.StringIO()
    call_command("tokens", "list", "--workspace", "acme", "--json", stdout=out)
    listed = json.loads(out.getvalue())
    assert [t["keyId"] for t in listed] == [created["keyId"]]
    assert "token" not in listed[0] and created["token"] not in out.getvalue()

    call_command("tokens", "revoke", created["keyId"], "--workspace", "acme", stdout=io.StringIO())
    assert authenticate_token(created["token"]) is None
    out = io.StringIO()
    call_command("tokens", "list", "--workspace", "acme", stdout=out)
    assert "revoked" in out.getvalue()


def test_cli_refuses_unknown_workspace_scope_and_token(workspace):
    with pytest.raises(CommandError):
        call_command("tokens", "list", "--workspace", "nope")
    with pytest.raises(CommandError):
        call_command(
            "tokens", "create", "--workspace", "acme", "--name", "x", "--scopes", "root", stdout=io.StringIO()
        )
    with pytest.raises(CommandError):
        call_command("tokens", "revoke", "abcdef", "--workspace", "acme")


@pytest.mark.parametrize("header", ["Token {t}", "Basic {t}", "bearer{t}", "{t}", "Bearer  {t}x"])
def test_a_token_with_the_wrong_scheme_is_refused_and_never_logged(
    client, workspace, settings, caplog, header
):
    settings.DEBUG = True  # django-ninja logs the whole header at ERROR in DEBUG
    issued = create_token(workspace=workspace, name="ci", scopes=["read"])
    secret = issued.secret.split("_", 2)[2]
    with caplog.at_level(logging.DEBUG):
        r = client.get("/api/runs", headers={"Authorization": header.format(t=issued.secret)})
    assert r.status_code == 401
    assert secret not in caplog.text and issued.secret not in caplog.text
    assert all(secret not in str(rec.args) for rec in caplog.records)
