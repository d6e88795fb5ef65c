"""Status sync cost: it grows with the jobs whose tasks changed, not with the jobs that run.

Query counts and model instances built (Django's ``post_init``) are compared between two states of
one database that differ only in how many jobs run unchanged; no timing is involved.
"""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

from django.db import connection
from django.db.models.signals import post_init
from django.test.utils import CaptureQueriesContext

from jobs import scheduling, sync
from jobs.binding import job_bind
from jobs.models import Job, JobEvent, Task
from jobs.states import JobStatus
from quotas.models import Quota, RunUsage
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


def bound(sim, researcher, image, n: int, seconds: float = 10_000) -> list[Job]:
    """``n`` small shared jobs, scheduled and bound: STARTING on the simulated cluster."""
    jobs = [submit(researcher, image, gpu_milli=50, sim_duration_seconds=seconds) for _ in range(n)]
    scheduling.run_scheduling_cycle(backend=sim)
    for job in jobs:
        assert job_bind(job_id=job.pk, backend=sim) == "bound"
    return jobs


def running(sim, clock, researcher, image, n: int) -> list[Job]:
    """``n`` jobs that run, and whose rows the sync already brought up to date."""
    jobs = bound(sim, researcher, image, n)
    clock.advance(15)
    sync.sync_status(backend=sim)
    assert set(Job.objects.filter(pk__in=[j.pk for j in jobs]).values_list("status", flat=True)) == {
        "RUNNING"
    }
    return jobs


def queries_of_sync(sim) -> tuple[int, sync.SyncResult]:
    with CaptureQueriesContext(connection) as ctx:
        result = sync.sync_status(backend=sim)
    return len(ctx.captured_queries), result


def rows_loaded_by_sync(sim) -> tuple[int, sync.SyncResult]:
    """How many Job and Task model instances one sync pass builds."""
    built: list[object] = []

    def count(sender: type, instance: object, **kwargs: object) -> None:
        built.append(instance)

    post_init.connect(count, sender=Job, weak=False)
    post_init.connect(count, sender=Task, weak=False)
    try:
        result = sync.sync_status(backend=sim)
    finally:
        post_init.disconnect(count, sender=Job)
        post_init.disconnect(count, sender=Task)
    return len(built), result


def test_a_pass_where_nothing_changed_costs_the_same_with_two_or_eight_running_jobs(
    sim, clock, researcher, image
) -> None:
    running(sim, clock, researcher, image, 2)
    clock.advance(5)
    few, result = queries_of_sync(sim)
    assert result.transitions == []
    running(sim, clock, researcher, image, 6)
    clock.advance(5)
    many, result = queries_of_sync(sim)
    assert result.transitions == []
    assert Job.objects.filter(status=JobStatus.RUNNING.value).count() == 8
    assert many == few


def test_a_pass_where_nothing_changed_loads_no_job(sim, clock, researcher, image) -> None:
    running(sim, clock, researcher, image, 6)
    clock.advance(5)
    loaded, result = rows_loaded_by_sync(sim)
    assert result.transitions == []
    assert loaded == 0


def test_only_the_job_that_changed_is_loaded(sim, clock, researcher, image) -> None:
    running(sim, clock, researcher, image, 2)
    (first,) = bound(sim, researcher, image, 1)
    clock.advance(15)
    few, result = rows_loaded_by_sync(sim)
    assert result.transitions == [(first.pk, JobStatus.RUNNING.value)]
    running(sim, clock, researcher, image, 6)
    (second,) = bound(sim, researcher, image, 1)
    clock.advance(15)
    many, result = rows_loaded_by_sync(sim)
    assert result.transitions == [(second.pk, JobStatus.RUNNING.value)]
    assert many == few


def test_one_job_starting_costs_the_same_whatever_the_number_of_unchanged_running_jobs(
    sim, clock, researcher, image
) -> None:
    running(sim, clock, researcher, image, 2)
    (first,) = bound(sim, researcher, image, 1)
    clock.advance(15)
    few, result = queries_of_sync(sim)
    assert result.transitions == [(first.pk, JobStatus.RUNNING.value)]

    running(sim, clock, researcher, image, 6)
    (second,) = bound(sim, researcher, image, 1)
    clock.advance(15)
    many, result = queries_of_sync(sim)
    assert result.transitions == [(second.pk, JobStatus.RUNNING.value)]
    assert many == few


def test_many_jobs_start_with_the_queries_of_one(sim, clock, researcher, image) -> None:
    one = bound(sim, researcher, image, 1)
    clock.advance(15)
    single, _ = queries_of_sync(sim)
    six = bound(sim, researcher, image, 6)
    clock.advance(15)
    bulk, result = queries_of_sync(sim)
    assert sorted(pk for pk, _ in result.transitions) == sorted(j.pk for j in six)
    assert bulk == single
    # Each one moved as job_transition moves one: its own event, its start time, its task rows.
    for job in [*one, *six]:
        job.refresh_from_db()
        assert job.status == JobStatus.RUNNING.value and job.started_at is not None
        assert job.run_started_at is not None
        assert statuses(job)[-2:] == ["STARTING", "RUNNING"]
        task = Task.objects.get(job=job)
        assert task.phase == TaskPhase.RUNNING.value and task.started_at is not None


def test_jobs_ending_together_each_get_their_run_their_event_and_their_quota_back(
    sim, clock, researcher, image, team
) -> None:
    jobs = bound(sim, researcher, image, 4, seconds=100)
    clock.advance(15)
    sync.sync_status(backend=sim)
    assert Quota.objects.get(team=team).used_gpu_milli == 4 * 50
    clock.advance(200)
    result = sync.sync_status(backend=sim)
    assert sorted(result.transitions) == sorted((j.pk, JobStatus.SUCCEEDED.value) for j in jobs)
    for job in jobs:
        job.refresh_from_db()
        assert job.status == JobStatus.SUCCEEDED.value and job.finished_at is not None
        assert JobEvent.objects.filter(job=job, to_status=JobStatus.SUCCEEDED.value).count() == 1
        run = RunUsage.objects.get(job=job)
        assert run.ended_as == JobStatus.SUCCEEDED.value and run.gpu_seconds > 0
        assert job.attained_gpu_seconds == run.gpu_seconds
    quota = Quota.objects.get(team=team)
    assert (quota.used_gpu_milli, quota.used_jobs) == (0, 0)


def test_a_job_another_process_moved_meanwhile_is_not_moved_again(sim, clock, researcher, image) -> None:
    jobs = bound(sim, researcher, image, 3)
    clock.advance(15)
    # A cancel won the race for the first job after the sync read its state: the bulk move skips it.
    changes = sync._changes(sync._active_jobs(), {st.job_id: [st] for st in sim.task_statuses()})
    Job.objects.filter(pk=jobs[0].pk).update(status=JobStatus.STOPPING.value)
    result = sync.SyncResult()
    sync._move_many(result, [c for c in changes if c.verdict])
    assert sorted(pk for pk, _ in result.transitions) == sorted(j.pk for j in jobs[1:])
    assert Job.objects.get(pk=jobs[0].pk).status == JobStatus.STOPPING.value
    assert not JobEvent.objects.filter(job=jobs[0], to_status=JobStatus.RUNNING.value).exists()


def test_with_settled_tasks_a_pass_reads_only_the_jobs_whose_report_changed(
    sim, clock, researcher, image, monkeypatch
) -> None:
    settled = sync.SettledTasks()
    bound(sim, researcher, image, 6)
    clock.advance(15)
    sync.sync_status(backend=sim, settled=settled)  # all six start: moved, not settled yet
    sync.sync_status(backend=sim, settled=settled)  # now they need nothing: settled
    (new,) = bound(sim, researcher, image, 1)
    clock.advance(15)
    read: list[int] = []
    real = sync._active_jobs

    def recording(only: set[int] | None = None) -> list[sync._ActiveJob]:
        jobs = real(only)
        read.extend(job.pk for job in jobs)
        return jobs

    monkeypatch.setattr(sync, "_active_jobs", recording)
    result = sync.sync_status(backend=sim, settled=settled)
    assert result.transitions == [(new.pk, JobStatus.RUNNING.value)]
    assert read == [new.pk]
    read.clear()
    sync.sync_status(backend=sim, settled=settled)  # the job it moved is read once more, then settled
    assert read == [new.pk]
    read.clear()
    assert sync.sync_status(backend=sim, settled=settled).transitions == []
    assert read == []


def test_a_settled_job_whose_tasks_end_is_still_moved(sim, clock, researcher, image, team) -> None:
    settled = sync.SettledTasks()
    jobs = bound(sim, researcher, image, 3, seconds=100)
    clock.advance(15)
    sync.sync_status(backend=sim, settled=settled)
    sync.sync_status(backend=sim, settled=settled)
    clock.advance(200)
    result = sync.sync_status(backend=sim, settled=settled)
    assert sorted(result.transitions) == sorted((j.pk, JobStatus.SUCCEEDED.value) for j in jobs)
    assert Quota.objects.get(team=team).used_jobs == 0
