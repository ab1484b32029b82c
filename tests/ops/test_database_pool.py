"""DATABASE_URL ?pool=on: Django's PostgreSQL connection pool, one per process; the SQLite
(embedded) profile is unchanged. And the Redis cache shares one connection pool per process."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.env import EnvError, database_from_url

BASE = Path("/srv")


def test_no_pool_by_default():
    settings = database_from_url("postgres://u@h:5432/db", base_dir=BASE)
    assert "OPTIONS" not in settings and settings["CONN_MAX_AGE"] == 0


def test_pool_on_with_defaults_and_sizes():
    settings = database_from_url("postgres://u@h:5432/db?pool=on", base_dir=BASE)
    assert settings["OPTIONS"] == {"pool": {"min_size": 2, "max_size": 10, "timeout": 30}}
    assert settings["CONN_MAX_AGE"] == 0
    sized = database_from_url("postgres://u@h/db?pool=1&pool_max=4&pool_min=0&pool_timeout=5", base_dir=BASE)
    assert sized["OPTIONS"]["pool"] == {"min_size": 0, "max_size": 4, "timeout": 5}
    assert "OPTIONS" not in database_from_url("postgres://u@h/db?pool=off", base_dir=BASE)


@pytest.mark.parametrize(
    "query",
    ["pool=on&conn_max_age=60", "pool=maybe", "pool_max=4", "pool=on&pool_max=0", "pool=on&pool_min=5&pool_max=2",
     "pool=on&pool_timeout=x", "conn_max_age=-1"],
)  # fmt: skip
def test_bad_pool_options_fail_loudly(query):
    with pytest.raises(EnvError):
        database_from_url(f"postgres://u@h/db?{query}", base_dir=BASE)


def test_sqlite_profile_unchanged():
    settings = database_from_url("sqlite:///var/db.sqlite3?pool=on", base_dir=BASE)
    assert settings["ENGINE"] == "django.db.backends.sqlite3" and "pool" not in settings["OPTIONS"]


def test_redis_cache_clients_share_one_pool():
    pytest.importorskip("redis")
    from workbench.cache import SharedPoolRedisCache

    first = SharedPoolRedisCache("redis://127.0.0.1:6379/7", {})
    second = SharedPoolRedisCache("redis://127.0.0.1:6379/7", {})  # another request's context
    other = SharedPoolRedisCache("redis://127.0.0.1:6379/8", {})
    pool = first._cache._get_connection_pool(write=True)
    assert second._cache._get_connection_pool(write=True) is pool
    assert other._cache._get_connection_pool(write=True) is not pool
