"""`workbench createworkspace` and `workbench createuser` (management commands beside `tokens`), and
what `workbench serve` hands its processes. The installed wheel runs them for real in
tests/ops/test_wheel.py."""

from __future__ import annotations

import argparse
import io

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from runs.models import Membership, Role, Workspace
from workbench import cli


def _create_user(*args: str, stdin: str = "", monkeypatch) -> str:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    out = io.StringIO()
    call_command("createuser", *args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_createworkspace_creates_one_and_refuses_a_second_with_the_same_slug():
    out = io.StringIO()
    call_command("createworkspace", "acme", "--name", "Acme Inc", stdout=out)
    assert "created workspace acme" in out.getvalue()
    assert Workspace.objects.get(slug="acme").name == "Acme Inc"
    with pytest.raises(CommandError, match="WORKSPACE_EXISTS") as refused:
        call_command("createworkspace", "acme", "--name", "Other")
    assert refused.value.returncode == 1
    assert Workspace.objects.get(slug="acme").name == "Acme Inc"


@pytest.mark.django_db
@pytest.mark.parametrize("slug", ["Bad Slug", "ACME", "_acme", "a" * 65, "acme\x00"])
def test_createworkspace_refuses_what_is_no_slug(slug):
    with pytest.raises(CommandError, match="INVALID_SLUG"):
        call_command("createworkspace", slug)
    assert not Workspace.objects.exists()


@pytest.mark.django_db
def test_createuser_makes_an_owner_who_can_sign_in(client, monkeypatch):
    call_command("createworkspace", "acme", stdout=io.StringIO())
    out = _create_user(
        "ada",
        "--workspace",
        "acme",
        "--email",
        "ada@example.com",
        "--password-from-stdin",
        stdin="ada-password-123\n",
        monkeypatch=monkeypatch,
    )
    assert "created user ada (owner of acme)" in out
    membership = Membership.objects.get(user__username="ada", workspace__slug="acme")
    assert membership.role == Role.OWNER
    assert client.login(username="ada", password="ada-password-123")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "stdin", "code"),
    [
        (["ada", "--workspace", "nope", "--password-from-stdin"], "ada-password-123\n", "NO_WORKSPACE"),
        (["bob", "--workspace", "acme", "--password-from-stdin"], "short\n", "WEAK_PASSWORD"),
        (["bob", "--workspace", "acme", "--password-from-stdin"], "", "NO_PASSWORD"),
        (["bob", "--workspace", "acme", "--email", "nope"], "", "INVALID_EMAIL"),
        (["bad name!", "--workspace", "acme"], "", "INVALID_USERNAME"),
        (["ada", "--workspace", "acme"], "", "USERNAME_TAKEN"),
    ],
)
def test_createuser_refuses_with_a_code_and_changes_nothing(args, stdin, code, monkeypatch):
    call_command("createworkspace", "acme", stdout=io.StringIO())
    _create_user("ada", "--workspace", "acme", monkeypatch=monkeypatch)  # no password: no prompt off a tty
    users_before = get_user_model().objects.count()
    with pytest.raises(CommandError, match=code) as refused:
        _create_user(*args, stdin=stdin, monkeypatch=monkeypatch)
    assert refused.value.returncode == 1
    assert get_user_model().objects.count() == users_before
    assert Membership.objects.count() == 1


def _serve_options(**overrides) -> argparse.Namespace:
    options = {
        "host": "127.0.0.1",
        "port": 8000,
        "database_url": None,
        "redis_url": None,
        "no_worker": False,
        "debug": False,
    }
    options.update(overrides)
    return argparse.Namespace(**options)


def test_serve_on_loopback_speaks_plain_http_and_flags_override_the_environment(monkeypatch):
    for name in ("SECURE_SSL_REDIRECT", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE", "ALLOWED_HOSTS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATABASE_URL", "sqlite:///elsewhere.sqlite3")
    env = cli._env_for(_serve_options(database_url="postgres://db/wb", redis_url="redis://r:6379/0"))
    assert env["DATABASE_URL"] == "postgres://db/wb" and env["REDIS_URL"] == "redis://r:6379/0"
    assert env["SECURE_SSL_REDIRECT"] == env["SESSION_COOKIE_SECURE"] == env["CSRF_COOKIE_SECURE"] == "0"


def test_serve_on_another_address_keeps_https_defaults_and_allows_that_host(monkeypatch):
    for name in ("SECURE_SSL_REDIRECT", "SESSION_COOKIE_SECURE", "ALLOWED_HOSTS"):
        monkeypatch.delenv(name, raising=False)
    env = cli._env_for(_serve_options(host="10.1.2.3"))
    assert "SECURE_SSL_REDIRECT" not in env and "SESSION_COOKIE_SECURE" not in env
    assert "10.1.2.3" in env["ALLOWED_HOSTS"].split(",")


def test_workbench_dispatches_named_commands_to_django(monkeypatch):
    seen = []
    monkeypatch.setattr(cli, "manage", lambda argv: seen.append(list(argv)) or 0)
    assert cli.main(["demo", "--url", "http://x/"]) == 0
    assert cli.main(["migrate", "-v", "0"]) == 0
    assert cli.main(["manage", "showmigrations"]) == 0
    assert seen == [["demo_data", "--url", "http://x/"], ["migrate", "-v", "0"], ["showmigrations"]]
