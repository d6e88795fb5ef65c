"""Celery tasks: a bind that keeps hitting transient faults is retried, then the job fails cleanly."""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

from typing import Any

import pytest

from jobs import binding, scheduling, tasks
from jobs.models import Job
from jobs.states import JobStatus
from quotas.models import Quota
from scheduler.backends.base import TaskSpec, TransientBackendError
from scheduler.backends.simulated import SimulatedBackend
from scheduler.model import Placement
from tests.jobs.runtime_fixtures import (  # noqa: F401  (fixtures)
    clock,
    image,
    researcher,
    sim,
    submit,
    team,
)


class DownBackend(SimulatedBackend):
    """The cluster API is unreachable for binds; everything else works."""

    binds = 0

    def bind(self, spec: TaskSpec, placement: Placement) -> None:
        DownBackend.binds += 1
        raise TransientBackendError("connection refused")


@pytest.fixture
def down(sim: SimulatedBackend, clock, monkeypatch: pytest.MonkeyPatch) -> DownBackend:
    backend = DownBackend(sim.state_path, cluster="small", time_scale=1.0, clock=clock)
    DownBackend.binds = 0
    monkeypatch.setattr(binding, "get_backend", lambda: backend)
    return backend


def test_a_bind_that_never_succeeds_is_retried_then_fails_the_job(sim, down, researcher, image, team) -> None:
    job = submit(researcher, image, gpus=1)
    scheduling.run_scheduling_cycle(backend=sim)
    # Eager apply runs the retries synchronously (their countdown is ignored), as a worker would in turn.
    outcome = tasks.bind_job.apply(args=[job.pk]).get()
    assert outcome == "failed"
    assert DownBackend.binds == tasks.BIND_MAX_RETRIES + 1
    job.refresh_from_db()
    assert (job.status, job.failure_category) == (JobStatus.FAILED.value, "PLATFORM")
    assert "connection refused" in job.failure_message
    assert Quota.objects.get(team=team).used_gpu_milli == 0


def test_the_bind_task_is_a_no_op_for_a_job_that_is_not_admitted(sim, down, researcher, image) -> None:
    job = submit(researcher, image, gpus=1)  # still QUEUED: no cycle ran
    assert tasks.bind_job.apply(args=[job.pk]).get() == "skipped"
    assert DownBackend.binds == 0
    assert Job.objects.get(pk=job.pk).status == JobStatus.QUEUED.value


def test_the_cycle_and_sync_tasks_report_what_they_did(sim, researcher, image, monkeypatch: Any) -> None:
    from jobs import sync

    monkeypatch.setattr(scheduling, "get_backend", lambda: sim)
    monkeypatch.setattr(sync, "get_backend", lambda: sim)
    job = submit(researcher, image, gpu_milli=100)
    assert tasks.run_scheduling_cycle.apply().get() == {"admitted": [job.pk], "pending": 0}
    assert tasks.sync_status.apply().get() == {"transitions": [], "orphans_deleted": []}
