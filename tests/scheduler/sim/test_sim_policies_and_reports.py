"""Policies: request shapes per sharing rule, the 'ours' profile, and report merging."""

from __future__ import annotations

import pytest

from scheduler.plugin_registry import REGISTRY
from scheduler.policy.packing import shared_request
from scheduler.policy.registry import POLICY_NAMES, make_policy, ours_profile
from scheduler.profiles import get_profile
from scheduler.sim.runner import mean_report, merge_reports


def test_half_sharing_gives_small_one_gpu_jobs_half_a_gpu_and_the_rest_whole_gpus() -> None:
    assert shared_request("half", 1, 3000, 16384) == (500, 3512)
    assert shared_request("half", 1, 8000, 16384) is None  # 8000 + 512 > 8192
    assert shared_request("half", 2, 1000, 16384) is None
    assert shared_request("none", 1, 1000, 16384) is None


def test_memory_sharing_asks_for_memory_with_a_proportional_compute_share() -> None:
    assert shared_request("memory", 1, 3584, 16384) == (250, 4096)
    assert shared_request("memory", 1, 16000, 16384) is None


def test_ours_is_the_default_profile_with_the_memoised_interference_plugin() -> None:
    ours = ours_profile()
    default = get_profile("default")
    swapped = {"sim_interference" if n == "interference_aware" else n for n in default.plugin_names()}
    assert swapped <= set(ours.plugin_names())
    assert "interference_aware" not in ours.plugin_names()
    assert "sim_interference" in ours.filters and "sim_interference" in ours.scores
    if "topology_aware" in REGISTRY:
        assert "topology_aware" in ours.scores
    policy = make_policy("ours")
    assert policy.order == "las" and policy.share == "half"
    assert policy.introspective and policy.unpack_rule == "tolerance"


def test_every_policy_name_builds_and_unknown_names_are_refused() -> None:
    for name in POLICY_NAMES:
        make_policy(name).profile.build()
    with pytest.raises(ValueError, match="unknown policy"):
        make_policy("drf")


def _report(trace: str, policies: dict[str, float]) -> dict:
    return {
        "trace": trace,
        "jobs": 10,
        "cluster": {"name": "c", "total_gpus": 8},
        "config": {"seed": 0},
        "policies": {
            name: {
                "jobs": 10, "avg_jct_s": jct, "median_jct_s": jct, "p95_jct_s": jct, "p99_jct_s": jct,
                "avg_queueing_s": 0.0, "makespan_s": 1.0, "gpu_alloc_util": 0.5, "useful_util": jct / 100,
                "gpu_alloc_util_contended": 0.5, "useful_util_contended": 0.5, "tolerance_violations": 0,
                "preemptions": 0, "jobs_per_s": 1.0, "jobs_per_cpu_s": 1.0, "description": "", "profile": "",
            }
            for name, jct in policies.items()
        },
    }  # fmt: skip


def test_reports_merge_by_policy_and_average_over_traces() -> None:
    merged = merge_reports([_report("t", {"k8s": 100.0}), _report("t", {"ours": 40.0})])
    assert merged["ratios_vs_k8s"]["ours"]["avg_jct"] == pytest.approx(0.4)
    with pytest.raises(ValueError, match="share trace"):
        merge_reports([_report("t", {"k8s": 1.0}), _report("u", {"ours": 1.0})])
    mean = mean_report(
        [_report("a", {"k8s": 100.0, "ours": 40.0}), _report("b", {"k8s": 300.0, "ours": 60.0})]
    )
    assert mean["policies"]["k8s"]["avg_jct_s"] == pytest.approx(200.0)
    assert mean["ratios_vs_k8s"]["ours"]["avg_jct"] == pytest.approx(50.0 / 200.0)
    assert len(mean["per_trace"]) == 2


def test_ours_is_compared_with_the_other_policy_of_lowest_average_jct() -> None:
    from scheduler.bench.simulate.report import vs_best_other

    def s(jct: float, util: float) -> dict[str, float]:
        return {"avg_jct_s": jct, "useful_util": util, "useful_util_contended": util}

    report = {"policies": {"k8s": s(100.0, 0.5), "tiresias": s(40.0, 0.4), "ours": s(30.0, 0.6)}}
    line = vs_best_other(report)
    assert line.startswith("ours / best other (tiresias): avg JCT 0.75, useful util 1.50")
    assert vs_best_other({"policies": {"k8s": s(1.0, 1.0)}}) == ""
