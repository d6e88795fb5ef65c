"""The queue kept between cycles (jobs.scheduling.JobRows): rows that did not change are reused, and
every change to a job (or its team, user or image) is seen by the next cycle's view."""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection

from accounts.models import Team
from jobs import scheduling
from jobs.models import Job
from jobs.services import job_cancel
from jobs.states import JobStatus
from scheduler.backends.simulated import SimulatedBackend
from tests.jobs.runtime_fixtures import (  # noqa: F401  (fixtures)
    clock,
    image,
    make_member,
    make_team,
    researcher,
    sim,
    submit,
    team,
)


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    for rows in (scheduling._QUEUED, scheduling._RUNNING):
        rows.clear()
    yield
    for rows in (scheduling._QUEUED, scheduling._RUNNING):
        rows.clear()


def _fill(sim: SimulatedBackend, researcher, image) -> None:
    """Both GPUs of the small cluster taken, so whatever is submitted next waits."""
    submit(researcher, image, gpus=2, preemptible=False)
    assert scheduling.run_scheduling_cycle(backend=sim) is not None


def _requests(sim: SimulatedBackend) -> dict[str, object]:
    return {r.job_id: r for r in scheduling.build_view(sim, rounds=False).view.queue}


needs_row_versions = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="row versions (xmin, ctid) are PostgreSQL's"
)


@needs_row_versions
def test_unchanged_queued_rows_are_not_loaded_again(sim, researcher, image) -> None:
    _fill(sim, researcher, image)
    waiting = [submit(researcher, image, gpus=1) for _ in range(3)]
    first = scheduling.build_view(sim, rounds=False).queued
    second = scheduling.build_view(sim, rounds=False).queued
    assert sorted(first) == sorted(str(j.pk) for j in waiting)
    assert all(second[pk] is first[pk] for pk in first)


@needs_row_versions
def test_a_priority_edit_is_in_the_next_view(sim, researcher, image) -> None:
    _fill(sim, researcher, image)
    job = submit(researcher, image, gpus=1)
    assert _requests(sim)[str(job.pk)].priority == 0  # type: ignore[attr-defined]
    # A bulk update: no save(), no signal; only the row changes.
    Job.objects.filter(pk=job.pk).update(priority=7)
    assert _requests(sim)[str(job.pk)].priority == 7  # type: ignore[attr-defined]
    Job.objects.filter(pk=job.pk).update(priority=3)  # again in the same (test) transaction
    assert _requests(sim)[str(job.pk)].priority == 3  # type: ignore[attr-defined]


@needs_row_versions
def test_a_team_renamed_is_in_the_next_view(sim, researcher, image, team: Team) -> None:
    _fill(sim, researcher, image)
    job = submit(researcher, image, gpus=1)
    assert _requests(sim)[str(job.pk)].team == team.slug  # type: ignore[attr-defined]
    Team.objects.filter(pk=team.pk).update(slug="vision-2")
    assert _requests(sim)[str(job.pk)].team == "vision-2"  # type: ignore[attr-defined]


def test_a_cancelled_job_leaves_and_a_new_one_joins_the_next_view(sim, researcher, image) -> None:
    _fill(sim, researcher, image)
    gone = submit(researcher, image, gpus=1)
    stays = submit(researcher, image, gpus=1)
    assert set(_requests(sim)) == {str(gone.pk), str(stays.pk)}
    job_cancel(job=gone, user=researcher, reason="not needed")
    new = submit(researcher, image, gpus=1)
    assert set(_requests(sim)) == {str(stays.pk), str(new.pk)}


def test_the_view_keeps_the_models_newest_first_order(sim, researcher, image) -> None:
    _fill(sim, researcher, image)
    jobs = [submit(researcher, image, gpus=1) for _ in range(4)]
    scheduling.build_view(sim, rounds=False)
    Job.objects.filter(pk=jobs[1].pk).update(priority=1)  # one row loaded again, the rest reused
    order = list(scheduling.build_view(sim, rounds=False).queued)
    assert order == [
        str(pk) for pk in Job.objects.filter(status=JobStatus.QUEUED.value).values_list("pk", flat=True)
    ]


def test_a_job_handed_to_admission_is_loaded_again_when_it_is_queued_again(sim, researcher, image) -> None:
    job = submit(researcher, image, gpus=1)
    scheduling.build_view(sim, rounds=False)
    result = scheduling.run_scheduling_cycle(backend=sim)
    assert result is not None and result.admitted == [job.pk]
    # Back to QUEUED with the status it had when first cached: the cached object said ADMITTED since.
    Job.objects.filter(pk=job.pk).update(status=JobStatus.QUEUED.value)
    sim.delete_job(str(job.pk))
    job.tasks.all().delete()
    cycle = scheduling.build_view(sim, rounds=False)
    assert cycle.queued[str(job.pk)].status == JobStatus.QUEUED.value


def test_a_view_from_kept_rows_equals_one_loaded_afresh(sim, researcher, image) -> None:
    submit(researcher, image, gpus=1)
    assert scheduling.run_scheduling_cycle(backend=sim) is not None
    for i in range(6):
        submit(researcher, image, gpus=1 + i % 2, priority=i % 3)
    scheduling.build_view(sim, rounds=False)  # warms the cache
    Job.objects.filter(status=JobStatus.QUEUED.value, priority=1).update(priority=5)
    kept = scheduling.build_view(sim, rounds=False).view
    scheduling._QUEUED.clear()
    scheduling._RUNNING.clear()
    fresh = scheduling.build_view(sim, rounds=False).view
    assert kept.queue == fresh.queue
    assert [(r.request, r.placements, r.started_at) for r in kept.running] == [
        (r.request, r.placements, r.started_at) for r in fresh.running
    ]


@needs_row_versions
def test_a_kept_row_gives_each_cycle_requests_of_its_own(sim, researcher, image) -> None:
    # The request's parts are kept with the row; what one cycle's policy does to its request
    # (its tasks, hints or profile) must not reach the next cycle's.
    _fill(sim, researcher, image)
    job = submit(researcher, image, gpus=1)
    first = _requests(sim)[str(job.pk)]
    first.tasks[0].gpus = 8  # type: ignore[attr-defined]
    first.hints["solo_first"] = "1"  # type: ignore[attr-defined]
    first.tasks.append(first.tasks[0])  # type: ignore[attr-defined]
    second = _requests(sim)[str(job.pk)]
    assert second is not first
    assert [t.gpus for t in second.tasks] == [1]  # type: ignore[attr-defined]
    assert "solo_first" not in second.hints  # type: ignore[attr-defined]
