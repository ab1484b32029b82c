"""Rate limits per workspace and per credential, counted in Django's cache.

A sliding window: each key counts in buckets of a tenth of the window in the cache (the Redis
cache of the scaled profile, shared by every process, or the local-memory cache of the embedded
profile), and a request is judged on every bucket that overlaps the last ``window`` seconds.
On Redis a request's whole check, both budgets, is one Lua script (one round trip, atomic); on
other caches it goes through the cache API (``cache.add`` then ``cache.incr``, ``get_many``,
``decr`` when refused), counting the same keys the same way. A burst at the end of one minute
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
from django.core.cache.backends.redis import RedisCache


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
    budget = Budget(key, limit, window or window_seconds(), cost)
    return spend([budget], now=time.time() if now is None else now)[0]


@dataclass(frozen=True)
class Budget:
    key: str
    limit: int
    window: int
    cost: int = 1


def spend(budgets: list[Budget], *, now: float) -> list[RateDecision]:
    """Count one request against each budget in turn, up to the first that refuses it: then its
    count is undone in every budget counted so far (a refused request is counted nowhere, so a
    credential does not spend its own budget on requests its workspace's budget refused). Returns the decisions of the budgets judged (the last one refused, or
    all of them allowed). On Redis one round trip (a Lua script, atomic); on any other cache the
    cache API (add, incr, get_many, decr per budget)."""
    cache = _cache()
    plans = [_buckets(b.key, b.window, now) for b in budgets]
    spends = [
        (keys, b.limit, b.cost, 2 * b.window + 5) for b, (keys, _, _) in zip(budgets, plans, strict=True)
    ]
    if isinstance(cache, RedisCache):
        outcomes = _count_in_redis(cache, spends)
    else:
        outcomes = []
        for keys, limit, cost, timeout in spends:
            outcomes.append(_count_in_cache(cache, keys, limit, cost, timeout))
            if not outcomes[-1][0]:
                for counted_keys, _, counted_cost, _ in spends[: len(outcomes) - 1]:
                    _uncount(cache, counted_keys[-1], counted_cost)
                break
    decisions = []
    for budget, (_, width, current), (allowed, counts) in zip(budgets, plans, outcomes, strict=False):
        if allowed:
            decisions.append(RateDecision(True, budget.limit, budget.limit - sum(counts), 0))
        else:
            retry = _retry_after(counts, budget.limit, budget.cost, width, current, now)
            decisions.append(RateDecision(False, budget.limit, 0, retry))
    return decisions


def _count_in_cache(cache, keys: list[str], limit: int, cost: int, timeout: int) -> tuple[bool, list[int]]:
    """Count ``cost`` in the current (last) bucket, undone if the window then holds more than
    ``limit``: whether it fits, and the buckets' counts (without ``cost`` when refused)."""
    if cache.add(keys[-1], cost, timeout=timeout):
        mine = cost
    else:
        try:
            mine = cache.incr(keys[-1], cost)
        except ValueError:  # expired between add and incr
            cache.add(keys[-1], cost, timeout=timeout)
            mine = cost
    counts = _counts(cache, keys[:-1]) + [mine]
    if sum(counts) > limit:
        _uncount(cache, keys[-1], cost)  # a refused request is not counted
        counts[-1] -= cost
        return False, counts
    return True, counts


def _uncount(cache, key: str, cost: int) -> None:
    try:
        cache.decr(key, cost)
    except ValueError:  # the bucket expired meanwhile: nothing left to undo
        pass


# _count_in_cache for every budget in one script: KEYS are the BUCKETS + 1 bucket keys of each
# budget in turn (oldest first, the current one last), ARGV[1] their number, then limit, cost and
# timeout per budget. The current bucket is made as Django's add makes it (SET NX EX, an integer
# stored as is, so the cache API's get_many and incr read and count it the same way). Returns per
# budget judged: 1 or 0 (fits), then its buckets' counts; stops after a refusal, which undoes the
# request's count in the budgets counted before it too.
_SPEND_LUA = """
local n = tonumber(ARGV[1])
local out = {}
local counted = {}
for b = 0, #KEYS / n - 1 do
  local limit, cost, timeout = tonumber(ARGV[2 + 3 * b]), tonumber(ARGV[3 + 3 * b]), ARGV[4 + 3 * b]
  local current = KEYS[b * n + n]
  local mine = cost
  if not redis.call('SET', current, cost, 'NX', 'EX', timeout) then
    mine = redis.call('INCRBY', current, cost)
  end
  local older = {}
  for i = 1, n - 1 do older[i] = KEYS[b * n + i] end
  local values = redis.call('MGET', unpack(older))
  local flag = #out + 1
  local total = mine
  out[flag] = 1
  for i = 1, n - 1 do
    local count = tonumber(values[i]) or 0
    out[flag + i] = count
    total = total + count
  end
  if total > limit then
    redis.call('DECRBY', current, cost)
    for _, key in ipairs(counted) do redis.call('DECRBY', key[1], key[2]) end
    out[flag] = 0
    out[flag + n] = mine - cost
    return out
  end
  out[flag + n] = mine
  counted[#counted + 1] = {current, cost}
end
return out
"""


def _count_in_redis(
    cache: RedisCache, spends: list[tuple[list[str], int, int, int]]
) -> list[tuple[bool, list[int]]]:
    """_count_in_cache for each budget in turn, in one round trip to Redis (EVALSHA, or EVAL
    once per server when the script is not loaded yet)."""
    keys = [cache.make_and_validate_key(key) for bucket_keys, _, _, _ in spends for key in bucket_keys]
    args = [BUCKETS + 1] + [value for _, limit, cost, timeout in spends for value in (limit, cost, timeout)]
    client = cache._cache.get_client(write=True)
    flat = client.register_script(_SPEND_LUA)(keys=keys, args=args)
    size = BUCKETS + 2
    return [(bool(flat[i]), [int(c) for c in flat[i + 1 : i + size]]) for i in range(0, len(flat), size)]


def check_request(
    *, workspace_id: int, credential: str, credential_limit: int | None = None, now: float | None = None
) -> RateDecision:
    """Apply the credential's and the workspace's budgets; raise RateLimited when one is spent.

    The credential's first: a request either refuses is counted in neither."""
    window = window_seconds()
    budgets = [
        Budget(
            f"ws{workspace_id}:{credential}",
            credential_limit or int(settings.WORKBENCH_RATE_LIMIT_PER_MINUTE),
            window,
        )
    ]
    workspace_limit = int(getattr(settings, "WORKBENCH_RATE_LIMIT_WORKSPACE_PER_MINUTE", 0))
    if workspace_limit > 0:
        budgets.append(Budget(f"ws{workspace_id}", workspace_limit, window))
    decisions = spend(budgets, now=time.time() if now is None else now)
    for scope, decision in zip(("credential", "workspace"), decisions, strict=False):
        if not decision.allowed:
            raise RateLimited(decision, scope)
    return decisions[0]
