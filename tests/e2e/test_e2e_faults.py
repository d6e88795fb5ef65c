"""Fault injection on a whole platform in real processes: PostgreSQL (the test database), a Redis
server of the test's own, gunicorn, a Celery worker and beat (jobs.reliability.Platform).

* The worker is killed (``os._exit`` at a fault point, jobs.faults) again and again while 40 jobs run:
  mid-cycle, after a placement is persisted and before its bind is enqueued, before and after the
  bind. No job may be stranded (every job final within a bounded time after the last kill), no GPU
  given out twice, and quota usage must equal what the jobs hold. The suite runs ``FAULT_TEST_KILLS``
  kills (default 8: two per point, about a minute on 2 cores); ``manage.py faults`` runs the full 50
  and writes docs/results/faults_*.json.
* Redis is killed and restarted empty while a backlog waits in it: nothing is lost, and the backlog is
  placed within 2 beats of the workers being back.

Short deadlines (lease 4 s, rebind after 4 s, visibility timeout 10 s) keep the run short; the
production values only make each recovery proportionally slower.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from jobs import reliability

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not installed"),
]

FAST = {
    "SCHEDULING_LEASE_SECONDS": "4",
    "RECONCILE_REBIND_AFTER_SECONDS": "4",
    "RECONCILE_LOST_GRACE_SECONDS": "10",
    "CELERY_VISIBILITY_TIMEOUT_SECONDS": "10",
}


@pytest.fixture
def platform(transactional_db: Any, tmp_path: Path) -> Iterator[reliability.Platform]:
    if connection.vendor != "postgresql":
        pytest.skip(
            "the fault tests share the test database with server processes: set DATABASE_URL to PostgreSQL"
        )
    plat = reliability.Platform(tmp_path, interval_s=1.0, time_scale=600.0, extra_env=dict(FAST))
    try:
        plat.start()
        yield plat
    finally:
        plat.stop()


def test_killing_the_worker_at_every_fault_point_strands_no_job_and_allocates_nothing_twice(
    platform: reliability.Platform,
) -> None:
    token = reliability.seed_team()
    kills = int(os.environ.get("FAULT_TEST_KILLS", "8"))
    try:
        run = reliability.run_fault_workload(
            platform, token, jobs=40, kills=kills, duration_s=3600, final_timeout_s=180
        )
    except TimeoutError as exc:
        pytest.fail(f"{exc}\n{platform.logs()}")
    result = run.as_dict()
    print(result)  # shown with -s / on failure: the measured recovery
    assert result["kills"] >= min(kills, 4), result
    assert set(result["kills_by_point"]) == set(reliability.POINTS), result  # every point was hit
    assert result["stranded"] == 0, result
    assert result["outcome"] == {"SUCCEEDED": 40}, f"{result}\n{platform.logs()}"
    assert result["double_allocations"] == [] and result["jobs_bound_twice"] == [], result
    assert result["quota_mismatches"] == [], result


def test_redis_restarted_empty_loses_nothing_and_places_the_backlog_within_two_beats(
    platform: reliability.Platform,
) -> None:
    token = reliability.seed_team()
    try:
        run = reliability.run_redis_restart(
            platform, token, running=4, backlog=6, duration_s=6000, final_timeout_s=120
        )
    except TimeoutError as exc:
        pytest.fail(f"{exc}\n{platform.logs()}")
    result = run.as_dict()
    print(result)  # shown with -s / on failure: the measured recovery
    assert result["outcome"] == {"SUCCEEDED": 10}, result
    assert result["beats_to_place"] <= 2, result
    assert reliability.quota_mismatches() == []
