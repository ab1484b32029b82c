"""Rate limits per workspace and per credential, counted in Django's cache.

A sliding window: each key counts in buckets of a tenth of the window in the cache
(``cache.add`` then ``cache.incr``, atomic in the Redis cache of the scaled profile, shared by
every process, and in the local-memory cache of the embedded profile), and a request is judged
on every bucket that overlaps the last ``window`` seconds. A burst at the end of one minute
therefore still counts at the start of the next: the fixed window's edge, where twice the
limit got through, is gone. A refused request is not counted. A caller over its limit gets the
seconds until one more fits.

Two budgets apply to every authenticated API request:
- the credential's (a token, or a person's session), ``WORKBENCH_RATE_LIMIT_PER_MINUTE`` per
  window unless the token carries its own ``rate_limit``;
- the workspace's total, ``WORKBENCH_RATE_LIMIT_WORKSPACE_PER_MINUTE`` (0 = no workspace cap).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import caches


@dataclass(frozen=True)
class RateDecision:
    allowed: bool
    limit: int
    remaining: int
    retry_after: int  # seconds until the request would fit (0 when allowed)


class RateLimited(Exception):
    def __init__(self, decision: RateDecision, scope: str) -> None:
        super().__init__(f"rate limit of {decision.limit} requests per window exceeded ({scope})")
        self.decision = decision
        self.scope = scope


def window_seconds() -> int:
    return int(getattr(settings, "WORKBENCH_RATE_LIMIT_WINDOW_SECONDS", 60))


def _cache():
    return caches[getattr(settings, "WORKBENCH_RATE_LIMIT_CACHE", "default")]


BUCKETS = 10  # per window: the window slides in steps of window / BUCKETS


def _buckets(key: str, window: int, now: float) -> tuple[list[str], float, int]:
    """Cache keys of the BUCKETS + 1 buckets that overlap the last ``window`` seconds (oldest
    first), the bucket width, and the index of the current bucket."""
    width = window / BUCKETS
    current = math.floor(now / width)
    prefix = getattr(settings, "WORKBENCH_RATE_LIMIT_KEY_PREFIX", "wb:rl")
    return [f"{prefix}:{key}:{window}:{i}" for i in range(current - BUCKETS, current + 1)], width, current


def _counts(cache, keys: list[str]) -> list[int]:
    found = cache.get_many(keys)
    return [int(found.get(k) or 0) for k in keys]


def _retry_after(counts: list[int], limit: int, cost: int, width: float, current: int, now: float) -> int:
    """Seconds until ``cost`` more fits: the oldest buckets leave the window one by one."""
    total = sum(counts)
    for offset, count in enumerate(counts):
        total -= count
        if total + cost <= limit:
            leaves = (current - BUCKETS + offset + BUCKETS + 1) * width  # end of the window it leaves
            return max(1, math.ceil(leaves - now))
    return max(1, math.ceil((current + BUCKETS + 1) * width - now))


def peek(key: str, *, limit: int, window: int | None = None, now: float | None = None) -> RateDecision:
    """Whether one more request under ``key`` would be allowed, without counting it."""
    window = window or window_seconds()
    now = time.time() if now is None else now
    keys, width, current = _buckets(key, window, now)
    counts = _counts(_cache(), keys)
    if sum(counts) + 1 > limit:
        return RateDecision(False, limit, 0, _retry_after(counts, limit, 1, width, current, now))
    return RateDecision(True, limit, limit - sum(counts) - 1, 0)


def hit(
    key: str, *, limit: int, window: int | None = None, now: float | None = None, cost: int = 1
) -> RateDecision:
    """Count ``cost`` requests against ``key`` if they fit within ``limit`` per sliding window.

    Every bucket that overlaps the last ``window`` seconds counts in full, so no span of
    ``window`` seconds ever admits more than ``limit`` (the price: a request may be held up to
    one bucket, window / BUCKETS, longer than strictly needed)."""
    window = window or window_seconds()
    now = time.time() if now is None else now
    keys, width, current = _buckets(key, window, now)
    cache = _cache()
    timeout = 2 * window + 5
    if cache.add(keys[-1], cost, timeout=timeout):
        mine = cost
    else:
        try:
            mine = cache.incr(keys[-1], cost)
        except ValueError:  # expired between add and incr
            cache.add(keys[-1], cost, timeout=timeout)
            mine = cost
    counts = _counts(cache, keys[:-1]) + [mine]
    total = sum(counts)
    if total > limit:
        try:
            cache.decr(keys[-1], cost)  # a refused request is not counted
        except ValueError:
            pass
        counts[-1] -= cost
        return RateDecision(False, limit, 0, _retry_after(counts, limit, cost, width, current, now))
    return RateDecision(True, limit, limit - total, 0)


def check_request(*, workspace_id: int, credential: str, credential_limit: int | None = None) -> RateDecision:
    """Apply the credential's and the workspace's budgets; raise RateLimited when one is spent."""
    limit = credential_limit or int(settings.WORKBENCH_RATE_LIMIT_PER_MINUTE)
    decision = hit(f"ws{workspace_id}:{credential}", limit=limit)
    if not decision.allowed:
        raise RateLimited(decision, "credential")
    workspace_limit = int(getattr(settings, "WORKBENCH_RATE_LIMIT_WORKSPACE_PER_MINUTE", 0))
    if workspace_limit > 0:
        ws_decision = hit(f"ws{workspace_id}", limit=workspace_limit)
        if not ws_decision.allowed:
            raise RateLimited(ws_decision, "workspace")
    return decision
