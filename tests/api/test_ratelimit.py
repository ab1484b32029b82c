"""The cache-backed rate limiter (fixed windows per workspace and credential)."""

from __future__ import annotations

import pytest
from django.test import override_settings

from accounts.ratelimit import RateLimited, check_request, hit


def test_counts_within_a_window_and_resets_in_the_next():
    t0 = 1_000_040.0  # 20 s into a 60 s window (windows start at multiples of 60)
    decisions = [hit("k", limit=3, window=60, now=t0 + i) for i in range(4)]
    assert [d.allowed for d in decisions] == [True, True, True, False]
    assert decisions[2].remaining == 0
    assert decisions[3].retry_after == 60 - 23  # seconds left in the window
    assert hit("k", limit=3, window=60, now=t0 + 40).allowed  # next window


def test_keys_are_independent():
    assert hit("a", limit=1, window=60, now=5.0).allowed
    assert not hit("a", limit=1, window=60, now=6.0).allowed
    assert hit("b", limit=1, window=60, now=6.0).allowed


@override_settings(WORKBENCH_RATE_LIMIT_PER_MINUTE=2, WORKBENCH_RATE_LIMIT_WORKSPACE_PER_MINUTE=3)
def test_credential_and_workspace_budgets():
    check_request(workspace_id=1, credential="token:a")
    check_request(workspace_id=1, credential="token:a")
    with pytest.raises(RateLimited) as exc:
        check_request(workspace_id=1, credential="token:a")
    assert exc.value.scope == "credential" and exc.value.decision.retry_after >= 1
    check_request(
        workspace_id=1, credential="token:b"
    )  # workspace total now 3 (the refused one was not counted)
    with pytest.raises(RateLimited) as exc:
        check_request(workspace_id=1, credential="token:c")
    assert exc.value.scope == "workspace"
    # A token's own limit overrides the default.
    check_request(workspace_id=2, credential="token:z", credential_limit=5)
