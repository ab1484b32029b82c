"""The sliding-window limiter counts in the shared cache: several processes (several web servers of
the scaled profile) against one Redis admit no more than the limit together.

Needs Redis: ``REDIS_TEST_URL`` (default ``redis://127.0.0.1:6379/0``); skipped when none answers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

REDIS_URL = os.environ.get("REDIS_TEST_URL") or "redis://127.0.0.1:6379/0"
ROOT = Path(__file__).resolve().parents[2]
LIMIT = 40
ATTEMPTS = 40  # per process: each alone could spend the whole budget

# One process of the scaled profile: Django configured with REDIS_URL, hitting one key. All
# processes use the same clock value, so the test never straddles a bucket edge.
WORKER = """
import json, os, sys
import django
django.setup()
from accounts import ratelimit
key, limit, attempts, now, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
while not os.path.exists(go):  # start together
    pass
allowed = sum(ratelimit.hit(key, limit=limit, window=60, now=now).allowed for _ in range(attempts))
print(json.dumps({"allowed": allowed, "cache": type(ratelimit._cache()).__name__}))
"""


def _redis_or_skip():
    redis = pytest.importorskip("redis")
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping()
    except redis.exceptions.ConnectionError:
        pytest.skip(f"no Redis at {REDIS_URL}")


def _run_processes(n: int, key: str, tmp_path: Path) -> list[dict]:
    go = tmp_path / "go"
    env = {
        **os.environ,
        "REDIS_URL": REDIS_URL,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "PYTHONPATH": str(ROOT),
    }
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, key, str(LIMIT), str(ATTEMPTS), "1800000000.0", str(go)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(n)
    ]
    go.touch()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def test_two_processes_against_one_redis_count_together(tmp_path):
    _redis_or_skip()
    key = f"test-shared-{uuid.uuid4().hex}"
    results = _run_processes(2, key, tmp_path)
    assert {r["cache"] for r in results} == {"SharedPoolRedisCache"}  # Django's RedisCache, pool shared
    allowed = [r["allowed"] for r in results]
    # Each process alone would have admitted ATTEMPTS == LIMIT; together they admit the limit once.
    assert sum(allowed) <= LIMIT, allowed
    assert sum(allowed) >= LIMIT - 2, allowed  # contention may refuse a request or two, never admit more


def test_two_cache_clients_see_each_others_counts(settings):
    """The same in one process: two independent Redis clients (two connections) share the count."""
    _redis_or_skip()
    from django.core.cache.backends.redis import RedisCache

    from accounts import ratelimit

    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "one": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL},
        "two": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL},
    }
    key, now = f"test-clients-{uuid.uuid4().hex}", 1_800_000_000.0
    settings.WORKBENCH_RATE_LIMIT_CACHE = "one"
    first = [ratelimit.hit(key, limit=5, window=60, now=now).allowed for _ in range(3)]
    assert isinstance(ratelimit._cache(), RedisCache)
    settings.WORKBENCH_RATE_LIMIT_CACHE = "two"
    second = [ratelimit.hit(key, limit=5, window=60, now=now).allowed for _ in range(3)]
    assert first == [True, True, True]
    assert second == [True, True, False]  # the second client sees the first one's three
