# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)
"""The reconciler (jobs.reconcile): every non-final job is driven on from the database and the backend,
whatever message was lost. Ages are set by moving ``updated_at`` back (time is injected)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from jobs import reconcile, scheduling
from jobs.binding import job_bind
from jobs.models import Job
from jobs.services import job_transition
from jobs.states import JobStatus
from quotas.models import Quota
from scheduler.backends.base import TaskStatus, TransientBackendError
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

LIMITS = reconcile.Limits(
    rebind_after_s=15,
    bind_give_up_s=120,
    start_timeout_s=600,
    lost_grace_s=30,
    stop_force_s=120,
    preempt_margin_s=30,
    requeue_after_s=30,
    default_grace_s=30,
)


def age(job: Job, seconds: float) -> None:
    """The job entered its current state ``seconds`` ago."""
    Job.objects.filter(pk=job.pk).update(
        updated_at=Job.objects.get(pk=job.pk).updated_at - dt.timedelta(seconds=seconds)
    )


def admitted(sim: SimulatedBackend, job: Job) -> Job:
    scheduling.run_scheduling_cycle(backend=sim)
    job.refresh_from_db()
    assert job.status == JobStatus.ADMITTED.value
    return job


def started(sim: SimulatedBackend, job: Job) -> Job:
    admitted(sim, job)
    assert job_bind(job_id=job.pk, backend=sim) == "bound"
    job.refresh_from_db()
    return job


def status(job: Job) -> str:
    return Job.objects.get(pk=job.pk).status


class Backend(SimulatedBackend):
    """The simulated cluster with faults switched on by the test."""

    bind_fails = False
    delete_fails = False
    task_message = ""

    def bind(self, spec: Any, placement: Placement) -> None:
        if self.bind_fails:
            raise TransientBackendError("the API server answered 503")
        super().bind(spec, placement)

    def delete_job(self, job_id: str) -> None:
        if self.delete_fails:
            raise TransientBackendError("the API server answered 503")
        super().delete_job(job_id)

    def task_statuses(self, job_id: str | None = None) -> list[TaskStatus]:
        out = super().task_statuses(job_id)
        for st in out:
            if self.task_message and not st.phase.finished:
                st.message = self.task_message
        return out


def faulty(sim: SimulatedBackend) -> Backend:
    return Backend(str(sim.state_path), cluster="small", time_scale=1.0, clock=sim.clock)


def test_an_admitted_job_whose_bind_message_was_lost_is_bound_again(sim, researcher, image) -> None:
    job = admitted(sim, submit(researcher, image, gpu_milli=250))
    reconcile.reconcile(backend=sim, limits=LIMITS)
    assert status(job) == JobStatus.ADMITTED.value  # young: its bind may still be on its way
    age(job, LIMITS.rebind_after_s + 1)
    result = reconcile.reconcile(backend=sim, limits=LIMITS)
    assert result.actions == [(job.pk, "rebind:bound")]
    assert status(job) == JobStatus.STARTING.value
    assert [st.task_id for st in sim.task_statuses()] == [f"job-{job.pk}-0"]


def test_a_bind_that_keeps_failing_releases_the_placement_and_requeues_with_a_reason(
    sim, researcher, image
) -> None:
    backend = faulty(sim)
    backend.bind_fails = True
    job = admitted(sim, submit(researcher, image, gpus=2))
    age(job, LIMITS.rebind_after_s + 1)
    reconcile.reconcile(backend=backend, limits=LIMITS)
    assert status(job) == JobStatus.ADMITTED.value  # transient: tried again on the next pass
    age(job, LIMITS.bind_give_up_s)
    reconcile.reconcile(backend=backend, limits=LIMITS)
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED.value
    assert "placement released" in job.pending_reason
    assert all(t.message.startswith("stopped:") for t in job.tasks.all())
    # The reservation is gone: the 2 GPUs it held can go to someone else.
    other = submit(researcher, image, gpus=2, priority=10)
    scheduling.run_scheduling_cycle(backend=sim)
    assert status(other) == JobStatus.ADMITTED.value


def test_a_job_whose_binds_fail_three_placements_in_a_row_fails_as_platform(sim, researcher, image) -> None:
    backend = faulty(sim)
    backend.bind_fails = True
    job = submit(researcher, image, gpu_milli=250)
    for _ in range(reconcile.MAX_BIND_GIVE_UPS):
        admitted(sim, job)
        age(job, LIMITS.bind_give_up_s + 1)
        reconcile.reconcile(backend=backend, limits=LIMITS)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED.value and job.failure_category == "PLATFORM"
    assert Quota.objects.get(team=job.team).used_gpu_milli == 0


def test_a_job_starting_past_the_timeout_with_an_image_error_fails_as_image(sim, researcher, image) -> None:
    backend = faulty(sim)
    backend.task_message = 'Back-off pulling image "pytorch:2.4": ErrImagePull'
    job = started(sim, submit(researcher, image, gpu_milli=250))
    age(job, LIMITS.start_timeout_s + 1)
    reconcile.reconcile(backend=backend, limits=LIMITS)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED.value and job.failure_category == "IMAGE"
    assert "ErrImagePull" in job.failure_message
    assert sim.task_statuses() == []  # deleted from the cluster


def test_a_job_starting_past_the_timeout_for_a_platform_cause_is_requeued(sim, researcher, image) -> None:
    job = started(sim, submit(researcher, image, gpu_milli=250))
    age(job, LIMITS.start_timeout_s - 1)
    reconcile.reconcile(backend=sim, limits=LIMITS)
    assert status(job) == JobStatus.STARTING.value
    age(job, 2)
    reconcile.reconcile(backend=sim, limits=LIMITS)
    assert status(job) == JobStatus.QUEUED.value
    assert statuses(job)[-2:] == ["REQUEUED", "QUEUED"]
    assert sim.task_statuses() == []


def test_a_running_job_whose_tasks_the_cluster_lost_is_retried_when_it_has_retries_left(
    sim, researcher, image
) -> None:
    job = started(sim, submit(researcher, image, gpu_milli=250, max_retries=1))
    sim.reset()
    age(job, LIMITS.lost_grace_s - 1)
    reconcile.reconcile(backend=sim, limits=LIMITS)
    assert status(job) == JobStatus.STARTING.value  # within the grace period
    age(job, 2)
    reconcile.reconcile(backend=sim, limits=LIMITS)
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED.value and job.retries == 1
    assert "PLATFORM" in job.pending_reason


def test_a_job_whose_tasks_the_cluster_lost_fails_as_platform_without_retries_left(
    sim, researcher, image
) -> None:
    job = started(sim, submit(researcher, image, gpu_milli=250))
    sim.reset()
    age(job, LIMITS.lost_grace_s + 1)
    reconcile.reconcile(backend=sim, limits=LIMITS)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED.value and job.failure_category == "PLATFORM"
    assert Quota.objects.get(team=job.team).used_gpu_milli == 0


def test_a_stop_the_cluster_never_confirms_is_forced(sim, researcher, image) -> None:
    backend = faulty(sim)
    job = started(sim, submit(researcher, image, gpu_milli=250))
    job_transition(job=job, to=JobStatus.STOPPING, actor="ada", reason="cancelled")
    backend.delete_fails = True
    reconcile.reconcile(backend=backend, limits=LIMITS)
    assert status(job) == JobStatus.STOPPING.value  # still trying
    age(job, LIMITS.stop_force_s + 1)
    result = reconcile.reconcile(backend=backend, limits=LIMITS)
    assert result.actions == [(job.pk, "stop-forced")]
    assert status(job) == JobStatus.STOPPED.value
    assert Quota.objects.get(team=job.team).used_gpu_milli == 0


def test_a_preemption_past_its_grace_period_is_forced(sim, researcher, image) -> None:
    job = started(sim, submit(researcher, image, gpu_milli=250, preemption_grace_seconds=10))
    job_transition(job=job, to=JobStatus.RUNNING, actor="system")
    job_transition(job=job, to=JobStatus.PREEMPTING, actor="scheduler", reason="preempted")
    age(job, 10 + LIMITS.preempt_margin_s - 1)
    reconcile.reconcile(backend=sim, limits=LIMITS)
    assert status(job) == JobStatus.PREEMPTING.value  # grace plus margin not over yet
    age(job, 2)
    reconcile.reconcile(backend=sim, limits=LIMITS)
    assert status(job) == JobStatus.QUEUED.value
    assert sim.task_statuses() == []  # the job's processes are gone


def test_a_job_left_requeued_by_a_dead_worker_is_queued_again(sim, researcher, image) -> None:
    job = started(sim, submit(researcher, image, gpu_milli=250))
    job_transition(job=job, to=JobStatus.REQUEUED, actor="system", reason="half a requeue")
    age(job, LIMITS.requeue_after_s + 1)
    reconcile.reconcile(backend=sim, limits=LIMITS)
    assert status(job) == JobStatus.QUEUED.value


def test_a_healthy_cluster_is_left_alone(sim, clock, researcher, image) -> None:
    job = started(sim, submit(researcher, image, gpu_milli=250, sim_duration_seconds=10_000))
    clock.advance(60)
    age(job, LIMITS.start_timeout_s + LIMITS.bind_give_up_s)  # old, but all its tasks run
    assert reconcile.reconcile(backend=sim, limits=LIMITS).actions == []
    assert status(job) == JobStatus.STARTING.value  # the sync, not the reconciler, moves it on
