"""Queue priority of the 2D-LAS family (``scheduler.policy.queue_sort``): levels from the policy's
thresholds, the order inside a level, the Gittins index of an empirical distribution, and Tiresias'
key left as it was. Expected results are computed by hand in the comments."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from sim_helpers import cluster, policy, run, two_type_perf

from scheduler.policy.queue_sort import QueuePriority, ServiceHistory, gittins_on_grid
from scheduler.policy.registry import LAS_THRESHOLDS_GPU_S, OURS_LAS_THRESHOLDS_GPU_S, Policy, make_policy
from scheduler.sim.engine import SimConfig, Simulator
from scheduler.sim.trace import TraceJob


def _las(thresholds: tuple[float, ...], inner: str = "fifo") -> Policy:
    return replace(policy("las", preemptive=True), las_thresholds=thresholds, las_inner=inner)


def test_tiresias_keeps_its_two_levels_and_fifo_key() -> None:
    tiresias = make_policy("tiresias")
    assert tiresias.las_thresholds == LAS_THRESHOLDS_GPU_S == (3600.0, 36000.0)
    assert tiresias.las_inner == "fifo"
    # (level, submit, idx), as before the priority module: 5,000 GPU-s is past the 1 GPU-h threshold.
    assert QueuePriority(LAS_THRESHOLDS_GPU_S, "fifo").key(5000.0, "vc", 1, 7.0, 3) == (1.0, 7.0, 3)
    ours = make_policy("ours")
    assert ours.las_thresholds == OURS_LAS_THRESHOLDS_GPU_S and ours.las_inner == "gittins"


def test_a_job_crossing_a_higher_level_is_preempted_for_one_waiting_below() -> None:
    # One GPU, rounds every 360 s, no restart cost. x (5,000 s) runs from 0; y (2,000 s) arrives at 10.
    # Round 360: x has 360 GPU-s >= 100 (level 1), y (level 0) preempts it. x waits in level 1.
    # Two levels (100, 1,000): round 1,440: y has 1,080 >= 1,000 (level 2) and is preempted for x;
    # at 2,160 x has 1,080 too (level 2, like y): no more preemption. x: 1,440 + 4,640 = 6,080;
    # y: 6,080 + (2,000 - 1,080) = 7,000. One level (100): y runs 360..2,360, then x to 7,000.
    jobs = [TraceJob("x", 0.0, 5000.0, 1, family="LM"), TraceJob("y", 10.0, 2000.0, 1, family="LM")]
    perf = two_type_perf(0.5, 0.5)
    two = run(jobs, cluster(), _las((100.0, 1000.0)), perf, round_s=360.0, preempt_penalty_s=0.0)
    assert two.finish.tolist() == pytest.approx([6080.0, 7000.0])
    assert two.preemptions == 2
    one = run(jobs, cluster(), _las((100.0,)), perf, round_s=360.0, preempt_penalty_s=0.0)
    assert one.finish.tolist() == pytest.approx([7000.0, 2360.0])
    assert one.preemptions == 1


def test_inside_a_level_least_attained_service_starts_first() -> None:
    # One GPU, threshold 100 GPU-s, rounds every 360 s, no restart cost. x (10,000 s) runs from 0;
    # y (10,000 s) arrives at 500 and preempts x at round 720 (x: 720 GPU-s, level 1); z (50 s)
    # arrives at 900 and preempts y at round 1,080 (y: 360 GPU-s, level 1); z ends at 1,130.
    # Waiting then, both in level 1: x (submitted first, 720 GPU-s) and y (360 GPU-s).
    # FIFO: x to 1,130 + 9,280 = 10,410, then y to 20,050. Least attained first: y to
    # 1,130 + 9,640 = 10,770, then x to 20,050. (Same level: neither preempts the other.)
    jobs = [
        TraceJob("x", 0.0, 10000.0, 1, family="LM"),
        TraceJob("y", 500.0, 10000.0, 1, family="LM"),
        TraceJob("z", 900.0, 50.0, 1, family="LM"),
    ]
    perf = two_type_perf(0.5, 0.5)
    fifo = run(jobs, cluster(), _las((100.0,)), perf, round_s=360.0, preempt_penalty_s=0.0)
    assert fifo.finish.tolist() == pytest.approx([10410.0, 20050.0, 1130.0])
    least = run(jobs, cluster(), _las((100.0,), "attained"), perf, round_s=360.0, preempt_penalty_s=0.0)
    assert least.finish.tolist() == pytest.approx([20050.0, 10770.0, 1130.0])
    assert fifo.preemptions == least.preemptions == 2


def test_gittins_index_of_an_empirical_distribution() -> None:
    # Completed services 1 and 3. At a = 0: stop at 1 -> P = 1/2 for E[min(S, 1)] = 1 (0.5); stop at
    # 3 -> P = 1 for E[S] = 2 (0.5): index 0.5. At a = 2 only the 3 is left: 1 more buys P = 1 (1.0).
    # At a = 3 nothing completed took longer: 0 (lowest priority).
    assert gittins_on_grid(np.array([3.0, 1.0]), np.array([0.0, 2.0, 3.0])).tolist() == pytest.approx(
        [0.5, 1.0, 0.0]
    )


def test_gittins_order_uses_completed_jobs_only_and_falls_back_to_attained() -> None:
    prio = QueuePriority((3600.0,), "gittins")
    prio.history = ServiceHistory(min_samples=2)
    # No completed job yet: least attained first inside the level.
    assert prio.key(100.0, "vc", 1, 5.0, 0) == (0.0, 100.0, 5.0, 0)
    prio.completed("vc", 1, 60.0)
    prio.completed("vc", 1, 180.0)
    # Services 60 and 180 at a = 0 (grid point 0): stop at 60 -> 1/2 per 60 s; stop at 180 -> 1 per
    # mean 120 s: index 1/120. The class ("vc", 1) has its 2 samples; key = (level, -index, ...).
    assert prio.key(0.0, "vc", 1, 5.0, 0) == pytest.approx((0.0, -1 / 120, 5.0, 0))
    # Another class falls back to all completed jobs (the same two here).
    assert prio.key(0.0, "other", 2, 5.0, 1) == pytest.approx((0.0, -1 / 120, 5.0, 1))
    with pytest.raises(ValueError):
        QueuePriority((3600.0,), "random")


def test_the_history_learns_each_finished_jobs_attained_service() -> None:
    # Two 1-GPU jobs on two GPUs, alone at rate 1: attained service = duration (100 and 300 GPU-s),
    # recorded under their class (group "", 1 GPU) and overall, in completion order.
    jobs = [TraceJob("a", 0.0, 300.0, 1, family="LM"), TraceJob("b", 0.0, 100.0, 1, family="LM")]
    sim = Simulator(
        jobs, cluster(gpus=2), _las((3600.0,), "gittins"), two_type_perf(0.5, 0.5), SimConfig(cycle_s=0.0)
    )
    sim.run()
    assert sim.priority.history.samples == {("", 1): [100.0, 300.0], None: [100.0, 300.0]}
