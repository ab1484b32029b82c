"""The rate limiter's two paths judge alike: on Redis one Lua script per check (both budgets, one
round trip), on other caches (local memory in the embedded profile) the cache API.

The same scenario runs on both and must give the same decisions, retry_after included, and leave
the same counts: a refused request is not counted, the workspace budget applies across tokens.
Needs Redis (``LIVE_REDIS_BASE``, default ``redis://127.0.0.1:6379``, db 12; every test counts
under a key prefix of its own, nothing is flushed); the Redis cases are skipped when none answers.
"""

from __future__ import annotations

import os

import pytest
import redis

from accounts import ratelimit
from accounts.ratelimit import RateLimited, check_request, hit

REDIS_URL = os.environ.get("LIVE_REDIS_BASE", "redis://127.0.0.1:6379") + "/12"
LOCMEM = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "ratelimit-paths"}
REDIS = {"BACKEND": "workbench.cache.SharedPoolRedisCache", "LOCATION": REDIS_URL}
T0 = 1_800_000_000.0  # a multiple of 60: windows and buckets start here


def _redis_or_skip():
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
    except redis.exceptions.ConnectionError:
        pytest.skip(f"no Redis at {REDIS_URL}")


def _use(settings, path: str) -> None:
    """Count in a local-memory cache or in Redis, through the Lua script or, with "redis-api",
    through the cache API (what any non-Redis cache gets)."""
    if path != "locmem":
        _redis_or_skip()
    settings.CACHES = {"default": LOCMEM, "rl": LOCMEM if path == "locmem" else REDIS}
    settings.WORKBENCH_RATE_LIMIT_CACHE = "rl"


def _check(credential: str, now: float, **kwargs) -> tuple:
    try:
        decision = check_request(workspace_id=7, credential=credential, now=T0 + now, **kwargs)
    except RateLimited as exc:
        return (exc.scope, exc.decision.limit, exc.decision.remaining, exc.decision.retry_after)
    return ("ok", decision.limit, decision.remaining, decision.retry_after)


def _counts() -> dict[str, int]:
    """What each budget holds now (peek reads the buckets with get_many, the cache API)."""
    keys = {"a": "ws7:token:a", "b": "ws7:token:b", "c": "ws7:token:c", "workspace": "ws7"}
    return {
        name: 100 - ratelimit.peek(key, limit=101, window=60, now=T0 + 30).remaining
        for name, key in keys.items()
    }


def _scenario() -> dict:
    steps = [
        _check("token:a", 1),
        _check("token:a", 7),  # the next bucket
        _check("token:a", 8),
        _check("token:a", 9),  # refused by the credential's budget: counted in neither
        _check("token:b", 10),
        _check("token:b", 11),  # the workspace's fifth
        _check("token:c", 12),  # refused by the workspace's budget: not counted in c's either
        _check("token:c", 13, credential_limit=50),  # a token's own limit; the workspace's still
        _check("token:a", 66),  # the first bucket has left the windows
        _check("token:c", 67),
        _check("token:b", 72),  # the second has left too
    ]
    counts = _counts()
    single = [hit("single", limit=4, window=60, now=T0 + t, cost=c) for t, c in [(1, 2), (2, 3), (3, 2)]]
    later = hit("single", limit=4, window=60, now=T0 + 66, cost=3)
    return {"steps": steps, "counts": counts, "single": single, "later": later}


@pytest.fixture
def budgets(settings):
    settings.WORKBENCH_RATE_LIMIT_PER_MINUTE = 3
    settings.WORKBENCH_RATE_LIMIT_WORKSPACE_PER_MINUTE = 5
    settings.WORKBENCH_RATE_LIMIT_WINDOW_SECONDS = 60


def test_the_scenario_on_local_memory(settings, budgets):
    _use(settings, "locmem")
    result = _scenario()
    assert result["steps"] == [
        ("ok", 3, 2, 0),
        ("ok", 3, 1, 0),
        ("ok", 3, 0, 0),
        ("credential", 3, 0, 57),  # a's first request leaves its window at 66
        ("ok", 3, 2, 0),
        ("ok", 3, 1, 0),
        ("workspace", 5, 0, 54),
        ("workspace", 5, 0, 53),
        ("ok", 3, 0, 0),
        ("workspace", 5, 0, 5),  # the workspace's four of the second bucket leave at 72
        ("ok", 3, 2, 0),
    ]
    # Within the first 30 s: no refusal was counted anywhere (c's two, refused by the workspace's
    # budget, not in c's own either).
    assert result["counts"] == {"a": 3, "b": 2, "c": 0, "workspace": 5}
    assert [d.allowed for d in result["single"]] == [True, False, True]  # the refused 3 not counted
    assert result["later"].allowed and result["later"].remaining == 1


@pytest.mark.parametrize("path", ["redis", "redis-api"])
def test_redis_judges_as_local_memory(settings, budgets, monkeypatch, path):
    _use(settings, "locmem")
    expected = _scenario()
    settings.WORKBENCH_RATE_LIMIT_KEY_PREFIX += ":redis"
    _use(settings, path)
    assert isinstance(ratelimit._cache(), ratelimit.RedisCache)
    if path == "redis":

        def no_cache_api(*args, **kwargs):
            raise AssertionError("the cache API was used on Redis")

        monkeypatch.setattr(ratelimit, "_count_in_cache", no_cache_api)
    else:  # the cache API against Redis: the script and it count the same keys the same way

        class NotRedis:
            pass

        monkeypatch.setattr(ratelimit, "RedisCache", NotRedis)
    assert _scenario() == expected


def test_one_round_trip_per_check_on_redis(settings, budgets, monkeypatch):
    _use(settings, "redis")
    _check("token:a", 1)  # loads the script if this Redis has not seen it
    sent = []
    real = redis.Redis.execute_command

    def counting(self, *args, **options):
        sent.append(args[0])
        return real(self, *args, **options)

    monkeypatch.setattr(redis.Redis, "execute_command", counting)
    assert _check("token:a", 2)[0] == "ok"  # both budgets judged
    assert _check("token:a", 3)[0] == "ok"
    assert _check("token:a", 4)[0] == "credential"  # refused, the count undone
    assert sent == ["EVALSHA"] * 3
