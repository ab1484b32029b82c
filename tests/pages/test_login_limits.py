"""Failed sign-ins are limited per (account name, address) and per address, and slowed down per
account name, never locking the owner out from a new address (shared cache, sliding)."""

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


def test_guesses_lock_the_guessing_address_out_not_the_owner_from_a_new_one(client, alice, bob, limits):
    """Issue 23 §5: ten wrong passwords locked the account for everyone, the owner included."""
    for _ in range(3):
        assert attempt(client, "alice", "guess", address="203.0.113.1").status_code == 200
    r = attempt(client, "alice", "alice-password-123", address="203.0.113.1")
    assert r.status_code == 429 and int(r["Retry-After"]) >= 1
    assert b"Too many failed sign-in attempts" in r.content
    assert "_auth_user_id" not in client.session
    # the owner, from another address, signs in with the right password
    assert attempt(client, "alice", "alice-password-123", address="192.0.2.44").status_code == 302
    client.logout()
    # another account from the guessing address is not affected
    assert attempt(client, "bob", "bob-password-123", address="203.0.113.1").status_code == 302


def test_guesses_from_many_addresses_slow_the_name_down_without_locking_it(client, alice, limits, settings):
    settings.WORKBENCH_LOGIN_SLOWDOWN_SECONDS = 30
    for i in range(3):
        assert attempt(client, "alice", "guess", address=f"203.0.113.{i}").status_code == 200
    # under attack: each address gets one attempt per slowdown period
    assert attempt(client, "alice", "guess", address="203.0.113.50").status_code == 200
    slowed = attempt(client, "alice", "guess", address="203.0.113.50")
    assert slowed.status_code == 429 and 1 <= int(slowed["Retry-After"]) <= 34  # 30 s + one bucket
    # the owner's first attempt from a new address goes through at once
    assert attempt(client, "alice", "alice-password-123", address="192.0.2.44").status_code == 302


def test_an_address_is_limited_across_account_names(client, alice, limits):
    for i in range(5):
        attempt(client, f"someone{i}", "guess")
    assert attempt(client, "alice", "alice-password-123").status_code == 429
    assert attempt(client, "alice", "alice-password-123", address="192.0.2.1").status_code == 302


def test_the_refusal_does_not_tell_whether_the_account_exists(client, alice, limits):
    pages = {}
    for name in ("alice", "nobody-here"):
        address = "198.51.100.10" if name == "alice" else "198.51.100.20"
        for _ in range(3):
            attempt(client, name, "guess", address=address)
        r = attempt(client, name, "guess", address=address)
        html = r.content.decode().replace(name, "NAME")
        main = html[html.index('id="main"') : html.index("csrfmiddlewaretoken")]
        pages[name] = (r.status_code, re.sub(r"[0-9]+ seconds", "N seconds", main))  # time passes
    assert pages["alice"][0] == pages["nobody-here"][0] == 429
    assert pages["alice"][1] == pages["nobody-here"][1]


def test_successful_sign_ins_are_not_counted(client, alice, limits):
    for _ in range(6):
        assert attempt(client, "alice", "alice-password-123").status_code == 302
        client.logout()


def test_the_slowdown_reads_the_same_for_unknown_names(client, alice, limits, settings):
    settings.WORKBENCH_LOGIN_SLOWDOWN_SECONDS = 30
    statuses = {}
    for name in ("alice", "nobody-here"):
        for i in range(3):
            attempt(client, name, "guess", address=f"203.0.113.{i + (10 if name == 'alice' else 20)}")
        first = attempt(client, name, "guess", address="192.0.2.9" if name == "alice" else "192.0.2.19")
        second = attempt(client, name, "guess", address="192.0.2.9" if name == "alice" else "192.0.2.19")
        statuses[name] = (first.status_code, second.status_code)
    assert statuses["alice"] == statuses["nobody-here"] == (200, 429)
