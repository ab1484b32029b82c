"""Fixtures for the live path: channel layers (in-memory and Redis), sockets with a session cookie."""

from __future__ import annotations

import os
import uuid

import pytest
from django.test import override_settings

from workbench.env import channel_layer_hosts

REDIS_URL = os.environ.get("REDIS_TEST_URL") or "redis://127.0.0.1:6379/0"
REDIS_DB = int(os.environ.get("LIVE_TEST_REDIS_DB", "9"))
ORIGIN = (b"origin", b"http://127.0.0.1")


def redis_url(db: int = REDIS_DB) -> str:
    base = REDIS_URL.rsplit("/", 1)[0] if REDIS_URL.count("/") > 2 else REDIS_URL
    return f"{base}/{db}"


def redis_available() -> bool:
    try:
        import redis

        return bool(redis.Redis.from_url(redis_url(), socket_connect_timeout=0.5).ping())
    except Exception:
        return False


# A test that cuts every Redis connection of its database has a database of its own, so that it never
# cuts the connections of the tests that run beside it (pytest-xdist) on REDIS_DB.
REDIS_CUT_DB = int(os.environ.get("LIVE_TEST_REDIS_CUT_DB", "8"))


def layer_settings(kind: str, prefix: str, db: int = REDIS_DB) -> dict:
    if kind == "redis":
        return {
            "default": {
                "BACKEND": "channels_redis.core.RedisChannelLayer",
                "CONFIG": {
                    "hosts": channel_layer_hosts(redis_url(db)),
                    "prefix": prefix,
                    "capacity": 1000,
                    "expiry": 30,
                },
            }
        }
    return {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer", "CONFIG": {"capacity": 1000}}}


@pytest.fixture(params=["memory", "redis"])
def channel_layer_kind(request):
    """Each consumer test runs on the in-memory layer and on the local Redis (own key prefix)."""
    kind = request.param
    if kind == "redis" and not redis_available():
        pytest.skip("Redis is not running on 127.0.0.1:6379")
    prefix = f"wbtest{uuid.uuid4().hex[:10]}"
    with override_settings(CHANNEL_LAYERS=layer_settings(kind, prefix), LIVE_COALESCE_SECONDS=0.01):
        from runs.live.publisher import metrics

        metrics.reset()
        yield kind
        from runs.live.consumers import close_render_connection

        close_render_connection()
    if kind == "redis":
        import redis

        client = redis.Redis.from_url(redis_url())
        keys = list(client.scan_iter(f"{prefix}*"))
        if keys:
            client.delete(*keys)


def session_cookie(user) -> bytes:
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(user)
    return f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}".encode()
