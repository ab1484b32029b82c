"""Django's Redis cache with one connection pool per process instead of one per request.

Django keeps a cache object per async context, and under ASGI every request runs in a context
(and a thread) of its own: with the stock backend each request built a new client, a new
connection pool and so a new TCP connection to Redis (a handshake of three commands, then a
close), for the two or three commands the rate limits send. Here the clients of one process
share their pools (redis-py pools are thread-safe, and start afresh in a forked child).
"""

from __future__ import annotations

import threading

from django.core.cache.backends.redis import RedisCache, RedisCacheClient

_pools: dict[tuple, object] = {}
_lock = threading.Lock()
# Options Django builds afresh for every client (the same for every client of a process).
_PER_CLIENT = frozenset({"driver_info", "lib_name"})


class SharedPoolClient(RedisCacheClient):
    def _get_connection_pool(self, write):
        index = self._get_connection_pool_index(write)
        options = sorted((k, repr(v)) for k, v in self._pool_options.items() if k not in _PER_CLIENT)
        key = (self._pool_class, self._servers[index], tuple(options))
        pool = _pools.get(key)
        if pool is None:
            with _lock:
                pool = _pools.get(key)
                if pool is None:
                    pool = self._pool_class.from_url(self._servers[index], **self._pool_options)
                    _pools[key] = pool
        return pool


class SharedPoolRedisCache(RedisCache):
    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = SharedPoolClient
