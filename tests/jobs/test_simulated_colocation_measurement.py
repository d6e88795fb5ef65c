"""A co-location on the simulated backend becomes a ``ColocationMeasurement`` whose normalised
throughputs are the ground truth's: Gavel's measured pair, so the measurement loop runs with no GPU.

Real cycle, bind, sweep and database; the real simulated backend with the shared Gavel pairs.
"""
# ruff: noqa: F811  (pytest fixtures are imported by name and then requested as arguments)

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from django.core.cache import cache

from jobs import scheduling
from jobs.binding import job_bind
from jobs.cluster import get_backend
from jobs.colocation import colocation_pair_records, colocation_sweep
from jobs.models import ColocationMeasurement, Job, SoloProfile
from jobs.profiling_services import command_hash, command_line
from jobs.solo_sampling import solo_sample_sweep
from jobs.sync import sync_status
from scheduler.backends.base import TaskPhase
from scheduler.backends.simulated import JOB_TYPE_ENV, SimulatedBackend
from scheduler.backends.simulated_throughput import platform_ground_truth
from scheduler.datapaths import default_data_dir
from scheduler.interference.features import FEATURE_NAMES, ordered_table
from scheduler.sim.perf import INFEASIBLE_PAIR_NORM, PerfModel
from tests.jobs.runtime_fixtures import clock, image, researcher, submit, team  # noqa: F401  (fixtures)


@pytest.fixture
def perf() -> PerfModel:
    truth = platform_ground_truth(default_data_dir())
    if truth is None:
        pytest.skip(f"no Gavel pairs under {default_data_dir()} (interference/gavel)")
    return truth


def measured_pair(perf: PerfModel) -> tuple[str, str]:
    """Two different job types whose pair Gavel measured as feasible, slowing both down."""
    for (a, b), y in sorted(perf.pair_norm.items()):
        yb = perf.pair_norm[(b, a)]
        if a != b and INFEASIBLE_PAIR_NORM != y < 1.0 and INFEASIBLE_PAIR_NORM != yb < 1.0:
            return a, b
    raise AssertionError("no feasible measured pair in the ground truth")


def cycle(sim: SimulatedBackend) -> None:
    cache.delete(scheduling.round_key())
    scheduling.run_scheduling_cycle(backend=sim)


def run(sim: SimulatedBackend, clock: Any, jobs: list[Job]) -> dict[str, Any]:
    cycle(sim)
    for job in jobs:
        assert job_bind(job_id=job.pk, backend=sim) == "bound"
    clock.advance(15)  # past pending and start-up
    return {s.job_id: s for s in sim.task_statuses() if s.phase is TaskPhase.RUNNING}


def test_a_co_location_on_the_simulated_backend_is_measured_at_the_ground_truth_value(
    tmp_path: Path, clock: Any, researcher: Any, image: Any, settings: Any, perf: PerfModel
) -> None:
    settings.SIM_STATE_PATH = str(tmp_path / "cluster.json")
    settings.SCHEDULER_POLICY = "fifo"  # first fit: two shares land on one GPU
    settings.CACHES = {
        **settings.CACHES,
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": str(tmp_path)},
    }
    sim = SimulatedBackend(settings.SIM_STATE_PATH, cluster="small", time_scale=1.0, clock=clock, perf=perf)
    gpu_model = sim.snapshot().nodes[0].gpus[0].model
    type_a, type_b = measured_pair(perf)
    commands = {t: ["python", "train.py", "--model", t] for t in (type_a, type_b)}

    # Solo runs: each configuration alone on a whole GPU reports its isolated throughput, and beat's
    # solo sampling records it as the configuration's solo profile, the path a real job takes.
    settings.SOLO_WARMUP_SECONDS = 0.0
    settings.SOLO_PROFILE_SECONDS = 20.0
    solo_jobs = [
        submit(researcher, image, command=commands[t], gpus=1, sim_duration_seconds=60, env={JOB_TYPE_ENV: t})
        for t in (type_a, type_b)
    ]
    alone = run(sim, clock, solo_jobs)
    for job, t in zip(solo_jobs, (type_a, type_b), strict=True):
        assert alone[str(job.pk)].throughput == pytest.approx(perf.iso_tput[t])
    assert solo_sample_sweep(sim) == 0  # one sample spans no window yet
    clock.advance(25)
    assert solo_sample_sweep(sim) == 2
    for t in (type_a, type_b):
        solo = SoloProfile.objects.get(command_hash=command_hash(command_line(commands[t])))
        assert solo.solo_throughput == pytest.approx(perf.iso_tput[t])
        assert (solo.image, solo.gpu_model, solo.samples) == (image.reference, gpu_model, 2)
        assert solo.model_family == perf.job_types[perf.index(t)].family
        # Gavel measures no utilisation: stored as not measured, never as 0 %.
        assert solo.gpu_util is None and solo.mem_util is None
    clock.advance(120)  # both solo runs finish
    sync_status(backend=sim)
    assert {Job.objects.get(pk=j.pk).status for j in solo_jobs} == {"SUCCEEDED"}

    shared = [
        submit(
            researcher,
            image,
            command=commands[t],
            gpu_milli=400,
            sim_duration_seconds=100_000,
            env={JOB_TYPE_ENV: t},
        )
        for t in (type_a, type_b)
    ]
    # The ground truth is the policy's view of these jobs (jobs.scheduling), with no utilisation.
    offered = {r.job_id: r.profile for r in scheduling.build_view(sim).view.queue}
    for job, t in zip(shared, (type_a, type_b), strict=True):
        assert offered[str(job.pk)] == sim.job_profile({JOB_TYPE_ENV: t})
        assert "gpu_util" not in offered[str(job.pk)]
    together = run(sim, clock, shared)
    assert together[str(shared[0].pk)].gpu_indices == together[str(shared[1].pk)].gpu_indices

    assert solo_sample_sweep(sim) == 0  # sharing a GPU: not a solo run, nothing sampled
    assert colocation_sweep(sim) == 1

    (row,) = ColocationMeasurement.objects.all()
    ia, ib = perf.index(type_a), perf.index(type_b)
    assert (row.job_a_id, row.job_b_id) == (shared[0].pk, shared[1].pk)
    assert row.norm_a == pytest.approx(perf.norm(ia, ib))
    assert row.norm_b == pytest.approx(perf.norm(ib, ia))
    assert row.norm_a == pytest.approx(perf.pair_norm[(type_a, type_b)])
    assert (row.gpu_model, row.share_a_milli, row.share_b_milli) == (gpu_model, 400, 400)

    # The retraining record of this measurement: utilisations missing, as in Gavel's own rows, so
    # the model's features for them are NaN, not a 0 % the simulator never measured.
    (record,) = colocation_pair_records()
    for profile in (record.profile_a, record.profile_b):
        assert "gpu_util" not in profile and "mem_util" not in profile
        assert profile["solo_throughput"] > 0 and profile["gpu_memory_mib"] > 0
    x = ordered_table([record]).x
    for name in ("s_gpu_util", "s_mem_util", "o_gpu_util", "o_mem_util", "util_sum"):
        assert np.isnan(x[:, FEATURE_NAMES.index(name)]).all()


def test_the_platforms_simulated_backend_uses_the_gavel_ground_truth_unless_turned_off(
    tmp_path: Path, settings: Any, perf: PerfModel
) -> None:
    settings.CLUSTER_BACKEND = "simulated"
    settings.SIM_STATE_PATH = str(tmp_path / "cluster.json")
    backend = get_backend()
    assert isinstance(backend, SimulatedBackend) and backend.perf is perf

    settings.SIM_GROUND_TRUTH_GPU = ""
    backend = get_backend()
    assert isinstance(backend, SimulatedBackend) and backend.perf is None
