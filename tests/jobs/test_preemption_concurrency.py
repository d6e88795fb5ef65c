"""Preemption under real concurrency against PostgreSQL: racing cycles preempt a job once, and a cancel
racing the sync that requeues a preempted job ends it exactly once, with its quota and its run
accounted once."""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from django.db import connection

from jobs import scheduling
from jobs.models import Job, JobEvent
from jobs.services import job_cancel
from jobs.states import JobStatus
from jobs.sync import sync_status
from quotas.models import Quota, RunUsage
from scheduler.model import Decision, Eviction
from tests.jobs.runtime_fixtures import (  # noqa: F401  (fixtures)
    clock,
    image,
    researcher,
    running_on_sim,
    sim,
    submit,
    team,
)
from tests.jobs.test_job_submit_concurrency import _run_concurrently

requires_postgres = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="row locks (SELECT ... FOR UPDATE) are what is under test; SQLite serialises all writers",
)


def _running(sim: Any, clock: Any, researcher: Any, image: Any, **spec: Any) -> Job:
    job = submit(researcher, image, sim_duration_seconds=100_000, **spec)
    assert scheduling.run_scheduling_cycle(backend=sim).admitted == [job.pk]
    return running_on_sim(sim, clock, job)


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_racing_cycles_that_decide_the_same_eviction_preempt_the_job_once(
    sim, clock, researcher, image
) -> None:
    victim = _running(sim, clock, researcher, image, gpus=2)
    decision = Decision(evictions=[Eviction(str(victim.pk), "las-level")])

    def apply(i: int) -> dict[int, int | None]:
        view = scheduling.build_view(sim, rounds=False)
        return scheduling._apply_preemptions(sim, decision, view)

    with mock.patch("jobs.dispatch._enqueue"):
        results = _run_concurrently(apply, 8)

    assert [r for r in results if isinstance(r, Exception)] == []
    assert sum(1 for r in results if r) == 1  # one cycle won the compare-and-set
    victim.refresh_from_db()
    assert (victim.status, victim.preemptions) == (JobStatus.PREEMPTING.value, 1)
    assert JobEvent.objects.filter(job=victim, to_status=JobStatus.PREEMPTING.value).count() == 1


@requires_postgres
@pytest.mark.django_db(transaction=True)
def test_a_cancel_racing_the_requeue_of_a_preempted_job_stops_it_once(sim, clock, researcher, image) -> None:
    victim = _running(sim, clock, researcher, image, gpus=1, preemption_grace_seconds=0)
    view = scheduling.build_view(sim, rounds=False)
    scheduling._apply_preemptions(sim, Decision(evictions=[Eviction(str(victim.pk), "priority")]), view)

    def race(i: int) -> object:
        if i % 2:
            return job_cancel(job=Job.objects.get(pk=victim.pk), user=researcher)
        return sync_status(backend=sim)

    with mock.patch("jobs.dispatch._enqueue"):
        results = _run_concurrently(race, 6)
        sync_status(backend=sim)  # a stop requested by the cancel is finished by the next sync

    assert [r for r in results if isinstance(r, Exception)] == []
    victim.refresh_from_db()
    assert victim.status == JobStatus.STOPPED.value
    assert JobEvent.objects.filter(job=victim, to_status=JobStatus.STOPPED.value).count() == 1
    assert RunUsage.objects.filter(job=victim).count() == 1
    quota = Quota.objects.get(team=victim.team)
    assert (quota.used_gpu_milli, quota.used_jobs) == (0, 0)
