"""Failed sign-ins are limited per account name and per client address (shared cache, sliding)."""

from __future__ import annotations

import re

import pytest

LOGIN = "/accounts/login/"


@pytest.fixture
def limits(settings):
    settings.WORKBENCH_LOGIN_FAILURES_PER_ACCOUNT = 3
    settings.WORKBENCH_LOGIN_FAILURES_PER_ADDRESS = 5


def attempt(client, username, password, address="198.51.100.7"):
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address)


def test_an_account_is_locked_after_its_failures_even_with_the_right_password(client, alice, bob, limits):
    for _ in range(3):
        assert attempt(client, "alice", "guess", address=f"203.0.113.{_}").status_code == 200
    r = attempt(client, "alice", "alice-password-123", address="203.0.113.99")
    assert r.status_code == 429 and int(r["Retry-After"]) >= 1
    assert b"Too many failed sign-in attempts" in r.content
    assert "_auth_user_id" not in client.session
    # another account from another address is not affected
    assert attempt(client, "bob", "bob-password-123", address="203.0.113.50").status_code == 302


def test_an_address_is_limited_across_account_names(client, alice, limits):
    for i in range(5):
        attempt(client, f"someone{i}", "guess")
    assert attempt(client, "alice", "alice-password-123").status_code == 429
    assert attempt(client, "alice", "alice-password-123", address="192.0.2.1").status_code == 302


def test_the_refusal_does_not_tell_whether_the_account_exists(client, alice, limits):
    pages = {}
    for name in ("alice", "nobody-here"):
        for i in range(3):
            attempt(client, name, "guess", address=f"198.51.100.{i + (10 if name == 'alice' else 20)}")
        r = attempt(client, name, "guess", address="192.0.2.200" if name == "alice" else "192.0.2.201")
        html = r.content.decode().replace(name, "NAME")
        main = html[html.index('id="main"') : html.index("csrfmiddlewaretoken")]
        pages[name] = (r.status_code, re.sub(r"[0-9]+ seconds", "N seconds", main))  # time passes
    assert pages["alice"][0] == pages["nobody-here"][0] == 429
    assert pages["alice"][1] == pages["nobody-here"][1]


def test_successful_sign_ins_are_not_counted(client, alice, limits):
    for _ in range(6):
        assert attempt(client, "alice", "alice-password-123").status_code == 302
        client.logout()
