"""Defragmentation by migration (``Policy.defragment``, ``Simulator._defragment``): a waiting
whole-GPU job that the idle GPUs hold by count but no node holds gets a node drained for it, when the
moved jobs fit elsewhere. Finish times are computed by hand in the comments."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sim_helpers import cluster, policy, run, two_type_perf

from scheduler.policy.registry import make_policy
from scheduler.sim.trace import TraceJob


def test_a_drained_node_starts_the_waiting_gang_job_and_the_moved_job_restarts_elsewhere() -> None:
    # Two nodes of 2 GPUs, first fit, FIFO, rounds every 360 s, 30 s restart cost. At 0: a (10,000 s)
    # on n0 g0, b (100 s) on n0 g1, c (10,000 s) on n1 g0. b ends at 100: one idle GPU per node.
    # d (2 GPUs, 1,000 s) arrives at 200 and fits no node. Round 360: n0 is drained by moving a
    # (1 GPU moved, to n1 g1); d runs on n0 from 360 to 1,360; a did 360 s and restarts: 360 + 9,640 +
    # 30 = 10,030. Without defragmenting, d waits for a and c to end at 10,000: 11,000.
    jobs = [
        TraceJob("a", 0.0, 10000.0, 1, family="LM"),
        TraceJob("b", 0.0, 100.0, 1, family="LM"),
        TraceJob("c", 0.0, 10000.0, 1, family="LM"),
        TraceJob("d", 200.0, 1000.0, 2, family="LM"),
    ]
    perf = two_type_perf(0.5, 0.5)
    spec = cluster(nodes=2, gpus=2)
    base = policy("fifo")
    moved = run(jobs, spec, replace(base, defragment=True), perf, round_s=360.0, preempt_penalty_s=30.0)
    assert moved.finish.tolist() == pytest.approx([10030.0, 100.0, 10000.0, 1360.0])
    assert moved.migrations == 1
    assert moved.preemptions == 0
    assert moved.placements == 5  # four starts and a's restart
    still = run(jobs, spec, base, perf, round_s=360.0, preempt_penalty_s=30.0)
    assert still.finish.tolist() == pytest.approx([10000.0, 100.0, 10000.0, 11000.0])
    assert still.migrations == 0


def test_no_node_is_drained_when_the_moved_jobs_fit_nowhere_else() -> None:
    # Two nodes of 4 GPUs, first fit. At 0: a (2 GPUs, 5,000 s) on n0 g0-1, b (2 GPUs, 100 s) on n0
    # g2-3, c (3 GPUs, 10,000 s) on n1 g0-2. b ends at 100: idle n0 2, n1 1. d (3 GPUs, 1,000 s)
    # arrives at 200: 3 idle GPUs, but no node has 3. Draining n0 means moving a (2 GPUs) to n1's one
    # idle GPU, draining n1 moving c (3) to n0's two: neither fits, so nothing moves and d starts when
    # a ends: 5,000 to 6,000.
    jobs = [
        TraceJob("a", 0.0, 5000.0, 2, family="LM"),
        TraceJob("b", 0.0, 100.0, 2, family="LM"),
        TraceJob("c", 0.0, 10000.0, 3, family="LM"),
        TraceJob("d", 200.0, 1000.0, 3, family="LM"),
    ]
    perf = two_type_perf(0.5, 0.5)
    res = run(jobs, cluster(nodes=2, gpus=4), replace(policy("fifo"), defragment=True), perf, round_s=360.0)
    assert res.migrations == 0
    assert res.finish.tolist() == pytest.approx([5000.0, 100.0, 10000.0, 6000.0])


def test_ours_defragments_and_the_baselines_do_not() -> None:
    assert make_policy("ours").defragment
    assert not any(
        make_policy(n).defragment for n in ("k8s", "fifo", "sjf", "tiresias", "gandiva", "gpushare")
    )
