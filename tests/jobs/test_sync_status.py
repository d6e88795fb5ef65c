"""Status sync: backend task phases drive jobs to RUNNING and their end, and quota comes back."""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

import datetime as dt

from jobs import scheduling, sync
from jobs.binding import job_bind
from jobs.models import Job, Task
from jobs.services import job_cancel, job_transition
from jobs.states import JobStatus
from quotas.models import Quota, UsageEntry
from scheduler.backends.base import TaskPhase
from tests.jobs.runtime_fixtures import (  # noqa: F401  (fixtures)
    clock,
    image,
    researcher,
    sim,
    statuses,
    submit,
    team,
)

STORY = ["DRAFT", "SUBMITTED", "QUEUED", "ADMITTED", "STARTING", "RUNNING", "SUCCEEDED"]


def started(sim, job: Job) -> Job:
    """Schedule and bind ``job``: it is STARTING on the simulated cluster."""
    scheduling.run_scheduling_cycle(backend=sim)
    assert job_bind(job_id=job.pk, backend=sim) == "bound"
    job.refresh_from_db()
    assert job.status == JobStatus.STARTING.value
    return job


def test_a_job_runs_to_success_and_its_events_tell_the_whole_story(
    sim, clock, researcher, image, team
) -> None:
    job = started(sim, submit(researcher, image, gpu_milli=250, sim_duration_seconds=100))
    assert Quota.objects.get(team=team).used_gpu_milli == 250

    clock.advance(5)  # still pulling the image
    sync.sync_status(backend=sim)
    assert Job.objects.get(pk=job.pk).status == JobStatus.STARTING.value
    assert Task.objects.get(job=job).phase == TaskPhase.STARTING.value

    clock.advance(10)
    sync.sync_status(backend=sim)
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING.value
    task = Task.objects.get(job=job)
    assert task.phase == TaskPhase.RUNNING.value and task.started_at is not None

    clock.advance(100)
    result = sync.sync_status(backend=sim)
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED.value
    assert result.transitions == [(job.pk, "SUCCEEDED")]
    assert statuses(job) == STORY
    task = Task.objects.get(job=job)
    assert (task.phase, task.exit_code) == (TaskPhase.SUCCEEDED.value, 0)
    assert task.finished_at - task.started_at == dt.timedelta(seconds=100)
    quota = Quota.objects.get(team=team)
    assert (quota.used_gpu_milli, quota.used_jobs) == (0, 0)
    assert UsageEntry.objects.get(job=job).released_at is not None


def test_a_sync_that_only_sees_the_end_still_records_running(sim, clock, researcher, image) -> None:
    job = started(sim, submit(researcher, image, gpu_milli=500, sim_duration_seconds=10))
    clock.advance(1000)
    sync.sync_status(backend=sim)
    assert statuses(Job.objects.get(pk=job.pk)) == STORY


def test_a_failing_command_fails_the_job_as_a_user_error(sim, clock, researcher, image, team) -> None:
    job = started(sim, submit(researcher, image, gpus=1, command=["false"], sim_duration_seconds=5))
    clock.advance(100)
    sync.sync_status(backend=sim)
    job.refresh_from_db()
    assert (job.status, job.failure_category) == (JobStatus.FAILED.value, "USER")
    assert "exit code 1" in job.failure_message
    assert Task.objects.get(job=job).exit_code == 1
    assert Quota.objects.get(team=team).used_gpu_milli == 0


def test_an_out_of_memory_exit_is_reported_as_oom(sim, clock, researcher, image) -> None:
    job = started(
        sim, submit(researcher, image, gpus=1, env={"SIM_EXIT_CODE": "137"}, sim_duration_seconds=5)
    )
    clock.advance(100)
    sync.sync_status(backend=sim)
    job.refresh_from_db()
    assert (job.status, job.failure_category) == (JobStatus.FAILED.value, "OOM")


def test_one_failed_replica_fails_the_gang_and_stops_the_others(sim, clock, researcher, image) -> None:
    job = started(sim, submit(researcher, image, gpus=1, replicas=2, sim_duration_seconds=1000))
    clock.advance(20)
    sync.sync_status(backend=sim)
    assert Job.objects.get(pk=job.pk).status == JobStatus.RUNNING.value
    # Rebind replica 1 as a task that fails at once (what a crashed process looks like).
    sim.delete_job(str(job.pk))
    from jobs.binding import task_spec
    from jobs.placements import task_placement

    for task in job.tasks.all():
        spec = task_spec(job, task)
        if task.index == 1:
            spec.command, spec.sim_duration_s = ["false"], 0.0
        sim.bind(spec, task_placement(job, task))
    clock.advance(20)
    sync.sync_status(backend=sim)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED.value and f"job-{job.pk}-1" in job.failure_message
    assert sim.task_statuses(job_id=str(job.pk)) == []  # the healthy replica was stopped too


def test_a_cancelled_running_job_is_stopped_on_the_backend(sim, clock, researcher, image, team) -> None:
    job = started(sim, submit(researcher, image, gpus=2, sim_duration_seconds=1000))
    clock.advance(20)
    sync.sync_status(backend=sim)
    job_cancel(job=Job.objects.get(pk=job.pk), user=researcher)
    assert Job.objects.get(pk=job.pk).status == JobStatus.STOPPING.value
    assert sync.job_stop(job_id=job.pk, backend=sim) is True
    assert sync.job_stop(job_id=job.pk, backend=sim) is False  # repeating is harmless
    job.refresh_from_db()
    assert job.status == JobStatus.STOPPED.value
    assert sim.task_statuses(job_id=str(job.pk)) == []
    assert all(g.is_idle for g in sim.snapshot().node("t4-1").gpus)
    assert Quota.objects.get(team=team).used_gpu_milli == 0


def test_the_sync_finishes_stops_whose_message_was_lost(sim, clock, researcher, image) -> None:
    job = started(sim, submit(researcher, image, gpus=1, sim_duration_seconds=1000))
    job_cancel(job=Job.objects.get(pk=job.pk), user=researcher)
    result = sync.sync_status(backend=sim)
    assert (job.pk, "STOPPED") in result.transitions
    assert sim.task_statuses(job_id=str(job.pk)) == []


def test_a_job_whose_tasks_vanished_is_left_to_the_reconciler(sim, clock, researcher, image) -> None:
    # Lost tasks are a PLATFORM failure handled by jobs.reconcile (tests/jobs/test_reconcile.py).
    job = started(sim, submit(researcher, image, gpus=1, sim_duration_seconds=1000))
    sim.reset()  # the cluster forgot everything
    Job.objects.filter(pk=job.pk).update(
        updated_at=job.updated_at - dt.timedelta(seconds=sync.LOST_GRACE_S + 1)
    )
    sync.sync_status(backend=sim)
    assert Job.objects.get(pk=job.pk).status == JobStatus.STARTING.value


def test_tasks_of_jobs_that_already_ended_are_deleted(sim, clock, researcher, image) -> None:
    job = started(sim, submit(researcher, image, gpus=1, sim_duration_seconds=1000))
    job_transition(job=job, to=JobStatus.FAILED, actor="test", reason="failed elsewhere")
    result = sync.sync_status(backend=sim)
    assert result.orphans_deleted == [str(job.pk)]
    assert sim.task_statuses() == []


def test_syncing_twice_changes_nothing_the_second_time(sim, clock, researcher, image) -> None:
    job = started(sim, submit(researcher, image, gpu_milli=250, sim_duration_seconds=10))
    clock.advance(1000)
    sync.sync_status(backend=sim)
    again = sync.sync_status(backend=sim)
    assert again.transitions == []
    assert statuses(Job.objects.get(pk=job.pk)) == STORY
