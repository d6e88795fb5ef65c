"""Offer pruning of the engine: jobs that cannot fit are kept out of schedule() calls, without
changing what is placed (hand-computed finishes and call counts)."""

from __future__ import annotations

import pytest
from sim_helpers import cluster, policy, run, two_type_perf

from scheduler.model import GPU_MILLI
from scheduler.sim.engine import SimConfig, Simulator
from scheduler.sim.offer import _FitCheck
from scheduler.sim.trace import TraceJob


def test_a_job_left_without_room_by_earlier_offers_waits_for_the_next_call() -> None:
    # Two nodes of 4 GPUs, FIFO, whole GPUs. a (3 GPUs, 100 s), b (3 GPUs, 200 s), c (2 GPUs, 100 s)
    # arrive at 0. All three fit the empty cluster and the 8 free GPUs, but after a and b take 3 GPUs
    # of each node no node has 2 idle: c is held back (not refused), and the next call's fit check
    # keeps it out. a ends at 100 and c runs 100-200: two calls, one hold-back.
    jobs = [TraceJob("a", 0.0, 100.0, 3), TraceJob("b", 0.0, 200.0, 3), TraceJob("c", 0.0, 100.0, 2)]
    result = run(jobs, cluster(nodes=2, gpus=4), policy(), two_type_perf(0.8, 0.8))
    assert list(result.finish) == pytest.approx([100.0, 200.0, 200.0])
    assert result.schedule_calls == 2
    assert result.deferred_offers == 1


def test_jobs_that_cannot_fit_are_kept_out_of_calls_until_capacity_frees() -> None:
    # One node of 2 GPUs, FIFO, whole GPUs. a (1 GPU, 100 s) and b (1 GPU, 300 s) take both GPUs at 0;
    # c (2 GPUs) cannot fit while either runs, d (2 GPUs, at 50) neither: c runs 300-400, d 400-500.
    jobs = [
        TraceJob("a", 0.0, 100.0, 1),
        TraceJob("b", 0.0, 300.0, 1),
        TraceJob("c", 0.0, 100.0, 2),
        TraceJob("d", 50.0, 100.0, 2),
    ]
    result = run(jobs, cluster(gpus=2), policy(), two_type_perf(0.8, 0.8))
    assert list(result.finish) == pytest.approx([100.0, 300.0, 400.0, 500.0])
    # Calls at 0 (a, b), 300 (c) and 400 (d). At 50 (d arrives) and at 100 (a ends: one GPU idle, c
    # and d need two) the fit check keeps everyone out: no call.
    assert result.schedule_calls == 3


def test_a_shape_that_cannot_fit_does_not_use_up_the_scan_depth() -> None:
    # One node of 2 GPUs, FIFO, scan depth 2. a (1 GPU, 100 s) and b (1 GPU, 5 s) start at 0; x1-x3
    # (2 GPUs, 10 s each) arrive at 1 and y (1 GPU, 10 s) at 2. b ends at 5: x1 cannot fit (one idle
    # GPU), which retires the 2-GPU shape for the scan, so y (the next job looked at) backfills the
    # idle GPU: 5-15. a ends at 100; x1, x2, x3 run 100-110-120-130.
    jobs = [
        TraceJob("a", 0.0, 100.0, 1),
        TraceJob("b", 0.0, 5.0, 1),
        TraceJob("x1", 1.0, 10.0, 2),
        TraceJob("x2", 1.0, 10.0, 2),
        TraceJob("x3", 1.0, 10.0, 2),
        TraceJob("y", 2.0, 10.0, 1),
    ]
    result = run(jobs, cluster(gpus=2), policy(), two_type_perf(0.8, 0.8), scan_limit=2)
    assert list(result.finish) == pytest.approx([100.0, 5.0, 110.0, 120.0, 130.0, 15.0])


def test_the_fit_check_takes_a_shared_job_to_an_idle_gpu_only_when_one_has_its_memory() -> None:
    # One node of 2 GPUs (32 GiB each), half shares. GPU 0 is full; GPU 1 idle with its memory shown
    # 1 MiB short of what the shared job asks, then with exactly that: the fit check refuses, then
    # accepts (no GPU with residents has room, so only the idle GPU can take it).
    sim = Simulator(
        [TraceJob("s", 0.0, 10.0, 1)], cluster(gpus=2, memory_mib=32768), policy(share="half"),
        two_type_perf(0.8, 0.8), SimConfig(cycle_s=0.0),
    )  # fmt: skip
    sim.refused, sim.room_memo = {}, {}
    job = sim.jobs[0]
    assert job.shared and job.request is not None
    need = job.request.tasks[0].gpu_memory_mib
    sim.free_milli[:] = [0, GPU_MILLI]
    sim.free_mem[:] = [0, need - 1]
    assert not _FitCheck(sim)(job)
    sim.free_mem[1] = need
    assert _FitCheck(sim)(job)
