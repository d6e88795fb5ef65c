"""A task that fails for the platform (not for its own code) is retried: the job goes back to the queue
with its retry counted, a gang is retried whole, and the job's own failures never are."""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

import sys
from typing import Any

import pytest

from jobs import scheduling, sync
from jobs.models import Task
from jobs.states import JobStatus
from quotas.models import Quota
from scheduler.backends.base import TaskPhase
from scheduler.backends.simulated import SimulatedBackend
from tests.jobs.runtime_fixtures import (  # noqa: F401  (fixtures)
    clock,
    fail_replica_1,
    image,
    reasons,
    researcher,
    sim,
    started,
    statuses,
    submit,
    team,
)

PY = sys.executable
PLATFORM_ONCE = {"SIM_FAIL_CATEGORY": "PLATFORM", "SIM_FAIL_ATTEMPTS": "1"}


def test_a_platform_failure_with_a_retry_left_requeues_the_job_and_the_retry_succeeds(
    sim: SimulatedBackend, clock, researcher, image, team
) -> None:
    job = started(
        sim, submit(researcher, image, gpus=1, max_retries=1, sim_duration_seconds=10, env=PLATFORM_ONCE)
    )
    clock.advance(100)

    result = sync.sync_status(backend=sim)

    job.refresh_from_db()
    assert (job.status, job.retries, job.failure_category) == (JobStatus.QUEUED.value, 1, "")
    assert result.transitions == [(job.pk, "REQUEUED"), (job.pk, "QUEUED")]
    [why] = reasons(job, JobStatus.REQUEUED)
    assert f"task job-{job.pk}-0 failed (PLATFORM)" in why and "retry 1 of 1" in why
    assert "retry 1 of 1 after a PLATFORM failure" in job.pending_reason
    assert sim.task_statuses(job_id=str(job.pk)) == []  # the failed run is gone from the cluster
    assert Quota.objects.get(team=team).used_gpu_milli == 0  # requeued: its next admission takes it again
    task = Task.objects.get(job=job)
    assert (task.phase, task.exit_code) == (TaskPhase.FAILED.value, None)

    started(sim, job)  # the next cycle places it afresh and binds the same task name again
    task = Task.objects.get(job=job)
    assert (task.phase, task.message, task.finished_at) == (TaskPhase.PENDING.value, "", None)
    clock.advance(100)
    sync.sync_status(backend=sim)

    job.refresh_from_db()
    assert (job.status, job.retries) == (JobStatus.SUCCEEDED.value, 1)
    assert statuses(job) == [
        "DRAFT", "SUBMITTED", "QUEUED", "ADMITTED", "STARTING", "REQUEUED",
        "QUEUED", "ADMITTED", "STARTING", "RUNNING", "SUCCEEDED",
    ]  # fmt: skip
    assert Quota.objects.get(team=team).used_gpu_milli == 0


def test_a_hardware_failure_is_retried_too(sim: SimulatedBackend, clock, researcher, image) -> None:
    env = {"SIM_FAIL_CATEGORY": "HARDWARE"}
    job = started(sim, submit(researcher, image, gpus=1, max_retries=2, sim_duration_seconds=10, env=env))
    clock.advance(100)
    sync.sync_status(backend=sim)
    job.refresh_from_db()
    assert (job.status, job.retries) == (JobStatus.QUEUED.value, 1)
    assert "after a HARDWARE failure" in job.pending_reason


def test_a_job_that_keeps_failing_for_the_platform_fails_after_its_last_retry(
    sim: SimulatedBackend, clock, researcher, image, team
) -> None:
    env = {"SIM_FAIL_CATEGORY": "PLATFORM"}  # every run fails
    job = submit(researcher, image, gpus=1, max_retries=2, sim_duration_seconds=10, env=env)
    for run in range(3):
        started(sim, job)
        clock.advance(100)
        sync.sync_status(backend=sim)
        job.refresh_from_db()
        if run < 2:
            assert (job.status, job.retries) == (JobStatus.QUEUED.value, run + 1)

    assert (job.status, job.failure_category, job.retries) == (JobStatus.FAILED.value, "PLATFORM", 2)
    assert "simulated PLATFORM failure" in job.failure_message
    assert [r.split("; ")[-1] for r in reasons(job, JobStatus.REQUEUED)] == [
        "a PLATFORM failure, retrying (retry 1 of 2)",
        "a PLATFORM failure, retrying (retry 2 of 2)",
    ]
    assert Quota.objects.get(team=team).used_gpu_milli == 0


def test_without_retries_a_platform_failure_fails_the_job(
    sim: SimulatedBackend, clock, researcher, image
) -> None:
    job = started(sim, submit(researcher, image, gpus=1, sim_duration_seconds=10, env=PLATFORM_ONCE))
    clock.advance(100)
    sync.sync_status(backend=sim)
    job.refresh_from_db()
    assert (job.status, job.failure_category, job.retries) == (JobStatus.FAILED.value, "PLATFORM", 0)
    assert "REQUEUED" not in statuses(job)


@pytest.mark.parametrize(
    ("spec", "category"),
    [
        ({"command": ["false"]}, "USER"),
        ({"env": {"SIM_EXIT_CODE": "137"}}, "OOM"),
        ({"max_runtime_seconds": 5}, "TIMEOUT"),
        ({"env": {"SIM_FAIL_CATEGORY": "IMAGE"}}, "IMAGE"),
        ({"env": {"SIM_FAIL_CATEGORY": "USER"}}, "USER"),
    ],
)
def test_failures_of_the_job_itself_are_never_retried(
    sim: SimulatedBackend, clock, researcher, image, spec: dict[str, Any], category: str
) -> None:
    job = started(sim, submit(researcher, image, gpus=1, max_retries=3, sim_duration_seconds=10, **spec))
    clock.advance(100)
    sync.sync_status(backend=sim)
    job.refresh_from_db()
    assert (job.status, job.failure_category, job.retries) == (JobStatus.FAILED.value, category, 0)
    assert "REQUEUED" not in statuses(job)


def test_a_gang_is_retried_whole_and_its_task_rows_are_replaced_by_the_next_placement(
    sim: SimulatedBackend, clock, researcher, image
) -> None:
    job = started(
        sim, submit(researcher, image, gpus=1, replicas=2, max_retries=1, sim_duration_seconds=1000)
    )
    clock.advance(20)
    sync.sync_status(backend=sim)
    fail_replica_1(sim, clock, job, {"SIM_FAIL_CATEGORY": "PLATFORM"})

    sync.sync_status(backend=sim)

    job.refresh_from_db()
    assert (job.status, job.retries) == (JobStatus.QUEUED.value, 1)
    assert sim.task_statuses(job_id=str(job.pk)) == []  # the healthy replica was stopped too
    healthy, failed = Task.objects.filter(job=job).order_by("index")
    assert (healthy.phase, healthy.message) == (
        TaskPhase.FAILED.value,
        f"stopped: retrying the job after task job-{job.pk}-1 failed",
    )
    assert healthy.finished_at is not None
    assert failed.phase == TaskPhase.FAILED.value and "simulated PLATFORM failure" in failed.message

    scheduling.run_scheduling_cycle(backend=sim)
    rows = list(Task.objects.filter(job=job).order_by("index").values_list("name", "phase", "finished_at"))
    assert rows == [(f"job-{job.pk}-0", "PENDING", None), (f"job-{job.pk}-1", "PENDING", None)]


# ----------------------------------------------------------------------------- ended Task rows
