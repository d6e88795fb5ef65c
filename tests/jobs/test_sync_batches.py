"""Status sync under a backlog: the walk reports progress per batch and takes the oldest change first."""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

import datetime as dt

from django.utils import timezone

from jobs import scheduling, sync
from jobs.binding import job_bind
from jobs.models import Job
from jobs.states import JobStatus
from tests.jobs.runtime_fixtures import (  # noqa: F401  (fixtures)
    clock,
    image,
    researcher,
    sim,
    submit,
    team,
)


def starting_jobs(sim, researcher, image, n: int) -> list[Job]:
    jobs = [submit(researcher, image, gpu_milli=250, sim_duration_seconds=100) for _ in range(n)]
    scheduling.run_scheduling_cycle(backend=sim)
    for job in jobs:
        assert job_bind(job_id=job.pk, backend=sim) == "bound"
    return jobs


def test_progress_is_reported_after_every_batch_and_at_the_end_of_the_walk(
    sim, clock, researcher, image
) -> None:
    starting_jobs(sim, researcher, image, 5)
    clock.advance(15)  # all five now run: five jobs for the walk
    calls: list[int] = []
    sync.sync_status(backend=sim, progress=lambda: calls.append(1), batch_size=2)
    assert len(calls) == 3  # after jobs 2 and 4, then the end of the walk


def test_a_pass_without_progress_callback_still_syncs_every_job(sim, clock, researcher, image) -> None:
    jobs = starting_jobs(sim, researcher, image, 3)
    clock.advance(15)
    result = sync.sync_status(backend=sim, batch_size=1)
    assert sorted(pk for pk, _ in result.transitions) == sorted(j.pk for j in jobs)
    assert set(Job.objects.values_list("status", flat=True)) == {JobStatus.RUNNING.value}


def test_the_job_whose_state_changed_longest_ago_is_synced_first(sim, clock, researcher, image) -> None:
    jobs = starting_jobs(sim, researcher, image, 4)
    base = timezone.now() - dt.timedelta(hours=1)
    # Newest submission changed longest ago: the walk must follow updated_at, not the primary key.
    for age, job in enumerate(reversed(jobs)):
        Job.objects.filter(pk=job.pk).update(updated_at=base + dt.timedelta(seconds=age))
    clock.advance(15)
    result = sync.sync_status(backend=sim)
    assert [pk for pk, _ in result.transitions] == [j.pk for j in reversed(jobs)]
    assert {to for _, to in result.transitions} == {JobStatus.RUNNING.value}
