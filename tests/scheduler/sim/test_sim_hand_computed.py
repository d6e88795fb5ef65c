"""Tiny traces whose job completion times are computed by hand."""

from __future__ import annotations

import pytest
from sim_helpers import cluster, policy, run, two_type_perf

from scheduler.sim.perf import comm_rate
from scheduler.sim.trace import TraceJob


def test_two_whole_gpu_jobs_on_one_gpu_run_one_after_the_other() -> None:
    jobs = [TraceJob("a", 0.0, 100.0, 1, family="ResNet-18"), TraceJob("b", 10.0, 50.0, 1, family="LM")]
    result = run(jobs, cluster(), policy("fifo"), two_type_perf(0.5, 0.8))
    # a: 0..100; b waits until 100, runs 50 s.
    assert list(result.finish - result.submit) == pytest.approx([100.0, 140.0])
    assert list(result.first_start) == pytest.approx([0.0, 100.0])


def test_sjf_runs_the_shorter_waiting_job_first() -> None:
    jobs = [
        TraceJob("long", 0.0, 100.0, 1, family="ResNet-18"),
        TraceJob("b", 1.0, 80.0, 1, family="LM"),
        TraceJob("c", 2.0, 10.0, 1, family="LM"),
    ]
    result = run(jobs, cluster(), policy("sjf"), two_type_perf(0.5, 0.8))
    # long 0..100, then c (10 s) 100..110, then b 110..190.
    assert list(result.finish) == pytest.approx([100.0, 190.0, 110.0])


def test_two_jobs_sharing_one_gpu_slow_each_other_by_the_measured_pair() -> None:
    # y(A|B) = 0.5, y(B|A) = 0.8. Both start at 0 on halves of one GPU.
    # B needs 100 s of work at 0.8 -> done at 125. A did 125 * 0.5 = 62.5, runs alone at 1.0 for 37.5.
    jobs = [TraceJob("a", 0.0, 100.0, 1, family="ResNet-18"), TraceJob("b", 0.0, 100.0, 1, family="LM")]
    result = run(jobs, cluster(), policy("fifo", share="half"), two_type_perf(0.5, 0.8))
    assert list(result.finish) == pytest.approx([162.5, 125.0])
    # Useful throughput while shared is 0.5 + 0.8 = 1.3 GPUs on one GPU.
    assert result.useful.max() == pytest.approx(1.3)
    assert result.violations == 1  # A ran at 0.5 < 1/1.5


def test_a_job_too_big_to_share_takes_a_whole_gpu() -> None:
    # 4 GiB GPUs: half is 2 GiB, LM batch 20 needs 2.5 GiB + context, so both ask for whole GPUs.
    jobs = [TraceJob("a", 0.0, 100.0, 1, family="LM"), TraceJob("b", 0.0, 100.0, 1, family="LM")]
    result = run(jobs, cluster(memory_mib=4096), policy("fifo", share="half"), two_type_perf(0.5, 0.8))
    assert sorted(result.finish) == pytest.approx([100.0, 200.0])


def test_a_two_gpu_job_on_a_slower_link_than_the_best_pair_runs_at_the_comm_model_rate() -> None:
    # GPUs 0-1 are NVLinked, 2 hangs off the other socket. "a" holds GPU 0, so first fit gives "b"
    # GPUs 1 and 2 (SYS) while its trace duration is for the best pair (NV, no slowdown).
    spec = cluster(gpus=3, links={(0, 1): "NV", (0, 2): "SYS", (1, 2): "SYS"})
    jobs = [TraceJob("a", 0.0, 1000.0, 1, family="LM"), TraceJob("b", 0.0, 100.0, 2, family="LM")]
    result = run(jobs, spec, policy("fifo"), two_type_perf(0.5, 0.8))
    rate = comm_rate(0.30, "SYS")  # LM: c = 0.3, step = 0.7 + 0.3 * 24 / 10 = 1.42
    assert rate == pytest.approx(1 / 1.42)
    assert comm_rate(0.30, "NV") == 1.0
    assert result.finish[1] == pytest.approx(100.0 / rate)
    assert result.finish[0] == pytest.approx(1000.0)


def test_las_preempts_a_long_running_job_for_a_new_one_and_charges_the_restart() -> None:
    # Threshold 3600 GPU-s: at the 3600 s round "long" is in level 1, "new" (level 0) preempts it.
    jobs = [TraceJob("long", 0.0, 5000.0, 1, family="LM"), TraceJob("new", 100.0, 200.0, 1, family="LM")]
    result = run(
        jobs, cluster(), policy("las", preemptive=True), two_type_perf(0.5, 0.8),
        round_s=3600.0, preempt_penalty_s=30.0,
    )  # fmt: skip
    # new: 3600..3800. long: 3600 s done, then 1400 s + 30 s penalty from 3800 -> 5230.
    assert result.finish[1] == pytest.approx(3800.0)
    assert result.finish[0] == pytest.approx(5230.0)
    assert result.preemptions == 1
