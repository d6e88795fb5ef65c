"""Ours' simulator pieces: the memoised interference plugin (pack rule, one prediction per set key)
and unpacking co-locations whose measured progress is below tolerance. Hand-computed JCTs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import pytest
from sim_helpers import cluster, run, two_type_perf

import scheduler.plugins.sim_interference as placement
from scheduler.framework import Profile
from scheduler.interference.predict import SetPrediction, SetQuery
from scheduler.policy.registry import Policy
from scheduler.sim.trace import TraceJob


def _interference_policy(min_total: float) -> Policy:
    profile = Profile(
        name="t-sim-interference",
        filters=("resource_fit", "sim_interference"),
        scores={"sim_interference": 1.0},
        gpu_chooser="sim_interference",
        args={"sim_interference": {"use_model": False, "min_total_throughput": min_total}},
    )
    return Policy(name="t-ours", order="fifo", share="half", profile=profile)


@pytest.fixture
def predicted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The scheduler's view: every job of a set predicted 1.25x slower (GPU throughput 1.6)."""
    calls: list[int] = []

    def fake(model: object, queries: Sequence[SetQuery]) -> list[SetPrediction]:
        calls.append(len(queries))
        out = []
        for q in queries:
            s = np.full(len(q.profiles), 1.25)
            out.append(SetPrediction(s, s.copy(), 1.0, "model"))
        return out

    monkeypatch.setattr(placement, "predict_sets", fake)
    return calls


def test_idle_gpus_come_first_and_pairs_are_packed_only_under_pressure_one_prediction_per_key(
    predicted: list[int],
) -> None:
    # One node, two GPUs, ground truth y = 0.8 across types. a and b take an idle GPU each without a
    # prediction (packing is predicted productive, 1.6 > 1, but an idle GPU comes first). c (LM) then
    # meets no idle GPU: (LM | ResNet-18) on GPU 0 and (LM | LM) on GPU 1 are predicted in one batch,
    # tie at 1.6, the first GPU wins. d (ResNet-18) has only GPU 1 left: (ResNet-18 | LM), one more.
    jobs = [
        TraceJob("a", 0.0, 100.0, 1, family="ResNet-18"),
        TraceJob("b", 0.0, 100.0, 1, family="LM"),
        TraceJob("c", 0.0, 100.0, 1, family="LM"),
        TraceJob("d", 0.0, 100.0, 1, family="ResNet-18"),
    ]
    perf = two_type_perf(0.8, 0.8)
    result = run(jobs, cluster(gpus=2), _interference_policy(1.0), perf, seed=0)
    types = [perf.job_types[i].family for i in range(2)]
    assert types == ["ResNet-18", "LM"]
    assert list(result.finish) == pytest.approx([125.0] * 4)  # 100 s of work at 0.8
    assert predicted == [2, 1]


def test_with_an_idle_gpu_each_job_runs_alone_and_nothing_is_predicted(predicted: list[int]) -> None:
    jobs = [TraceJob("a", 0.0, 100.0, 1, family="ResNet-18"), TraceJob("b", 0.0, 100.0, 1, family="LM")]
    result = run(jobs, cluster(gpus=2), _interference_policy(1.0), two_type_perf(0.8, 0.8))
    assert list(result.finish) == pytest.approx([100.0, 100.0])
    assert predicted == []


def test_a_packed_job_moves_to_a_gpu_that_became_idle(predicted: list[int]) -> None:
    # Two GPUs, FIFO, Gandiva's unpack rule (a pair measured at 0.6 + 0.6 >= 1 is kept). a (ResNet-18,
    # 100 s) and b (LM, 100 s) take the idle GPUs; c (ResNet-18, 100 s) packs next to a: y(A|A) = 0.6.
    # b finishes at 100 and leaves GPU 1 idle with nobody waiting; the round at 100 restarts c (the
    # newest of the pair; 60 s done, 40 left + 30 s restart) alone on GPU 1 -> 170; a runs alone from
    # 100 (60 s done) -> 140. Without migration both would finish at 100 / 0.6 = 166.7.
    jobs = [
        TraceJob("a", 0.0, 100.0, 1, family="ResNet-18"),
        TraceJob("b", 0.0, 100.0, 1, family="LM"),
        TraceJob("c", 0.0, 100.0, 1, family="ResNet-18"),
    ]
    perf = two_type_perf(0.8, 0.8)
    base = _interference_policy(1.0)
    kept = Policy(name="t-keep", order="fifo", share="half", profile=base.profile, introspective=True)
    moved = Policy(
        name="t-move",
        order="fifo",
        share="half",
        profile=base.profile,
        introspective=True,
        unpack_on_idle=True,
    )
    without = run(jobs, cluster(gpus=2), kept, perf, round_s=50.0, preempt_penalty_s=30.0)
    assert list(without.finish) == pytest.approx([100.0 / 0.6, 100.0, 100.0 / 0.6])
    assert without.preemptions == 0
    with_move = run(jobs, cluster(gpus=2), moved, perf, round_s=50.0, preempt_penalty_s=30.0)
    assert list(with_move.finish) == pytest.approx([140.0, 100.0, 170.0])
    assert with_move.preemptions == 1 and with_move.unpacks_on_idle == 1


def test_a_half_used_gpu_nobody_may_join_does_not_block_las_preemption(predicted: list[int]) -> None:
    # One GPU, 2D-LAS. a (ResNet-18, 10,000 s) runs alone on half of it; b (LM, 100 s) arrives at
    # 4,000 s and may not pack (predicted 1.6 < the required 1.8). Free milli-GPU (500) is not free
    # capacity for b: at the round at 4,320 s a has 4,320 GPU-s > 3,600 (level 1) and is preempted for
    # b (level 0): b runs 4,320-4,420; a restarts at 4,420 with 5,680 s + 30 s -> 10,130.
    jobs = [TraceJob("a", 0.0, 10_000.0, 1, family="ResNet-18"), TraceJob("b", 4000.0, 100.0, 1, family="LM")]
    base = _interference_policy(1.8)
    las = Policy(name="t-las", order="las", share="half", profile=base.profile, preemptive=True)
    result = run(jobs, cluster(), las, two_type_perf(0.8, 0.8), round_s=360.0, preempt_penalty_s=30.0)
    assert list(result.finish) == pytest.approx([10_130.0, 4420.0])
    assert result.preemptions == 1


def test_the_pack_rule_keeps_a_job_off_a_gpu_whose_predicted_throughput_is_too_low(
    predicted: list[int],
) -> None:
    # Same prediction (1.6) but packing must beat 1.8: b waits for the GPU instead.
    jobs = [TraceJob("a", 0.0, 100.0, 1, family="ResNet-18"), TraceJob("b", 0.0, 100.0, 1, family="LM")]
    result = run(jobs, cluster(), _interference_policy(1.8), two_type_perf(0.8, 0.8))
    assert list(result.finish) == pytest.approx([100.0, 200.0])


def _unpacking(rule: str) -> Policy:
    profile = Profile(name="t-gandiva", filters=("resource_fit",), scores={}, gpu_chooser="sim_gandiva_gpus")
    return Policy(
        name=f"t-{rule}", order="fifo", share="half", profile=profile, introspective=True, unpack_rule=rule
    )


def test_a_pair_measured_below_tolerance_is_unpacked_only_under_the_tolerance_rule() -> None:
    # y = 0.6 both ways: together 1.2 >= 1 (Gandiva keeps it) but 0.6 < 1/1.5 (too slow for each job).
    jobs = [TraceJob("a", 0.0, 100.0, 1, family="ResNet-18"), TraceJob("b", 0.0, 100.0, 1, family="LM")]
    perf = two_type_perf(0.6, 0.6)
    kept = run(jobs, cluster(), _unpacking("gandiva"), perf, round_s=50.0)
    assert kept.preemptions == 0
    assert list(kept.finish) == pytest.approx([100.0 / 0.6] * 2)
    # Round at 50 s: both did 30 s of work; b (newest) is unpacked and learns to avoid a's type.
    # a runs alone: 70 s more -> 120. b restarts at 120 with 70 s + 30 s restart penalty -> 220.
    unpacked = run(jobs, cluster(), _unpacking("tolerance"), perf, round_s=50.0, preempt_penalty_s=30.0)
    assert unpacked.preemptions == 1
    assert list(unpacked.finish) == pytest.approx([120.0, 220.0])


def test_a_refused_slot_kind_keeps_later_jobs_of_the_class_out_of_schedule_calls(
    predicted: list[int],
) -> None:
    # One GPU; pairs predicted at 1.6 < the required 1.8, so nobody packs. At 0 a (ResNet-18) takes the
    # GPU alone and b (LM) is refused next to it: one call. c (LM) arrives at 10: the only GPU with room
    # holds a ResNet-18, refused for LM jobs, so no call is made. a ends at 100: b runs alone (c is
    # refused next to b in the same call), b ends at 200, c runs 200-300: three calls in all.
    jobs = [
        TraceJob("a", 0.0, 100.0, 1, family="ResNet-18"),
        TraceJob("b", 0.0, 100.0, 1, family="LM"),
        TraceJob("c", 10.0, 100.0, 1, family="LM"),
    ]
    result = run(jobs, cluster(), _interference_policy(1.8), two_type_perf(0.8, 0.8))
    assert list(result.finish) == pytest.approx([100.0, 200.0, 300.0])
    assert result.schedule_calls == 3


def test_a_job_placed_earlier_in_the_same_call_is_predicted_with_its_own_profile(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # One GPU. a and b arrive together and are offered in one schedule() call (which runs without
    # annotations). a takes the idle GPU; b meets no idle GPU, so (b | a) is predicted. a was placed by
    # this very call: it must be known by its job type, not as an anonymous half-GPU resident.
    queries: list[SetQuery] = []

    def fake(model: object, batch: Sequence[SetQuery]) -> list[SetPrediction]:
        queries.extend(batch)
        return [
            SetPrediction(np.full(len(q.profiles), 1.25), np.full(len(q.profiles), 1.25), 1.0, "model")
            for q in batch
        ]

    monkeypatch.setattr(placement, "predict_sets", fake)
    jobs = [TraceJob("a", 0.0, 100.0, 1, family="ResNet-18"), TraceJob("b", 0.0, 100.0, 1, family="LM")]
    perf = two_type_perf(0.8, 0.8)
    # A GPU chooser other than the plugin's own (as ours' profile has: topology, then FGD).
    pol = _interference_policy(1.0)
    pol = Policy(
        name=pol.name, order="fifo", share="half", profile=replace(pol.profile, gpu_chooser="first_fit_gpus")
    )
    result = run(jobs, cluster(gpus=1), pol, perf)
    assert result.schedule_calls == 1
    assert len(queries) == 1
    newcomer, resident = queries[0].profiles
    assert newcomer["job_type"] == "LM (batch size 20)"
    assert resident["job_type"] == "ResNet-18 (batch size 32)"
    assert list(result.finish) == pytest.approx([125.0, 125.0])  # packed at y = 0.8 each
