"""A job that stops (cancelled, failed, refused by the cluster) leaves no Task row open; finished rows
keep how they ended."""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

import sys

from jobs import scheduling, sync
from jobs.binding import job_bind
from jobs.models import Job, Task
from jobs.services import job_cancel
from jobs.states import JobStatus
from scheduler.backends.base import TaskSpec
from scheduler.backends.simulated import SimulatedBackend
from scheduler.model import Placement
from tests.jobs.runtime_fixtures import (  # noqa: F401  (fixtures)
    clock,
    fail_replica_1,
    image,
    researcher,
    sim,
    started,
    submit,
    team,
)

PY = sys.executable
PLATFORM_ONCE = {"SIM_FAIL_CATEGORY": "PLATFORM", "SIM_FAIL_ATTEMPTS": "1"}


def test_cancelling_a_running_job_ends_its_task_rows(sim: SimulatedBackend, clock, researcher, image) -> None:
    job = started(sim, submit(researcher, image, gpus=1, replicas=2, sim_duration_seconds=1000))
    clock.advance(20)
    sync.sync_status(backend=sim)
    assert set(Task.objects.filter(job=job).values_list("phase", flat=True)) == {"RUNNING"}

    job_cancel(job=Job.objects.get(pk=job.pk), user=researcher)
    assert sync.job_stop(job_id=job.pk, backend=sim)

    rows = Task.objects.filter(job=job)
    assert {(t.phase, t.exit_code, t.message) for t in rows} == {("FAILED", None, sync.CANCELLED_MESSAGE)}
    assert all(t.finished_at is not None and t.started_at is not None for t in rows)


def test_cancelling_an_admitted_job_ends_its_pending_task_rows(
    sim: SimulatedBackend, researcher, image
) -> None:
    job = submit(researcher, image, gpus=1)
    scheduling.run_scheduling_cycle(backend=sim)
    job_cancel(job=Job.objects.get(pk=job.pk), user=researcher)

    sync.sync_status(backend=sim)  # finishes the stop (as if its message was lost)

    assert Job.objects.get(pk=job.pk).status == JobStatus.STOPPED.value
    task = Task.objects.get(job=job)
    assert (task.phase, task.message) == ("FAILED", sync.CANCELLED_MESSAGE) and task.finished_at


def test_a_job_cancelled_while_requeued_has_its_old_task_rows_ended_by_the_next_sync(
    sim: SimulatedBackend, researcher, image
) -> None:
    job = submit(researcher, image, gpus=2)
    scheduling.run_scheduling_cycle(backend=sim)
    intruder = Placement(job_id="x", task_id="intruder", node="t4-1", gpu_indices=(1,), gpu_milli=500)
    sim.bind(TaskSpec(job_id="x", task_id="intruder"), intruder)  # a GPU taken behind the scheduler's back
    assert job_bind(job_id=job.pk, backend=sim) == "requeued"
    job_cancel(job=Job.objects.get(pk=job.pk), user=researcher)  # QUEUED: straight to STOPPED
    assert Task.objects.get(job=job).phase == "PENDING"

    sync.sync_status(backend=sim)

    task = Task.objects.get(job=job)
    assert (task.phase, task.message) == ("FAILED", sync.CANCELLED_MESSAGE) and task.finished_at


def test_when_one_replica_fails_the_others_rows_say_they_were_stopped(
    sim: SimulatedBackend, clock, researcher, image
) -> None:
    job = started(sim, submit(researcher, image, gpus=1, replicas=2, sim_duration_seconds=1000))
    clock.advance(20)
    sync.sync_status(backend=sim)
    fail_replica_1(sim, clock, job, {"SIM_EXIT_CODE": "3"})

    sync.sync_status(backend=sim)

    assert Job.objects.get(pk=job.pk).status == JobStatus.FAILED.value
    healthy, failed = Task.objects.filter(job=job).order_by("index")
    assert (healthy.phase, healthy.message) == ("FAILED", f"stopped: task job-{job.pk}-1 failed")
    assert (failed.phase, failed.exit_code) == ("FAILED", 3)


def test_finished_task_rows_are_left_as_they_ended(sim: SimulatedBackend, clock, researcher, image) -> None:
    job = started(sim, submit(researcher, image, gpu_milli=500, sim_duration_seconds=10))
    clock.advance(100)
    sync.sync_status(backend=sim)
    sync.sync_status(backend=sim)
    task = Task.objects.get(job=job)
    assert (task.phase, task.exit_code, task.message) == ("SUCCEEDED", 0, "completed")


def test_a_job_the_cluster_refused_has_its_task_rows_ended(sim: SimulatedBackend, researcher, image) -> None:
    job = submit(researcher, image, gpus=1)
    scheduling.run_scheduling_cycle(backend=sim)
    Task.objects.filter(job=job).update(node="decommissioned")
    assert job_bind(job_id=job.pk, backend=sim) == "failed"
    task = Task.objects.get(job=job)
    assert task.phase == "FAILED" and task.message.startswith("stopped: the cluster refused the job")
