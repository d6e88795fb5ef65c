"""Binding: ADMITTED jobs start on the backend, all tasks or none; errors split transient/permanent."""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

import pytest

from jobs import scheduling
from jobs.binding import job_bind, job_bind_gave_up
from jobs.models import Job, Task
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
    statuses,
    submit,
    team,
)


class FlakyBackend(SimulatedBackend):
    """A simulated backend whose API times out on the first ``failures`` binds."""

    def __init__(self, *args, failures: int, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.failures = failures

    def bind(self, spec: TaskSpec, placement: Placement) -> None:
        if self.failures:
            self.failures -= 1
            raise TransientBackendError("API server timed out")
        super().bind(spec, placement)


def admitted(sim, job: Job) -> Job:
    scheduling.run_scheduling_cycle(backend=sim)
    job.refresh_from_db()
    assert job.status == JobStatus.ADMITTED.value
    return job


def test_binding_starts_every_task_and_moves_the_job_to_starting(sim, researcher, image) -> None:
    job = admitted(sim, submit(researcher, image, gpus=1, replicas=2))
    assert job_bind(job_id=job.pk, backend=sim) == "bound"
    assert Job.objects.get(pk=job.pk).status == JobStatus.STARTING.value
    bound = {s.task_id: (s.node, s.gpu_indices) for s in sim.task_statuses(job_id=str(job.pk))}
    expected = {t.name: (t.node, tuple(t.gpu_indices)) for t in Task.objects.filter(job=job)}
    assert bound == expected and len(bound) == 2


def test_binding_again_is_harmless(sim, researcher, image) -> None:
    job = admitted(sim, submit(researcher, image, gpu_milli=250))
    job_bind(job_id=job.pk, backend=sim)
    assert job_bind(job_id=job.pk, backend=sim) == "skipped"
    assert len(sim.task_statuses()) == 1
    assert statuses(Job.objects.get(pk=job.pk)).count("STARTING") == 1


def test_a_transient_error_leaves_the_job_admitted_and_a_retry_finishes_the_gang(
    sim, tmp_path, clock, researcher, image
) -> None:
    job = admitted(sim, submit(researcher, image, gpus=1, replicas=2))
    flaky = FlakyBackend(sim.state_path, cluster="small", time_scale=1.0, clock=clock, failures=1)
    with pytest.raises(TransientBackendError):
        job_bind(job_id=job.pk, backend=flaky)
    assert Job.objects.get(pk=job.pk).status == JobStatus.ADMITTED.value
    assert job_bind(job_id=job.pk, backend=flaky) == "bound"
    assert len(sim.task_statuses(job_id=str(job.pk))) == 2


def test_giving_up_after_retries_fails_the_job_and_releases_everything(sim, researcher, image, team) -> None:
    job = admitted(sim, submit(researcher, image, gpus=1, replicas=2))
    # Half the gang made it before the backend became unreachable.
    first = Task.objects.get(job=job, index=0)
    from jobs.binding import task_spec
    from jobs.placements import task_placement

    sim.bind(task_spec(job, first), task_placement(job, first))
    assert job_bind_gave_up(job_id=job.pk, reason="API server timed out", backend=sim) is True
    job.refresh_from_db()
    assert (job.status, job.failure_category) == (JobStatus.FAILED.value, "PLATFORM")
    assert sim.task_statuses() == []
    assert Quota.objects.get(team=team).used_gpu_milli == 0


def test_a_stale_placement_sends_the_job_back_to_the_queue(sim, researcher, image) -> None:
    job = admitted(sim, submit(researcher, image, gpus=2))
    # Someone else took GPU 1 behind the scheduler's back.
    sim.bind(
        TaskSpec(job_id="x", task_id="intruder"),
        Placement(job_id="x", task_id="intruder", node="t4-1", gpu_indices=(1,), gpu_milli=500),
    )
    assert job_bind(job_id=job.pk, backend=sim) == "requeued"
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED.value and "stale" in job.pending_reason
    assert sim.task_statuses(job_id=str(job.pk)) == []


def test_a_permanent_refusal_fails_the_job_as_a_platform_error(sim, researcher, image, team) -> None:
    job = admitted(sim, submit(researcher, image, gpus=1))
    Task.objects.filter(job=job).update(node="decommissioned")
    assert job_bind(job_id=job.pk, backend=sim) == "failed"
    job.refresh_from_db()
    assert (job.status, job.failure_category) == (JobStatus.FAILED.value, "PLATFORM")
    assert "decommissioned" in job.failure_message
    assert Quota.objects.get(team=team).used_jobs == 0


def test_a_job_cancelled_before_its_bind_is_not_started(sim, researcher, image) -> None:
    job = admitted(sim, submit(researcher, image, gpus=1))
    from jobs.services import job_cancel

    job_cancel(job=job, user=researcher)
    assert job_bind(job_id=job.pk, backend=sim) == "skipped"
    assert sim.task_statuses() == []


def test_a_bind_for_a_job_that_no_longer_exists_is_skipped(sim, db) -> None:
    assert job_bind(job_id=987654, backend=sim) == "skipped"
    assert job_bind_gave_up(job_id=987654, reason="timeout", backend=sim) is False
