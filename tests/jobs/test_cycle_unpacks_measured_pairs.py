"""The platform's unpack rule runs on measured rates: the simulated backend reports each running
task's progress rate from its performance ground truth (``TaskStatus.rate``), the cycle puts it in
``RunningJob.rate``, and ``ours`` moves the newest tenant off a GPU whose pair runs beyond tolerance.

Real cycle, bind and sync, real database, the real simulated backend with a hand-made ground truth.
"""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from django.core.cache import cache

from jobs import scheduling
from jobs.binding import job_bind
from jobs.models import Job
from jobs.states import JobStatus
from jobs.sync import sync_status
from scheduler.backends.base import TaskPhase
from scheduler.backends.simulated import JOB_TYPE_ENV, SimulatedBackend
from scheduler.sim.perf import JobType, PerfModel
from tests.jobs.runtime_fixtures import clock, image, researcher, submit, team  # noqa: F401  (fixtures)

FAST = JobType("ResNet-18 (batch size 32)", "ResNet-18", 32)
SLOW = JobType("LM (batch size 20)", "LM", 20)


def ground_truth(y_fast_with_slow: float, y_slow_with_fast: float) -> PerfModel:
    """Two job types; ``y(a | b)``: a's normalised throughput next to b (Gavel's measured pairs)."""
    pairs = {
        (FAST.name, SLOW.name): y_fast_with_slow,
        (SLOW.name, FAST.name): y_slow_with_fast,
        (FAST.name, FAST.name): 0.6,
        (SLOW.name, SLOW.name): 0.6,
    }
    return PerfModel("t4", [FAST, SLOW], {FAST.name: 10.0, SLOW.name: 5.0}, pairs)


def backend(tmp_path: Path, clock: Any, settings: Any, perf: PerfModel | None) -> SimulatedBackend:
    """One node with 2 T4s, time scale 1, a private cache (as ``runtime_fixtures.sim``)."""
    settings.SIM_STATE_PATH = str(tmp_path / "cluster.json")
    settings.SIM_CLUSTER = "small"
    settings.CACHES = {
        **settings.CACHES,
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": str(tmp_path)},
    }
    return SimulatedBackend(settings.SIM_STATE_PATH, cluster="small", time_scale=1.0, clock=clock, perf=perf)


def cycle(sim: SimulatedBackend) -> scheduling.CycleResult:
    cache.delete(scheduling.round_key())  # every cycle here is a round
    result = scheduling.run_scheduling_cycle(backend=sim)
    assert result is not None
    return result


def packed_pair(sim: SimulatedBackend, clock: Any, researcher: Any, image: Any, settings: Any) -> list[Job]:
    """A whole-GPU job on one GPU and two shared jobs packed on the other, all running. First fit
    (``fifo``) packs them; then the platform switches to ``ours``."""
    settings.SCHEDULER_POLICY = "fifo"
    whole = submit(researcher, image, gpus=1, sim_duration_seconds=100_000)
    pair = [
        submit(researcher, image, gpu_milli=400, sim_duration_seconds=100_000, env={JOB_TYPE_ENV: t.name})
        for t in (FAST, SLOW)
    ]
    cycle(sim)
    for job in (whole, *pair):
        assert job_bind(job_id=job.pk, backend=sim) == "bound"
    clock.advance(15)
    sync_status(backend=sim)
    assert all(Job.objects.get(pk=j.pk).status == JobStatus.RUNNING.value for j in (whole, *pair))
    gpus = {tuple(Job.objects.get(pk=j.pk).tasks.get().gpu_indices) for j in pair}
    assert len(gpus) == 1  # packed on one GPU
    settings.SCHEDULER_POLICY = "ours"
    return pair


def test_the_simulated_backend_reports_each_running_tasks_rate_with_its_co_tenant(
    tmp_path, clock, researcher, image, settings
) -> None:
    sim = backend(tmp_path, clock, settings, ground_truth(0.5, 0.8))
    fast, slow = packed_pair(sim, clock, researcher, image, settings)
    rates = {s.job_id: s.rate for s in sim.task_statuses() if s.phase is TaskPhase.RUNNING}
    # Alone a rate is 1; next to the other type it is that pair's measured throughput.
    assert rates[str(fast.pk)] == pytest.approx(0.5)
    assert rates[str(slow.pk)] == pytest.approx(0.8)
    running = {r.job_id: r.rate for r in scheduling.build_view(sim, rounds=False).view.running}
    assert running[str(fast.pk)] == pytest.approx(0.5) and running[str(slow.pk)] == pytest.approx(0.8)


def test_a_packed_pair_measured_beyond_tolerance_gets_an_unpack_eviction_of_its_newest_job(
    tmp_path, clock, researcher, image, settings
) -> None:
    # 0.5 x 1.5 < 1: the fast type runs beyond its tolerance of 1.5 (the pair's sum, 1.3, would not
    # unpack under Gandiva's rule). Both started together: the later submitted (slow) is moved.
    sim = backend(tmp_path, clock, settings, ground_truth(0.5, 0.8))
    fast, slow = packed_pair(sim, clock, researcher, image, settings)

    result = cycle(sim)

    assert result.evicted == [slow.pk]
    moved = Job.objects.get(pk=slow.pk)
    assert (moved.status, moved.preemption_rule) == (JobStatus.PREEMPTING.value, "unpack")
    assert Job.objects.get(pk=fast.pk).status == JobStatus.RUNNING.value


def test_a_packed_pair_measured_within_tolerance_stays_packed(
    tmp_path, clock, researcher, image, settings
) -> None:
    # 0.7 x 1.5 >= 1 and 0.9 x 1.5 >= 1: packing wins (1.6 GPUs of work on one GPU), nothing moves.
    sim = backend(tmp_path, clock, settings, ground_truth(0.7, 0.9))
    pair = packed_pair(sim, clock, researcher, image, settings)

    result = cycle(sim)

    assert result.evicted == []
    assert all(Job.objects.get(pk=j.pk).status == JobStatus.RUNNING.value for j in pair)
