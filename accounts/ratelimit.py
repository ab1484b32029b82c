"""Rate limits per workspace and per credential, counted in Django's cache.

A fixed window counter: ``cache.add`` then ``cache.incr`` are atomic in the Redis cache (the
scaled profile, shared by every process) and in the local-memory cache (the embedded profile,
one process). A caller over its limit gets the number of seconds until the window resets.

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
    retry_after: int  # seconds until the current window resets (0 when allowed)


class RateLimited(Exception):
    def __init__(self, decision: RateDecision, scope: str) -> None:
        super().__init__(f"rate limit of {decision.limit} requests per window exceeded ({scope})")
        self.decision = decision
        self.scope = scope


def window_seconds() -> int:
    return int(getattr(settings, "WORKBENCH_RATE_LIMIT_WINDOW_SECONDS", 60))


def _cache():
    return caches[getattr(settings, "WORKBENCH_RATE_LIMIT_CACHE", "default")]


def hit(key: str, *, limit: int, window: int | None = None, now: float | None = None) -> RateDecision:
    """Count one request against ``key`` and say whether it is within ``limit`` per window."""
    window = window or window_seconds()
    now = time.time() if now is None else now
    start = math.floor(now / window) * window
    prefix = getattr(settings, "WORKBENCH_RATE_LIMIT_KEY_PREFIX", "wb:rl")
    cache_key = f"{prefix}:{key}:{start}"
    cache = _cache()
    if cache.add(cache_key, 1, timeout=window + 5):
        count = 1
    else:
        try:
            count = cache.incr(cache_key)
        except ValueError:  # expired between add and incr: a new window
            cache.add(cache_key, 1, timeout=window + 5)
            count = 1
    retry_after = max(1, math.ceil(start + window - now))
    if count > limit:
        return RateDecision(False, limit, 0, retry_after)
    return RateDecision(True, limit, limit - count, 0)


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
