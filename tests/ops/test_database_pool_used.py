"""The scaled profile's connection pool in use, on PostgreSQL: scripts/scaled.py's DATABASE_URL
(``?pool=on`` with the sizes from the environment) becomes Django's ``OPTIONS["pool"]``, and a
connection closed at the end of a request goes back to the pool: later requests get the pool's
PostgreSQL backends again (at most its size), where without the pool each one starts a new one. Skipped on SQLite."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from django.db import connection
from django.db.backends.postgresql.base import DatabaseWrapper

from workbench.env import EnvError, database_from_url

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from scaled import database_url  # noqa: E402

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_scaled_profile_pools_by_default_with_sizes_from_the_environment():
    url = "postgres://postgres@127.0.0.1:5432/workbench"
    assert database_url(url, {}) == url + "?pool=on"
    sized = database_url(url, {"WORKBENCH_DB_POOL_MAX": "4", "WORKBENCH_DB_POOL_TIMEOUT": "5"})
    assert database_from_url(sized, base_dir=Path("/srv"))["OPTIONS"]["pool"] == {
        "min_size": 2, "max_size": 4, "timeout": 5,
    }  # fmt: skip
    assert database_url(url, {"WORKBENCH_DB_POOL": "off"}) == url + "?conn_max_age=60"
    with pytest.raises(EnvError):  # a bad size fails at start, in words
        database_from_url(database_url(url, {"WORKBENCH_DB_POOL_MAX": "many"}), base_dir=Path("/srv"))


def _backend_pids(settings: dict, requests: int) -> tuple[list[int], dict[str, int]]:
    """The PostgreSQL backend of each of ``requests`` requests (a connection opened, one query,
    closed as Django closes it when a request ends), and the pool's counters ({} without one)."""
    wrapper = DatabaseWrapper(settings, alias="pool_probe")
    pids = []
    try:
        for _ in range(requests):
            with wrapper.cursor() as cursor:
                cursor.execute("SELECT pg_backend_pid()")
                pids.append(cursor.fetchone()[0])
            wrapper.close()
        stats = wrapper.pool.get_stats() if wrapper.pool is not None else {}
    finally:
        wrapper.close_pool()  # no pooled connection outlives the test (the test database is dropped)
    return pids, stats


def _settings(environ: dict[str, str]) -> dict:
    """The test database's settings with what scripts/scaled.py's DATABASE_URL makes of them."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only")
    ours = connection.settings_dict
    url = f"postgres://{ours['USER']}@{ours['HOST']}:{ours['PORT']}/{ours['NAME']}"
    made = database_from_url(database_url(url, environ), base_dir=Path("/srv"))
    settings = {**ours, "CONN_MAX_AGE": made["CONN_MAX_AGE"]}
    settings["OPTIONS"] = {**ours.get("OPTIONS", {}), **made.get("OPTIONS", {})}
    if "pool" not in made.get("OPTIONS", {}):
        settings["OPTIONS"].pop("pool", None)
    return settings


def test_requests_share_the_pools_backends():
    settings = _settings({"WORKBENCH_DB_POOL_MAX": "3", "WORKBENCH_DB_POOL_MIN": "1"})
    assert settings["OPTIONS"]["pool"] == {"min_size": 1, "max_size": 3, "timeout": 30}
    pids, stats = _backend_pids(settings, 5)
    assert len(set(pids)) <= 3, pids  # the pool's backends, borrowed and given back, never a 4th
    assert stats["requests_num"] >= 5 and stats["pool_max"] == 3, stats


def test_without_the_pool_each_request_starts_a_backend():
    settings = _settings({"WORKBENCH_DB_POOL": "off"})
    assert "pool" not in settings["OPTIONS"]
    pids, stats = _backend_pids(settings, 3)
    assert len(set(pids)) == 3 and stats == {}, pids
