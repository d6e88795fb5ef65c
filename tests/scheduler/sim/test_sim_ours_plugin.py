"""Ours' simulator pieces: the memoised interference plugin (pack rule, one prediction per set key)
and unpacking co-locations whose measured progress is below tolerance. Hand-computed JCTs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from sim_helpers import cluster, run, two_type_perf

import scheduler.sim.placement as placement
from scheduler.framework import Profile
from scheduler.interference.predict import SetPrediction, SetQuery
from scheduler.sim.policies import Policy
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


def test_pairs_predicted_productive_are_packed_and_each_set_key_is_predicted_once(
    predicted: list[int],
) -> None:
    # One node, two GPUs, ground truth y = 0.8 both ways. b packs next to a (throughput 1.6 > 1
    # beats an idle GPU's 1.0), c takes the other GPU, d packs next to c: same (B | A) key, memoised.
    jobs = [
        TraceJob("a", 0.0, 100.0, 1, family="ResNet-18"),
        TraceJob("b", 0.0, 100.0, 1, family="LM"),
        TraceJob("c", 0.0, 100.0, 1, family="ResNet-18"),
        TraceJob("d", 0.0, 100.0, 1, family="LM"),
    ]
    perf = two_type_perf(0.8, 0.8)
    result = run(jobs, cluster(gpus=2), _interference_policy(1.0), perf, seed=0)
    types = [perf.job_types[i].family for i in range(2)]
    assert types == ["ResNet-18", "LM"]
    assert list(result.finish) == pytest.approx([125.0] * 4)  # 100 s of work at 0.8
    assert sum(predicted) == 1


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
