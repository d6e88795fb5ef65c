# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)
"""The scheduling lease (jobs.lease): a dead holder's lease expires within one lease, compare-and-delete
never deletes another owner's lease, renewal keeps a running cycle's lease, and a cycle that lost its
lease binds nothing.

Redis cases use a real Redis (database 11 of ``REDIS_URL``) and skip without one; file-lock cases use
real processes holding a real ``flock``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from unittest import mock
from urllib.parse import urlparse, urlunparse

import pytest
from django.core.cache import cache
from django.db import connection

from jobs import lease, scheduling
from jobs.models import Job
from jobs.policy_settings import queue_order_key
from jobs.queue_eta import eta_key
from jobs.states import JobStatus
from scheduler.backends.simulated import SimulatedBackend
from scheduler.model import ClusterSnapshot
from tests.jobs.runtime_fixtures import (  # noqa: F401  (fixtures)
    clock,
    image,
    researcher,
    sim,
    submit,
    team,
)

LEASE_REDIS_DB = 11


def _redis_url() -> str:
    url = os.environ.get("REDIS_URL")
    if not url:
        pytest.skip("REDIS_URL is unset: the Redis lease needs a Redis server")
    return urlunparse(urlparse(url)._replace(path=f"/{LEASE_REDIS_DB}"))


@pytest.fixture
def redis_key() -> Any:
    url = _redis_url()
    import redis

    key = f"test-lease:{uuid.uuid4().hex}"
    yield url, key
    redis.Redis.from_url(url).delete(key)


REPO_ROOT = Path(__file__).resolve().parents[2]


def _hold_and_die(code: str) -> None:
    """Run ``code`` (which takes a lease) in a real process that then dies without releasing it."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT / "platform"), str(REPO_ROOT)])
    env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")
    script = f"import os\nfrom jobs import lease\n{code}\nprint('held', flush=True)\nos._exit(0)\n"
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "held" in done.stdout, done.stderr


def test_a_dead_holders_redis_lease_expires_within_one_lease(redis_key) -> None:
    url, key = redis_key
    seconds = 1.0
    _hold_and_die(f"assert lease.RedisLease({url!r}, key={key!r}, seconds={seconds}).acquire()")
    successor = lease.RedisLease(url, key=key, seconds=seconds)
    assert not successor.acquire()  # the dead holder's lease is still running out
    remaining_ms = successor.client.pttl(key)
    assert 0 < remaining_ms <= seconds * 1000  # it never outlives one lease
    time.sleep(remaining_ms / 1000 + 0.05)
    assert successor.acquire()
    successor.release()


def test_a_dead_holders_file_lease_is_free_at_once(tmp_path: Path) -> None:
    path = tmp_path / "lease.lock"
    _hold_and_die(f"from pathlib import Path\nassert lease.FileLease(Path({str(path)!r})).acquire()")
    successor = lease.FileLease(path)
    assert successor.acquire()  # the kernel dropped the dead process's flock
    successor.release()


def test_a_file_lease_is_exclusive_while_held(tmp_path: Path) -> None:
    first, second = lease.FileLease(tmp_path / "l"), lease.FileLease(tmp_path / "l")
    assert first.acquire()
    assert not second.acquire()
    second.release()  # releasing a lease it never held must not free the holder's
    assert not lease.FileLease(tmp_path / "l").acquire()
    first.release()
    assert second.acquire()
    second.release()


def test_compare_and_delete_never_deletes_another_owners_lease(redis_key) -> None:
    url, key = redis_key
    old = lease.RedisLease(url, key=key, seconds=0.3)
    assert old.acquire()
    time.sleep(0.4)  # old's lease expired (its holder paused)
    new = lease.RedisLease(url, key=key, seconds=30)
    assert new.acquire()
    old.release()
    assert not old.renew()
    assert not old.still_held()
    assert new.still_held()
    assert new.client.get(key) == new.token.encode()
    new.release()
    assert new.client.get(key) is None


def test_renewal_keeps_a_running_cycles_lease_past_its_lifetime(redis_key) -> None:
    url, key = redis_key
    holder = lease.RedisLease(url, key=key, seconds=1.0)
    with lease.held(holder) as got:
        assert got is holder
        time.sleep(2.5)  # two and a half lifetimes
        assert lease.still_held()
        assert not lease.RedisLease(url, key=key, seconds=1.0).acquire()
    assert holder.client.get(key) is None  # released on the way out
    assert lease.current() is None


def test_the_deployment_lease_is_redis_when_the_cache_is_redis(settings, redis_key) -> None:
    url, _ = redis_key
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url}}
    assert isinstance(lease.make_lease(), lease.RedisLease)
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    assert isinstance(lease.make_lease(), lease.FileLease)


class LosesTheLeaseMidCycle(SimulatedBackend):
    """The cluster answers slowly: by the time the snapshot is back, the cycle's lease is gone."""

    def __init__(self, *args: Any, take_over: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.take_over = take_over

    def snapshot(self) -> ClusterSnapshot:
        snap = super().snapshot()
        self.take_over()
        return snap


def _losing_backend(sim: SimulatedBackend, take_over: Any) -> LosesTheLeaseMidCycle:
    return LosesTheLeaseMidCycle(
        str(sim.state_path), cluster="small", time_scale=1.0, clock=sim.clock, take_over=take_over
    )


def test_a_cycle_that_lost_its_file_lease_binds_nothing(
    sim, researcher, image, django_capture_on_commit_callbacks
) -> None:
    jobs = [submit(researcher, image, gpu_milli=250) for _ in range(3)]

    def take_over() -> None:
        current = lease.current()
        assert current is not None
        current.release()  # the lease is gone: as if it had run out

    backend = _losing_backend(sim, take_over)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        result = scheduling.run_scheduling_cycle(backend=backend)
    assert result is not None and result.admitted == []
    assert callbacks == []  # no bind enqueued
    assert {Job.objects.get(pk=j.pk).status for j in jobs} == {JobStatus.QUEUED.value}
    assert not any(Job.objects.get(pk=j.pk).tasks.exists() for j in jobs)


def test_a_cycle_whose_redis_lease_was_taken_over_binds_nothing(
    sim, researcher, image, settings, redis_key, django_capture_on_commit_callbacks
) -> None:
    url, _ = redis_key
    settings.CACHES = {"default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url}}
    jobs = [submit(researcher, image, gpu_milli=250) for _ in range(2)]
    usurper: list[lease.RedisLease] = []

    def take_over() -> None:
        current = lease.current()
        assert isinstance(current, lease.RedisLease)
        current.client.delete(current.lock.name)  # expired while the holder was paused...
        other = lease.RedisLease(url, key=current.lock.name)
        assert other.acquire()  # ...and another cycle took it
        usurper.append(other)

    backend = _losing_backend(sim, take_over)
    try:
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            result = scheduling.run_scheduling_cycle(backend=backend)
        assert result is not None and result.admitted == []
        assert callbacks == []
        assert {Job.objects.get(pk=j.pk).status for j in jobs} == {JobStatus.QUEUED.value}
        assert usurper[0].still_held()  # the loser's release left the new owner's lease alone
    finally:
        for other in usurper:
            other.release()


@pytest.mark.django_db
def test_two_platforms_on_one_cache_keep_their_round_windows_apart() -> None:
    """The round window, rerun mark, queue order and ETAs are keyed by the database being scheduled,
    as the lease is: a second platform's first cycle in a window is still its round."""
    now = 3600.0 * 1000
    cache.delete(scheduling.round_key())
    assert scheduling._is_round(now)
    assert not scheduling._is_round(now)
    mine = {scheduling.round_key(), scheduling.rerun_key(), queue_order_key(), eta_key()}
    with mock.patch.dict(connection.settings_dict, {"NAME": "another_platform"}):
        theirs = {scheduling.round_key(), scheduling.rerun_key(), queue_order_key(), eta_key()}
        cache.delete(scheduling.round_key())
        assert scheduling._is_round(now)
        cache.delete(scheduling.round_key())
    assert not scheduling._is_round(now)
    assert len(mine | theirs) == 8
