"""The operator's knobs on the policy: the round period and the 2D-LAS level thresholds."""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.core.checks import run_checks
from django.utils import timezone

from jobs import scheduling
from jobs.models import Job
from jobs.states import JobStatus
from tests.jobs.runtime_fixtures import clock, image, researcher, sim, submit, team  # noqa: F401
from tests.jobs.test_preemption_cycle import cycle, running_job


def _long_job_and_a_new_one(sim, clock, researcher, image) -> tuple[Job, Job]:
    long = running_job(sim, clock, researcher, image, gpus=2, preemption_grace_seconds=5)
    # Ten minutes on two GPUs: 1,200 GPU-s, under ours' first level (3,600 GPU-s).
    Job.objects.filter(pk=long.pk).update(run_started_at=timezone.now() - timedelta(minutes=10))
    return long, submit(researcher, image, gpus=2, sim_duration_seconds=60)


def test_the_policy_thresholds_decide_when_a_long_job_yields(sim, clock, researcher, image, settings) -> None:
    settings.SCHEDULER_POLICY = "ours"
    long, short = _long_job_and_a_new_one(sim, clock, researcher, image)
    assert cycle(sim).evicted == []  # the policy's own levels: both jobs are at level 0

    settings.SCHEDULER_LAS_THRESHOLDS_GPU_S = [600.0, 6000.0]
    assert scheduling.active_policy().las_thresholds == (600.0, 6000.0)
    result = cycle(sim)

    long.refresh_from_db()
    assert result.evicted == [long.pk]
    assert (long.status, long.preempted_for_id, long.preemption_rule) == (
        JobStatus.PREEMPTING.value,
        short.pk,
        "las",
    )


def test_rules_run_once_per_configured_round(settings) -> None:
    settings.SCHEDULER_ROUND_SECONDS = 20.0
    cache.delete(scheduling.round_key())
    assert scheduling._is_round(100.0)
    assert not scheduling._is_round(119.0)  # the same 20 s window
    assert scheduling._is_round(121.0)


def test_thresholds_that_do_not_increase_stop_start_up(settings) -> None:
    settings.SCHEDULER_LAS_THRESHOLDS_GPU_S = [6000.0, 600.0]
    settings.SCHEDULER_ROUND_SECONDS = 0.0
    ids = {message.id for message in run_checks()}
    assert {"jobs.E032", "jobs.E033"} <= ids


@pytest.mark.parametrize("spacing", [-1.0, float("inf"), float("nan"), 61.0])
def test_a_cycle_spacing_out_of_range_stops_start_up(settings, spacing: float) -> None:
    settings.SCHEDULE_MIN_SPACING_SECONDS = spacing
    assert "jobs.E034" in {message.id for message in run_checks()}


def test_the_default_cycle_spacing_passes_the_checks(settings) -> None:
    settings.SCHEDULE_MIN_SPACING_SECONDS = 0.5
    assert "jobs.E034" not in {message.id for message in run_checks()}
