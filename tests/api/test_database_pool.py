"""Connections that outlive a request: PostgreSQL's pool per process, Redis's pool per process.

Under ASGI every request runs in a thread (and a context) of its own, so without these each request
opened a PostgreSQL connection (a server backend forked and warmed per request) and new Redis
connections. Timings are the load benchmark's business (docs/benchmarks.md); these check behaviour.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable
from typing import TypeVar

import pytest
from django.conf import settings
from django.core.cache.backends.redis import RedisCache
from django.db import connection
from django.db.backends.postgresql.base import DatabaseWrapper

from config.env import database_from_url
from config.redis_pool import SharedConnectionPool

T = TypeVar("T")


def test_a_postgres_url_gets_a_pool_of_the_asked_size_and_sqlite_none() -> None:
    pooled = database_from_url("postgres://app:pw@db:5432/platform", pool_max_size=3)
    unpooled = database_from_url("postgres://app:pw@db:5432/platform", pool_max_size=0)
    sqlite = database_from_url("sqlite:////tmp/db.sqlite3", pool_max_size=3)

    assert pooled["OPTIONS"] == {"pool": {"min_size": 1, "max_size": 3, "timeout": 30.0}}
    assert pooled["CONN_MAX_AGE"] == 0  # Django refuses persistent connections beside a pool
    assert "OPTIONS" not in unpooled
    assert "OPTIONS" not in sqlite


def _in_a_thread_of_its_own(settings_dict: dict, alias: str, work: Callable[[DatabaseWrapper], T]) -> T:
    """One request as ASGI runs it: a fresh thread, its own connection object, closed at the end;
    ``work``'s answer."""
    found: list[T] = []

    def request() -> None:
        wrapper = DatabaseWrapper(settings_dict, alias=alias)
        try:
            found.append(work(wrapper))
        finally:
            wrapper.close()

    thread = threading.Thread(target=request)
    thread.start()
    thread.join()
    return found[0]


def _backend_pid(wrapper: DatabaseWrapper) -> int:
    with wrapper.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def _backend_pid_in_a_thread_of_its_own(settings_dict: dict, alias: str) -> int:
    return _in_a_thread_of_its_own(settings_dict, alias, _backend_pid)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the pool is PostgreSQL's")
@pytest.mark.django_db  # lets pytest-django allow these extra connections
def test_requests_in_threads_of_their_own_reuse_one_server_backend_through_the_pool() -> None:
    base = {**connection.settings_dict, "CONN_MAX_AGE": 0}
    # One connection at most: a second one, opened by the pool's own filler thread while the first
    # request runs, would make which backend a request gets a matter of timing.
    pooled = {**base, "OPTIONS": {"pool": {"min_size": 1, "max_size": 1, "timeout": 10.0}}}
    unpooled = {**base, "OPTIONS": {}}
    try:
        with_pool = [_backend_pid_in_a_thread_of_its_own(pooled, "pool-check") for _ in range(3)]
    finally:
        DatabaseWrapper(pooled, alias="pool-check").close_pool()
    without = [_backend_pid_in_a_thread_of_its_own(unpooled, "no-pool-check") for _ in range(3)]

    assert len(set(with_pool)) == 1  # one server backend served all three requests
    assert len(set(without)) == 3  # a backend per request: what the pool removes


def test_the_platform_settings_pool_postgres_connections_by_default() -> None:
    # The test settings turn the pool off (their threads must not wait for each other's connection);
    # what web and workers run with is base.py's, read in a fresh interpreter.
    code = (
        "import os, sys; sys.path[:0] = ['platform', '.']; "
        "os.environ['DATABASE_URL'] = 'postgres://u@127.0.0.1:1/x'; "
        "os.environ.pop('DATABASE_POOL_MAX_SIZE', None); "
        "from config.settings import base; print(base.DATABASES['default']['OPTIONS']['pool']['max_size'])"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=settings.BASE_DIR, capture_output=True, text=True)

    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.strip()) >= 4


def test_the_same_redis_url_and_options_share_one_pool_and_other_options_do_not() -> None:
    first = SharedConnectionPool.from_url("redis://127.0.0.1:6379/5", socket_timeout=1)
    again = SharedConnectionPool.from_url("redis://127.0.0.1:6379/5", socket_timeout=1)
    other = SharedConnectionPool.from_url("redis://127.0.0.1:6379/5", socket_timeout=2)

    assert first is again
    assert other is not first


def _connections_received(client) -> int:
    return int(client.info("stats")["total_connections_received"])


@pytest.mark.skipif(not settings.REDIS_URL, reason="needs Redis (REDIS_URL)")
def test_cache_objects_made_per_request_open_no_new_redis_connections() -> None:
    options = {"OPTIONS": {"pool_class": "config.redis_pool.SharedConnectionPool"}}
    warm = RedisCache(settings.REDIS_URL, options)
    warm.set("hapi-pool-check", 1)
    before = _connections_received(warm._cache.get_client(write=True))

    # A new cache object per request, as Django's per-context cache handler makes under ASGI.
    for _ in range(20):
        assert RedisCache(settings.REDIS_URL, options).get("hapi-pool-check") == 1

    assert _connections_received(warm._cache.get_client(write=True)) - before <= 1
    warm.delete("hapi-pool-check")


def _release_in_a_thread(settings_dict: dict, alias: str) -> tuple[bool, int | None]:
    """A follower's poll as ASGI runs it: a query, then the release before the wait. (whether the
    wrapper still holds a connection, the pool's idle connections afterwards)."""
    from jobs.log_stream import release_pooled_connection

    def poll(wrapper: DatabaseWrapper) -> tuple[bool, int | None]:
        with wrapper.cursor() as cursor:
            cursor.execute("SELECT 1")
        release_pooled_connection(wrapper)
        idle = wrapper.pool.get_stats()["pool_available"] if wrapper.pool else None
        return wrapper.connection is not None, idle

    return _in_a_thread_of_its_own(settings_dict, alias, poll)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the pool is PostgreSQL's")
@pytest.mark.django_db
def test_a_log_follower_hands_its_pooled_connection_back_while_it_waits_and_keeps_an_unpooled_one() -> None:
    base = {**connection.settings_dict, "CONN_MAX_AGE": 0}
    pooled = {**base, "OPTIONS": {"pool": {"min_size": 0, "max_size": 1, "timeout": 10.0}}}
    try:
        held_pooled, idle = _release_in_a_thread(pooled, "follow-pool-check")
    finally:
        DatabaseWrapper(pooled, alias="follow-pool-check").close_pool()
    held_unpooled, _ = _release_in_a_thread({**base, "OPTIONS": {}}, "follow-no-pool-check")

    assert (held_pooled, idle) == (False, 1)  # back in the pool: another request may take it
    assert held_unpooled  # closing it would fork a new server backend at every poll


def test_a_log_follow_releases_the_connection_before_every_wait() -> None:
    from jobs import log_stream

    class FakeJob:
        pk = 0

    calls: list[str] = []
    statuses = iter(["RUNNING", "RUNNING", "SUCCEEDED"])
    body = "".join(
        log_stream.follow_events(
            job=FakeJob(),  # type: ignore[arg-type]
            task_index=None,
            since={},
            read_logs=lambda _job, _index: [{"task": "t", "index": 0, "log": "hello\n"}],
            sleep=lambda s: calls.append("sleep"),
            release=lambda: calls.append("release"),
            status_of=lambda job: (next(statuses), ""),
        )
    )

    assert "event: end" in body
    assert calls == ["release", "sleep", "release", "sleep"]
