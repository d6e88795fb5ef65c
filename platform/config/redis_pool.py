"""One Redis connection pool per process and URL, for the cache and the health check.

Django's RedisCache builds a client, and with it a connection pool, per cache object, and its cache
objects are per context: under ASGI (gunicorn's uvicorn worker) that is per request, so every request
opened new TCP connections to Redis (2-3 on a job list; docs/benchmarks.md, "The API under load").
``SharedConnectionPool.from_url`` hands every caller with the same URL and options the same pool;
redis-py's pools are thread-safe and reset themselves in a forked child.
"""

from __future__ import annotations

import threading
from typing import Any, ClassVar

import redis


class SharedConnectionPool(redis.ConnectionPool):
    _shared: ClassVar[dict[tuple[str, str], redis.ConnectionPool]] = {}
    _shared_lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def from_url(cls, url: str, **kwargs: Any) -> Any:
        key = (url, repr(sorted(kwargs.items(), key=lambda item: item[0])))
        with cls._shared_lock:
            pool = cls._shared.get(key)
            if pool is None:
                pool = cls._shared[key] = super().from_url(url, **kwargs)
        return pool
