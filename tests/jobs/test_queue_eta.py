"""The platform's queue ETAs (``jobs.queue_eta``) on a hand-computed queue: expected times come from
``scheduler.policy.eta.RuntimeHistory`` over the database's completed jobs, the user's jobs of the
same image and shape first, and a running job's time left is conditional on how long it has run."""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.cache import cache

from jobs import queue_eta, scheduling
from jobs.models import Job
from jobs.policy_settings import active_policy
from jobs.states import JobStatus
from scheduler.backends.simulated import SimulatedBackend
from tests.jobs.runtime_fixtures import (  # noqa: F401  (fixtures)
    clock,
    image,
    make_member,
    make_team,
    running_on_sim,
    sim,
    submit,
)

pytestmark = pytest.mark.django_db


def completed(user: Any, image: Any, team: Any, seconds: float, finished: datetime, **spec: Any) -> None:
    job = submit(user, image, team=team, **spec)
    Job.objects.filter(pk=job.pk).update(
        status=JobStatus.SUCCEEDED.value,
        started_at=finished - timedelta(seconds=seconds),
        finished_at=finished,
    )


def running(user: Any, image: Any, team: Any, sim: SimulatedBackend, clock: Any, **spec: Any) -> Job:
    job = submit(user, image, team=team, **spec)
    cache.delete(scheduling.round_key())
    scheduling.run_scheduling_cycle(backend=sim)
    return running_on_sim(sim, clock, job)


def test_etas_follow_the_users_history_of_that_image_and_shape_and_the_running_jobs_elapsed_time(
    sim, clock, image
) -> None:
    team = make_team("vision")
    ada, bob = make_member("ada", team), make_member("bob", team)
    past = datetime.fromtimestamp(clock.t - 86_400, tz=UTC)
    for seconds in (100, 300, 300, 500, 700, 900):
        completed(ada, image, team, seconds, past, gpus=2)
    completed(bob, image, team, 5_000, past, gpus=2)  # the team's: not used while ada has her own
    completed(ada, image, team, 9_000, past, gpus=1)  # another shape
    first = running(ada, image, team, sim, clock, gpus=2, sim_duration_seconds=100_000)
    now = clock.t
    Job.objects.filter(pk=first.pk).update(run_started_at=datetime.fromtimestamp(now - 200, tz=UTC))
    second = submit(ada, image, team=team, gpus=2)
    third = submit(ada, image, team=team, gpus=2)

    cycle = scheduling.build_view(sim, now=now, rounds=True)
    etas = queue_eta.refresh_etas(cycle.view, active_policy(), cycle.queued)

    # The running job has run 200 s: ada's five 2-GPU runs longer than 200 s (enough for the thin-pool
    # guard) ran 100, 100, 300, 500 and 700 s beyond it, a median of 300 s left (not 400 - 200 = 200
    # of the plain median).
    assert etas[second.pk] == (now + 300, "medium")
    # The second then runs ada's median of 400 s, and the third starts after it.
    assert etas[third.pk] == (now + 700, "medium")
    assert queue_eta.eta_of(third.pk) == (now + 700, "medium")


def test_a_declared_limit_is_the_expected_time_less_what_has_run(sim, clock, image) -> None:
    team = make_team("vision")
    ada = make_member("ada", team)
    first = running(ada, image, team, sim, clock, gpus=2, max_runtime_seconds=1_000)
    now = clock.t
    Job.objects.filter(pk=first.pk).update(run_started_at=datetime.fromtimestamp(now - 400, tz=UTC))
    waiting = submit(ada, image, team=team, gpus=2)

    cycle = scheduling.build_view(sim, now=now, rounds=True)
    etas = queue_eta.refresh_etas(cycle.view, active_policy(), cycle.queued)

    assert etas[waiting.pk] == (now + 600, "high")


def test_the_simulated_duration_is_never_read_without_history_the_eta_is_unknown(sim, clock, image) -> None:
    # The running job tells the simulated backend it runs 1,000 s; no job has completed, so nothing
    # says how long it runs: the waiting job's start cannot be dated (the oracle would give now + 800).
    team = make_team("vision")
    ada = make_member("ada", team)
    first = running(ada, image, team, sim, clock, gpus=2, sim_duration_seconds=1_000)
    now = clock.t
    Job.objects.filter(pk=first.pk).update(run_started_at=datetime.fromtimestamp(now - 200, tz=UTC))
    waiting = submit(ada, image, team=team, gpus=2)

    cycle = scheduling.build_view(sim, now=now, rounds=True)
    etas = queue_eta.refresh_etas(cycle.view, active_policy(), cycle.queued)

    assert etas[waiting.pk] == (None, "low")


def test_without_a_pool_of_its_own_a_job_is_given_everyones_run_times_as_a_guess(sim, clock, image) -> None:
    # Only 'speech' has completed runs (five of 2 GPUs); the running job of 'vision' has no pool of its
    # own, so its time left is everyone's conditional median: the runs beyond its 200 s (300 ... 700 s)
    # ran 100 ... 500 s beyond it, a median of 300 s left, a guess; speech's waiting job starts then.
    team, other = make_team("vision"), make_team("speech")
    ada, eve = make_member("ada", team), make_member("eve", other)
    past = datetime.fromtimestamp(clock.t - 86_400, tz=UTC)
    for seconds in (300, 400, 500, 600, 700):
        completed(eve, image, other, seconds, past, gpus=2)
    first = running(ada, image, team, sim, clock, gpus=2, sim_duration_seconds=100_000)
    now = clock.t
    Job.objects.filter(pk=first.pk).update(run_started_at=datetime.fromtimestamp(now - 200, tz=UTC))
    waiting = submit(eve, image, team=other, gpus=2)

    cycle = scheduling.build_view(sim, now=now, rounds=True)
    etas = queue_eta.refresh_etas(cycle.view, active_policy(), cycle.queued)

    assert etas[waiting.pk] == (now + 300, "low")
