"""Overload control: the health check's dead-man switch, coalesced cycle triggers, and one queue per
kind of work."""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.conf import settings as django_settings
from rest_framework.test import APIClient

from jobs import dispatch, heartbeat, tasks


@pytest.fixture
def private_cache(settings: Any, tmp_path: Any) -> None:
    settings.CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": str(tmp_path)}
    }


def test_health_reports_the_age_of_the_last_cycle_sync_and_reconcile(
    db: Any, settings: Any, private_cache
) -> None:
    settings.HEALTH_MAX_AGE_SECONDS = 60
    now = time.time()
    for kind in heartbeat.KINDS:
        heartbeat.beat(kind, now=now - 5)
    response = APIClient().get("/api/v1/health")
    assert response.status_code == 200, response.json()
    work = response.json()["work"]
    assert work["ok"] is True and work["stale"] == []
    assert all(4 <= work["age_seconds"][k] <= 60 for k in heartbeat.KINDS)


def test_health_turns_503_when_the_sync_is_older_than_the_threshold(
    db: Any, settings: Any, private_cache
) -> None:
    settings.HEALTH_MAX_AGE_SECONDS = 60
    now = time.time()
    heartbeat.beat("cycle", now=now)
    heartbeat.beat("reconcile", now=now)
    heartbeat.beat("sync", now=now - 120)
    response = APIClient().get("/api/v1/health")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "degraded" and body["work"]["stale"] == ["sync"]


def test_a_missing_heartbeat_trips_the_switch_one_threshold_after_the_start(private_cache) -> None:
    heartbeat.beat("cycle")
    heartbeat.beat("reconcile")
    started = heartbeat._first_seen
    assert heartbeat.stale(max_age_s=60, now=started + 30) == {}  # just started: sync may not have run
    assert set(heartbeat.stale(max_age_s=60, now=started + 61)) >= {"sync"}


def test_many_triggers_enqueue_one_cycle_until_the_cycle_starts(
    db: Any, monkeypatch: pytest.MonkeyPatch, private_cache, django_capture_on_commit_callbacks
) -> None:
    sent: list[str] = []
    monkeypatch.setattr(tasks.run_scheduling_cycle, "delay", lambda: sent.append("cycle"))
    with django_capture_on_commit_callbacks(execute=True):
        for _ in range(50):
            dispatch.request_scheduling_cycle()
    assert sent == ["cycle"]
    dispatch.cycle_started()  # the cycle took the message: the next trigger enqueues a new one
    with django_capture_on_commit_callbacks(execute=True):
        for _ in range(5):
            dispatch.request_scheduling_cycle()
    assert sent == ["cycle", "cycle"]


def test_beat_ticks_add_no_cycle_message_while_one_is_pending(
    db: Any, monkeypatch: pytest.MonkeyPatch, private_cache, django_capture_on_commit_callbacks
) -> None:
    sent: list[str] = []
    monkeypatch.setattr(tasks.run_scheduling_cycle, "delay", lambda: sent.append("cycle"))
    assert (
        django_settings.CELERY_BEAT_SCHEDULE["scheduling-cycle"]["task"] == "jobs.tasks.tick_scheduling_cycle"
    )
    for _ in range(40):  # two minutes of 3 s ticks while one slow cycle runs
        tasks.tick_scheduling_cycle()
    with django_capture_on_commit_callbacks(execute=True):
        dispatch.request_scheduling_cycle()
    assert sent == ["cycle"]
    dispatch.cycle_started()
    tasks.tick_scheduling_cycle()
    assert sent == ["cycle", "cycle"]


def test_cycle_bind_sync_and_reconcile_each_have_their_own_queue() -> None:
    routes = django_settings.CELERY_TASK_ROUTES
    queues = {
        name: routes[f"jobs.tasks.{name}"]["queue"]
        for name in ("run_scheduling_cycle", "bind_job", "sync_status", "reconcile")
    }
    assert len(set(queues.values())) == 4
    assert {"jobs.tasks.reconcile", "jobs.tasks.sync_status", "jobs.tasks.tick_scheduling_cycle"} <= {
        entry["task"] for entry in django_settings.CELERY_BEAT_SCHEDULE.values()
    }
