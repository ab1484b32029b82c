"""The Redis channel layer's reads outlive its blocking pop (redis/redis-py#4091: redis-py 8 reads with
a 5 s socket timeout by default, the same 5 s channels_redis blocks waiting for a message)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from channels_redis.core import RedisChannelLayer

from tests.live.conftest import redis_available, redis_url
from workbench.env import CHANNEL_LAYER_BLOCKING_POP_SECONDS, channel_layer_hosts

ROOT = Path(__file__).resolve().parent.parent.parent
QUIET_DB = 7  # a Redis database no test cuts or flushes (this test waits on it for 6 s)


def test_the_layer_reads_longer_than_it_blocks():
    assert RedisChannelLayer.brpop_timeout == CHANNEL_LAYER_BLOCKING_POP_SECONDS  # channels_redis's own
    (host,) = channel_layer_hosts("redis://127.0.0.1:6379/3")
    assert host["socket_timeout"] >= CHANNEL_LAYER_BLOCKING_POP_SECONDS + 5
    layer = RedisChannelLayer(hosts=channel_layer_hosts("redis://127.0.0.1:6379/3"))
    assert layer.hosts[0]["socket_timeout"] == host["socket_timeout"]


def test_the_scaled_profiles_layer_uses_it():
    """The settings a server with ``REDIS_URL`` starts with (a fresh interpreter: settings are read once)."""
    code = (
        "import django, os, json; os.environ['DJANGO_SETTINGS_MODULE'] = 'workbench.settings'; django.setup();"
        " from django.conf import settings; print(json.dumps(settings.CHANNEL_LAYERS['default']))"
    )
    env = {**os.environ, "REDIS_URL": "redis://127.0.0.1:6379/3"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=ROOT
    )
    layer = json.loads(out.stdout.strip().splitlines()[-1])
    assert layer["BACKEND"] == "channels_redis.core.RedisChannelLayer"
    assert layer["CONFIG"]["hosts"] == channel_layer_hosts("redis://127.0.0.1:6379/3")


@pytest.mark.slow
def test_an_idle_channel_receives_after_a_quiet_blocking_pop():
    """Without the longer read: ``TimeoutError: Timeout reading from 127.0.0.1:6379`` after 5.0 s."""
    if not redis_available():
        pytest.skip("Redis is not running on 127.0.0.1:6379")

    async def go() -> dict:
        layer = RedisChannelLayer(
            hosts=channel_layer_hosts(redis_url(QUIET_DB)), prefix=f"wbidle{uuid.uuid4().hex[:8]}"
        )
        channel = await layer.new_channel()

        async def later() -> None:
            await asyncio.sleep(layer.brpop_timeout + 1.0)
            await layer.send(channel, {"type": "late"})

        sender = asyncio.ensure_future(later())
        try:
            return await asyncio.wait_for(layer.receive(channel), timeout=layer.brpop_timeout + 10)
        finally:
            sender.cancel()
            await layer.flush()

    assert asyncio.run(go()) == {"type": "late"}
