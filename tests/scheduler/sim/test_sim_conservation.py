"""Invariants on random traces under every kind of policy: conservation, capacity, determinism."""

from __future__ import annotations

import random

import numpy as np
import pytest
from sim_helpers import FIRST_FIT, cluster, two_type_perf

from scheduler.framework import Profile
from scheduler.model import GPU_MILLI
from scheduler.policy.registry import Policy
from scheduler.sim.engine import SimConfig, SimResult, Simulator
from scheduler.sim.trace import TraceJob

GANDIVA = Profile(
    name="t-gandiva",
    filters=("resource_fit",),
    scores={"sim_most_allocated": 1.0},
    gpu_chooser="sim_gandiva_gpus",
)
GPUSHARE = Profile(
    name="t-gpushare",
    filters=("resource_fit",),
    scores={"sim_gpu_memory_binpack": 1.0},
    gpu_chooser="sim_gpu_memory_binpack",
)
POLICIES = [
    Policy("fifo", "fifo", "none", FIRST_FIT),
    Policy("sjf", "sjf", "none", FIRST_FIT),
    Policy("las", "las", "half", FIRST_FIT, preemptive=True),
    Policy("las-defrag", "las", "half", FIRST_FIT, preemptive=True, defragment=True),
    Policy("gandiva", "fifo", "half", GANDIVA, introspective=True),
    Policy("gpushare", "fifo", "memory", GPUSHARE),
]


def random_trace(
    seed: int, n: int = 120, sizes: tuple[int, ...] = (1, 1, 1, 1, 2, 4, 8, 12)
) -> list[TraceJob]:
    rng = random.Random(seed)
    jobs, t = [], 0.0
    for i in range(n):
        t += rng.expovariate(1 / 300.0)
        gpus = rng.choice(sizes)
        jobs.append(
            TraceJob(f"j{i}", t, rng.uniform(60, 20000), gpus, family=rng.choice(["ResNet-18", "LM"]))
        )
    return jobs


def simulate(pol: Policy, seed: int = 0, cycle_s: float = 10.0) -> SimResult:
    spec = cluster(
        nodes=3,
        gpus=8,
        links={(a, b): ("NV" if a // 4 == b // 4 else "SYS") for a in range(8) for b in range(a + 1, 8)},
    )
    cfg = SimConfig(seed=seed, cycle_s=cycle_s, round_s=600.0)
    return Simulator(random_trace(seed), spec, pol, two_type_perf(0.6, 0.7), cfg).run()


@pytest.mark.parametrize("pol", POLICIES, ids=lambda p: p.name)
def test_every_job_finishes_once_after_its_work_and_capacity_is_never_exceeded(pol: Policy) -> None:
    result = simulate(pol)
    finished = np.isfinite(result.finish)
    assert finished.all()
    # No job can finish before it had its full service at rate <= 1.
    assert (result.finish - result.first_start >= result.duration - 1e-6).all()
    assert (result.first_start >= result.submit - 1e-9).all()
    # Allocated GPUs never exceed the cluster, so allocated GPU-seconds never exceed capacity.
    assert result.alloc.max() <= result.total_gpus + 1e-9
    widths = np.diff(np.append(result.t, result.finish.max()))
    assert (result.alloc * widths).sum() <= result.total_gpus * result.finish.max() + 1e-6
    # Work is conserved: useful GPU-seconds = sum(num_gpus * duration) + restarts' lost work.
    useful = float((result.useful * widths).sum())
    work = float((result.num_gpus * result.duration).sum())
    assert useful >= work - 1e-3 * work
    restarts = result.preemptions + result.migrations
    assert useful <= work + restarts * 30.0 * 12 + 1e-3 * work
    assert result.placements == len(result.finish) + restarts
    if pol.defragment:
        assert result.migrations > 0  # the random trace does leave multi-GPU jobs behind scattered GPUs


def test_the_same_seed_gives_the_same_schedule_and_another_seed_other_job_types() -> None:
    pol = POLICIES[2]
    a, b, c = simulate(pol, seed=3), simulate(pol, seed=3), simulate(pol, seed=4)
    assert np.array_equal(a.finish, b.finish) and np.array_equal(a.useful, b.useful)
    assert not np.array_equal(a.submit, c.submit)  # the random trace itself follows the seed


def test_the_job_type_draw_follows_the_seed_on_a_fixed_trace() -> None:
    jobs = [TraceJob(f"j{i}", float(i), 100.0, 1) for i in range(50)]
    spec = cluster(nodes=1, gpus=8)
    types = []
    for seed in (1, 1, 2):
        sim = Simulator(jobs, spec, POLICIES[0], two_type_perf(0.6, 0.7), SimConfig(seed=seed))
        types.append([j.type_idx for j in sim.jobs])
    assert types[0] == types[1] != types[2]


def test_shared_gpus_never_exceed_their_milli_gpu_or_memory() -> None:
    pol = POLICIES[4]
    spec = cluster(nodes=1, gpus=2)
    sim = Simulator(random_trace(5, 60, (1,)), spec, pol, two_type_perf(0.6, 0.7), SimConfig(cycle_s=10.0))
    original = sim._start
    seen: list[int] = []

    def checked_start(job, placed, now):  # type: ignore[no-untyped-def]
        original(job, placed, now)
        assert (sim.free_milli >= 0).all() and (sim.free_mem >= 0).all()
        for node in sim.nodes:
            for gpu in node.gpus:
                assert gpu.used_milli <= GPU_MILLI and gpu.used_memory_mib <= gpu.memory_mib
        seen.append(max(len(t) for t in sim.tenants))

    sim._start = checked_start  # type: ignore[method-assign]
    sim.run()
    assert max(seen) >= 2  # the memory binpack did stack jobs


def test_a_job_larger_than_the_cluster_is_refused_up_front() -> None:
    with pytest.raises(ValueError, match="more GPUs than the cluster"):
        Simulator(random_trace(1, 20, (1, 4)), cluster(nodes=1, gpus=2), POLICIES[0], two_type_perf(0.6, 0.7))
