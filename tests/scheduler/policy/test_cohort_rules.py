"""The cohort's rules on their own: limits make jobs wait with the reason, nominal work first, idle
GPUs lent by weight and history within lending limits, reclaim evicts borrowed work only."""

from __future__ import annotations

import math

import pytest

from scheduler.model import JobRequest, TaskRequest
from scheduler.policy.cohort import (
    Candidate,
    NodeRoom,
    TeamQuota,
    admission_problem,
    gate,
    reclaim,
    reclaim_order,
)
from scheduler.policy.fair_share import decayed_gpu_hours, fair_share_factors
from scheduler.policy.priority_class import class_of, priority_value


def job(job_id: str, team: str, gpus: int = 1, user: str = "u") -> JobRequest:
    task = TaskRequest(task_id=f"{job_id}-0", cpu_milli=1000, memory_mib=1024, gpus=gpus)
    return JobRequest(job_id=job_id, tasks=[task], team=team, user=user)


def test_a_team_at_its_maximum_waits_with_the_gpus_it_uses() -> None:
    quota = TeamQuota(team="vision", name="Vision", max_milli=8000, used_milli=8000)

    assert admission_problem(quota, "ann", 1000) == "waiting for quota: team Vision uses 8 of 8 GPUs"


def test_the_per_user_cap_concurrent_jobs_and_budget_each_make_a_job_wait() -> None:
    capped = TeamQuota(team="t", per_user_milli=2000, user_used_milli={"ann": 2000})
    busy = TeamQuota(team="t", max_jobs=3, used_jobs=3)
    spent = TeamQuota(team="t", budget_gpu_h=100.0, budget_used_gpu_h=100.0)

    assert "ann uses 2 of 2 GPUs (per-user cap" in str(admission_problem(capped, "ann", 1000))
    assert admission_problem(capped, "bob", 1000) is None
    assert "runs 3 of 3 concurrent jobs" in str(admission_problem(busy, "ann", 1000))
    assert "budget of 100 GPU-h used" in str(admission_problem(spent, "ann", 1000))
    # A CPU-only job uses no GPU-hours: a spent budget does not hold it.
    assert admission_problem(spent, "ann", 0) is None


def test_the_gate_counts_jobs_it_lets_through_so_one_cycle_cannot_overshoot() -> None:
    quotas = {"a": TeamQuota(team="a", guaranteed_milli=4000, max_milli=4000, used_milli=2000)}
    queue = [job("1", "a"), job("2", "a"), job("3", "a")]

    result = gate(queue, quotas, capacity_milli=16000)

    assert [r.job_id for r in result.admitted] == ["1", "2"]
    assert result.waiting == {"3": "waiting for quota: team a uses 4 of 4 GPUs"}


def test_borrowing_takes_idle_capacity_up_to_the_maximum_and_is_marked() -> None:
    quotas = {
        "a": TeamQuota(team="a", guaranteed_milli=2000, max_milli=6000),
        "b": TeamQuota(team="b", guaranteed_milli=6000, max_milli=8000),
    }
    queue = [job(str(i), "a") for i in range(8)]

    result = gate(queue, quotas, capacity_milli=8000)

    assert [r.job_id for r in result.admitted] == ["0", "1", "2", "3", "4", "5"]
    assert result.borrowing == {"2", "3", "4", "5"}
    assert result.waiting["6"] == "waiting for quota: team a uses 6 of 6 GPUs"


def test_a_lending_limit_caps_what_others_borrow_of_the_unused_guarantee() -> None:
    quotas = {
        "a": TeamQuota(team="a", guaranteed_milli=0, max_milli=8000),
        "b": TeamQuota(team="b", guaranteed_milli=8000, max_milli=8000, lending_limit_milli=3000),
    }
    result = gate([job(str(i), "a") for i in range(5)], quotas, capacity_milli=8000)

    assert len(result.admitted) == 3
    assert "no idle GPUs may be lent" in result.waiting["3"]


def test_a_lenders_own_waiting_work_is_not_lent_away() -> None:
    quotas = {
        "a": TeamQuota(team="a", guaranteed_milli=4000, max_milli=8000, used_milli=4000),
        "b": TeamQuota(team="b", guaranteed_milli=4000, max_milli=8000, held_for_milli=3000),
    }
    result = gate([job("a1", "a"), job("a2", "a")], quotas, capacity_milli=8000)

    assert [r.job_id for r in result.admitted] == ["a1"]


def test_nominal_jobs_go_before_borrowers_whatever_the_policy_order() -> None:
    quotas = {
        "a": TeamQuota(team="a", guaranteed_milli=1000, max_milli=8000, used_milli=1000),
        "b": TeamQuota(team="b", guaranteed_milli=1000, max_milli=8000),
    }
    result = gate([job("borrow", "a"), job("nominal", "b")], quotas, capacity_milli=8000)

    assert [r.job_id for r in result.admitted] == ["nominal", "borrow"]
    assert result.borrowing == {"borrow"}


def test_idle_gpus_are_shared_by_guarantee_weight() -> None:
    quotas = {
        "a": TeamQuota(team="a", guaranteed_milli=2000, max_milli=100_000, used_milli=2000),
        "b": TeamQuota(team="b", guaranteed_milli=1000, max_milli=100_000, used_milli=1000),
    }
    queue = [job(f"a{i}", "a") for i in range(10)] + [job(f"b{i}", "b") for i in range(10)]

    result = gate(queue, quotas, capacity_milli=9000)

    # 6 idle GPUs split 2:1; beyond them the cluster is full, not protected: the rest go on to
    # placement (which says "no capacity") in the same fair-share order, uncounted.
    teams = [r.team for r in result.admitted][:6]
    assert (teams.count("a"), teams.count("b")) == (4, 2)
    assert len(result.admitted) == 20 and result.waiting == {}


def test_idle_gpus_favour_the_team_with_less_decayed_usage() -> None:
    usage = {"a": 300.0, "b": 100.0}
    factors = fair_share_factors(usage, {"a": 1000.0, "b": 1000.0})
    quotas = {
        t: TeamQuota(team=t, guaranteed_milli=1000, max_milli=100_000, used_milli=1000, fair_share=factors[t])
        for t in ("a", "b")
    }
    queue = [job(f"a{i}", "a") for i in range(10)] + [job(f"b{i}", "b") for i in range(10)]

    result = gate(queue, quotas, capacity_milli=8000)

    teams = [r.team for r in result.admitted][:6]  # the 6 idle GPUs
    # F(a) = 2^-(0.75/0.5) = 0.354, F(b) = 2^-(0.25/0.5) = 0.707: b's effective weight is twice a's.
    assert factors["a"] == pytest.approx(2**-1.5) and factors["b"] == pytest.approx(2**-0.5)
    assert (teams.count("a"), teams.count("b")) == (2, 4)


def test_decayed_usage_halves_every_half_life_and_is_exact_over_a_run() -> None:
    day = 86400.0
    # 1 GPU for one hour, seven days ago: half an hour's worth today (to within the hour's own decay).
    one_week = decayed_gpu_hours([(0.0, 3600.0, 1.0)], now=3600.0 + 7 * day, half_life_s=7 * day)
    k = math.log(2) / (7 * day)
    exact = (math.exp(-k * 7 * day) - math.exp(-k * (7 * day + 3600))) / k / 3600
    assert one_week == pytest.approx(exact) and one_week == pytest.approx(0.5, rel=5e-3)
    # Splitting a run in two changes nothing; no decay counts plain GPU-hours.
    split = decayed_gpu_hours([(0.0, 1800.0, 2.0), (1800.0, 3600.0, 2.0)], now=2 * day, half_life_s=day)
    assert split == pytest.approx(decayed_gpu_hours([(0.0, 3600.0, 2.0)], now=2 * day, half_life_s=day))
    assert decayed_gpu_hours([(0.0, 7200.0, 3.0)], now=9000.0, half_life_s=0) == pytest.approx(6.0)


def test_fair_share_factor_is_one_unused_and_a_half_at_exactly_the_share() -> None:
    factors = fair_share_factors({"a": 50.0, "b": 50.0, "c": 0.0}, {"a": 1.0, "b": 1.0, "c": 2.0})

    assert factors["a"] == pytest.approx(2**-2)  # half the usage on a quarter of the weight
    assert factors["c"] == 1.0
    assert fair_share_factors({}, {"a": 1.0}) == {"a": 1.0}


def quota(team: str, guaranteed: int, used: int) -> TeamQuota:
    return TeamQuota(team=team, guaranteed_milli=guaranteed, max_milli=100_000, used_milli=used)


def test_reclaim_evicts_the_lowest_priority_then_least_attained_borrowed_work() -> None:
    quotas = {"lender": quota("lender", 4000, 0), "borrower": quota("borrower", 0, 4000)}
    cands = [
        Candidate("old-big", "borrower", 1000, 0, attained_gpu_s=9000.0, started_at=1.0),
        Candidate("young", "borrower", 1000, 0, attained_gpu_s=10.0, started_at=5.0),
        Candidate("low", "borrower", 1000, -100, attained_gpu_s=99999.0, started_at=2.0),
        Candidate("mid", "borrower", 1000, 0, attained_gpu_s=500.0, started_at=3.0),
    ]
    assert [c.job_id for c in reclaim_order(cands)] == ["low", "young", "mid", "old-big"]

    node = NodeRoom(idle=0, held=[["old-big"], ["young"], ["low"], ["mid"]])

    chosen = reclaim([job("w", "lender", gpus=2)], cands, quotas, nodes=[node])

    assert chosen == [("low", "w"), ("young", "w")]


def test_reclaim_stops_once_the_borrower_is_back_within_its_guarantee() -> None:
    quotas = {"lender": quota("lender", 4000, 0), "borrower": quota("borrower", 2000, 3000)}
    cands = [Candidate(str(i), "borrower", 1000, 0, 0.0, float(i)) for i in range(3)]
    node = NodeRoom(idle=0, held=[["0"], ["1"], ["2"]])

    chosen = reclaim([job("w", "lender", gpus=2)], cands, quotas, nodes=[node])

    assert chosen == []  # only 1 GPU is borrowed: evicting it would not make room for 2


def test_reclaim_never_evicts_for_a_job_that_fits_or_from_its_own_team() -> None:
    quotas = {"a": quota("a", 1000, 3000), "b": quota("b", 4000, 0)}
    cands = [Candidate("a1", "a", 1000, 0, 0.0, 0.0)]

    assert reclaim([job("b1", "b")], cands, quotas, nodes=[NodeRoom(idle=1, held=[["a1"]])]) == []
    assert reclaim([job("a2", "a")], cands, quotas, nodes=[NodeRoom(idle=0, held=[["a1"]])]) == []


def test_reclaim_frees_one_node_for_a_task_not_one_gpu_on_each_of_two() -> None:
    quotas = {"lender": quota("lender", 4000, 0), "borrower": quota("borrower", 0, 4000)}
    # n1 and n2 each hold an idle GPU and a borrower; n3 holds two borrowers that attained more.
    cands = [
        Candidate("n1-b", "borrower", 1000, 0, attained_gpu_s=10.0, started_at=0.0),
        Candidate("n2-b", "borrower", 1000, 0, attained_gpu_s=20.0, started_at=0.0),
        Candidate("n3-x", "borrower", 1000, 0, attained_gpu_s=500.0, started_at=0.0),
        Candidate("n3-y", "borrower", 1000, 0, attained_gpu_s=600.0, started_at=0.0),
    ]
    nodes = [
        NodeRoom(idle=1, held=[["n1-b"], ["own"]]),
        NodeRoom(idle=1, held=[["n2-b"], ["own2"]]),
        NodeRoom(idle=0, held=[["n3-x"], ["n3-y"]]),
    ]

    chosen = reclaim([job("w", "lender", gpus=2)], cands, quotas, nodes=nodes)

    # Two idle GPUs in the cluster, but on two nodes: one victim on n1 (the least attained) makes
    # the 2-GPU task fit there; two on n3 would also, but are more victims.
    assert chosen == [("n1-b", "w")]


def test_reclaim_skips_a_node_whose_other_tenants_it_may_not_evict() -> None:
    quotas = {"lender": quota("lender", 4000, 0), "borrower": quota("borrower", 0, 4000)}
    cands = [
        Candidate(v, "borrower", 1000, 0, attained_gpu_s=a, started_at=0.0)
        for v, a in [("p", 1.0), ("q", 9.0)]
    ]
    # n1's second GPU holds a nominal job (not a candidate): freeing p there leaves 1 GPU.
    nodes = [NodeRoom(idle=0, held=[["p"], ["nominal"]]), NodeRoom(idle=1, held=[["q"]])]

    assert reclaim([job("w", "lender", gpus=2)], cands, quotas, nodes=nodes) == [("q", "w")]


def test_priority_classes_are_bands_of_the_integer_priority() -> None:
    assert [class_of(p) for p in (-5, 0, 99, 100, 499, 500, 1000)] == [
        "low", "normal", "normal", "high", "high", "urgent", "urgent",
    ]  # fmt: skip
    assert priority_value("High") == 100 and priority_value(7) == 7
    with pytest.raises(ValueError, match="unknown priority class"):
        priority_value("asap")
