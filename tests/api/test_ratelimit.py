"""The cache-backed rate limiter (sliding windows per workspace and credential)."""

from __future__ import annotations

import pytest
from django.test import override_settings

from accounts.ratelimit import RateLimited, check_request, hit


def test_counts_within_a_window_and_frees_up_as_it_slides():
    t0 = 1_000_040.0  # 20 s into a 60 s window (windows start at multiples of 60)
    decisions = [hit("k", limit=3, window=60, now=t0 + i) for i in range(4)]
    assert [d.allowed for d in decisions] == [True, True, True, False]
    assert decisions[2].remaining == 0
    retry = decisions[3].retry_after
    assert 57 <= retry <= 57 + 6  # the first request leaves the window (one bucket of slack)
    assert not hit("k", limit=3, window=60, now=t0 + 3 + retry - 2).allowed
    assert hit("k", limit=3, window=60, now=t0 + 3 + retry).allowed


@pytest.mark.parametrize("limit", [1, 10, 100])
def test_no_window_edge_lets_twice_the_limit_through(limit):
    """The whole budget spent just before a window ends, then again just after it: a fixed
    window admitted 2x the limit within a second; within any 60 s at most the limit passes."""
    edge = 1_000_020.0  # 1_000_020 is a multiple of 60
    times = [edge - 0.5 + i * 0.001 for i in range(limit)] + [edge + 0.5 + i * 0.001 for i in range(limit)]
    allowed = [t for t in times if hit("edge", limit=limit, window=60, now=t).allowed]
    assert len(allowed) == limit
    # and a steady trickle over several windows never exceeds the limit in any 60 s span
    trickle = [edge + 100 + i * 0.7 for i in range(600)]
    passed = [t for t in trickle if hit("trickle", limit=limit, window=60, now=t).allowed]
    for i, t in enumerate(passed):
        assert sum(1 for u in passed[i:] if u < t + 60) <= limit


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
