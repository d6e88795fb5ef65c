"""Kueue-style scenarios over the shared policy (``plan_cycle`` with team quotas): borrowing when
others are idle, reclaim when the lender returns, a lending limit honoured, idle GPUs shared by
weight and decayed usage, a spent budget makes jobs wait and a grant lets them run, and priority
classes preempt only inside a team. Every scenario also keeps the invariants of ``scenario``, and
no team ends above its maximum."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduler.model import Decision
from scheduler.policy import PolicyView, plan_cycle
from scheduler.policy.cohort import TeamQuota, request_milli
from scheduler.policy.fair_share import fair_share_factors
from tests.scheduler.policy.scenario import Job, check_invariants, view

POLICY = "fifo"
NODES = {"n1": 4, "n2": 4}  # 8 GPUs: the cohort


def teams_view(
    running: list[tuple[Job, str, bool]],
    queue: list[tuple[Job, str]],
    quotas: dict[str, TeamQuota],
    *,
    nodes: dict[str, int] | None = None,
) -> PolicyView:
    """A scenario view whose jobs belong to teams; running jobs say whether they borrow. The quotas'
    ``used_milli`` is filled in from the running jobs."""
    v = view(nodes or NODES, [j for j, _, _ in running], [j for j, _ in queue])
    team_of = {j.id: t for j, t in [*[(j, t) for j, t, _ in running], *queue]}
    borrowed = {j.id for j, _, b in running if b}
    v.queue = [replace(r, team=team_of[r.job_id], user=f"user-{team_of[r.job_id]}") for r in v.queue]
    for r in v.running:
        r.request = replace(r.request, team=team_of[r.job_id], user=f"user-{team_of[r.job_id]}")
        r.borrowed = r.job_id in borrowed
    used = {t: 0 for t in quotas}
    jobs = {t: 0 for t in quotas}
    for r in v.running:
        used[r.request.team] += request_milli(r.request)
        jobs[r.request.team] += 1
    v.quotas = {t: replace(q, used_milli=used[t], used_jobs=jobs[t]) for t, q in quotas.items()}
    return v


def plan(v: PolicyView) -> Decision:
    decision = plan_cycle(v, POLICY)
    check_invariants(v, decision)
    assert v.quotas is not None
    held = {t: q.used_milli for t, q in v.quotas.items()}
    team_of = {r.job_id: r.team for r in v.queue} | {r.job_id: r.request.team for r in v.running}
    for e in decision.evictions:
        held[team_of[e.job_id]] -= request_milli(next(r.request for r in v.running if r.job_id == e.job_id))
    for r in v.queue:
        if decision.placements_for(r.job_id):
            held[r.team] += request_milli(r)
    for t, q in v.quotas.items():
        assert held[t] <= q.max_milli, f"team {t} above its maximum: {held[t]} > {q.max_milli}"
    return decision


def placed(decision: Decision) -> list[str]:
    return sorted({p.job_id for p in decision.placements})


def on(node: str, gpu: int) -> list[tuple[str, tuple[int, ...]]]:
    return [(node, (gpu,))]


def test_a_team_borrows_idle_gpus_beyond_its_guarantee_up_to_its_maximum() -> None:
    quotas = {
        "a": TeamQuota(team="a", guaranteed_milli=4000, max_milli=8000),
        "b": TeamQuota(team="b", guaranteed_milli=4000, max_milli=7000),
    }
    queue = [(Job(f"b{i}", submitted=float(i)), "b") for i in range(8)]

    decision = plan(teams_view([], queue, quotas))

    assert placed(decision) == [f"b{i}" for i in range(7)]  # a is idle: b borrows 3 of its 4
    assert decision.unschedulable["b7"] == "waiting for quota: team b uses 7 of 7 GPUs"
    assert decision.positions["b7"] == 1


def test_the_lender_returning_reclaims_borrowed_gpus_least_attained_first() -> None:
    quotas = {
        "a": TeamQuota(team="a", name="Vision", guaranteed_milli=4000, max_milli=8000),
        "b": TeamQuota(team="b", guaranteed_milli=4000, max_milli=8000),
    }
    running = [
        (
            Job(f"b{i}", on=on("n1" if i < 4 else "n2", i % 4), attained_h=float(10 - i), started=float(i)),
            "b",
            i >= 4,
        )
        for i in range(8)
    ]
    queue = [(Job("a0", gpus=2, submitted=100.0), "a")]

    decision = plan(teams_view(running, queue, quotas))

    # b7 and b6 attained least among b's borrowed jobs (b4..b7).
    assert [(e.job_id, e.rule, e.preemptor) for e in decision.evictions] == [
        ("b7", "reclaim", "a0"),
        ("b6", "reclaim", "a0"),
    ]
    assert decision.evictions[0].reason == "reclaimed by team Vision (under its guarantee)"
    assert placed(decision) == ["a0"]


def test_reclaim_frees_one_node_for_the_task_rather_than_counting_idle_gpus_cluster_wide() -> None:
    quotas = {
        "a": TeamQuota(team="a", guaranteed_milli=4000, max_milli=6000),
        "b": TeamQuota(team="b", guaranteed_milli=2000, max_milli=6000),
    }
    # 6 GPUs on three 2-GPU nodes; b holds 4 (2 borrowed), n1 and n2 have one idle GPU each.
    running = [
        (Job("b0", on=on("n1", 0), attained_h=1.0), "b", True),
        (Job("b1", on=on("n2", 0), attained_h=2.0), "b", True),
        (Job("b2", on=on("n3", 0), attained_h=5.0), "b", True),
        (Job("b3", on=on("n3", 1), attained_h=6.0), "b", True),
    ]
    queue = [(Job("a0", gpus=2, submitted=100.0), "a")]

    decision = plan(teams_view(running, queue, {**quotas}, nodes={"n1": 2, "n2": 2, "n3": 2}))

    # The 2 idle GPUs are on two nodes: a0 fits nowhere without evicting. One victim on n1 (the
    # least attained borrower, next to n1's idle GPU) makes it fit there; n3 would take two.
    assert [(e.job_id, e.rule, e.preemptor) for e in decision.evictions] == [("b0", "reclaim", "a0")]
    assert {(p.node, g) for p in decision.placements_for("a0") for g in p.gpu_indices} == {
        ("n1", 0),
        ("n1", 1),
    }


def test_the_reclaiming_job_gets_the_gpus_its_victims_free_before_earlier_jobs_in_the_queue() -> None:
    quotas = {
        "a": TeamQuota(team="a", guaranteed_milli=2000, max_milli=10000),
        "b": TeamQuota(team="b", guaranteed_milli=4000, max_milli=10000),
        "c": TeamQuota(team="c", guaranteed_milli=4000, max_milli=10000),
    }
    # b fills n1 (6 GPUs), 2 beyond its guarantee; c holds one GPU of each 2-GPU node.
    running = [(Job(f"b{i}", on=on("n1", i), attained_h=float(10 - i)), "b", i >= 4) for i in range(6)]
    running += [(Job("c0", on=on("n2", 0)), "c", False), (Job("c1", on=on("n3", 0)), "c", False)]
    # c9 comes first in the queue and fits on an idle GPU; a0 (2 GPUs) fits on no node.
    queue = [(Job("c9", submitted=10.0), "c"), (Job("a0", gpus=2, submitted=20.0), "a")]

    decision = plan(teams_view(running, queue, quotas, nodes={"n1": 6, "n2": 2, "n3": 2}))

    assert sorted(e.job_id for e in decision.evictions) == ["b4", "b5"]
    # Both placed in this cycle: a0 on what b4 and b5 free, c9 on an idle GPU elsewhere (in queue
    # order, the most-allocated scorer put c9 on n1, and a0 waited for more victims).
    assert placed(decision) == ["a0", "c9"]
    assert {(p.node, g) for p in decision.placements_for("a0") for g in p.gpu_indices} == {
        ("n1", 4),
        ("n1", 5),
    }
    assert {p.node for p in decision.placements_for("c9")} <= {"n2", "n3"}


def test_reclaim_takes_nothing_from_a_team_within_its_guarantee() -> None:
    quotas = {
        "a": TeamQuota(team="a", guaranteed_milli=4000, max_milli=8000),
        "b": TeamQuota(team="b", guaranteed_milli=4000, max_milli=8000),
    }
    running = [(Job(f"b{i}", on=on("n1", i)), "b", False) for i in range(4)]
    running += [(Job(f"a{i}", on=on("n2", i)), "a", True) for i in range(4)]  # a holds its own 4
    queue = [(Job("b9", submitted=50.0), "b")]

    decision = plan(teams_view(running, queue, quotas))

    assert decision.evictions == []
    assert "fewer than 1 free whole GPU" in decision.unschedulable["b9"]  # full, not protected


def test_reclaim_may_take_any_job_of_a_team_beyond_its_guarantee_not_only_those_marked_borrowed() -> None:
    quotas = {
        "a": TeamQuota(team="a", guaranteed_milli=6000, max_milli=8000),
        "b": TeamQuota(team="b", guaranteed_milli=2000, max_milli=8000),
    }
    # b holds all 8 GPUs, 6 beyond its guarantee. Its two oldest jobs were placed within its
    # guarantee (marked nominal) and sit one on each node, so no node holds only marked jobs.
    running = [
        (Job(f"b{i}", on=on("n1" if i % 2 == 0 else "n2", i // 2), attained_h=float(8 - i), started=float(i)),
         "b", i >= 2)
        for i in range(8)
    ]  # fmt: skip
    queue = [(Job("a0", gpus=4, submitted=100.0), "a")]  # one 4-GPU task: a whole node

    decision = plan(teams_view(running, queue, quotas))

    # The node of b's least attained jobs is emptied (b keeps 4 >= its guarantee of 2).
    victims = sorted(e.job_id for e in decision.evictions)
    assert victims == ["b1", "b3", "b5", "b7"]
    assert {e.rule for e in decision.evictions} == {"reclaim"}
    assert placed(decision) == ["a0"]
    assert {p.node for p in decision.placements_for("a0")} == {"n2"}


def test_reclaim_takes_the_jobs_marked_borrowed_before_the_teams_others() -> None:
    quotas = {
        "a": TeamQuota(team="a", guaranteed_milli=4000, max_milli=8000),
        "b": TeamQuota(team="b", guaranteed_milli=4000, max_milli=8000),
    }
    # b holds 6: b0..b3 within its guarantee (unmarked, least attained), b4 and b5 marked borrowed.
    running = [(Job(f"b{i}", on=on("n1", i), attained_h=float(i)), "b", False) for i in range(4)]
    running += [(Job(f"b{i}", on=on("n2", i - 4), attained_h=10.0 + i), "b", True) for i in (4, 5)]
    running += [(Job("a0", on=on("n2", 2)), "a", False), (Job("a1", on=on("n2", 3)), "a", False)]
    queue = [(Job("a9", submitted=50.0), "a")]

    decision = plan(teams_view(running, queue, quotas))

    # b0 attained least, but b4 is marked borrowed and makes room on its own.
    assert [(e.job_id, e.rule) for e in decision.evictions] == [("b4", "reclaim")]
    assert placed(decision) == ["a9"]


def test_a_lending_limit_keeps_part_of_the_idle_guarantee_for_its_team() -> None:
    quotas = {
        "a": TeamQuota(team="a", guaranteed_milli=4000, max_milli=8000, lending_limit_milli=1000),
        "b": TeamQuota(team="b", guaranteed_milli=4000, max_milli=8000),
    }
    queue = [(Job(f"b{i}", submitted=float(i)), "b") for i in range(8)]

    decision = plan(teams_view([], queue, quotas))

    assert placed(decision) == [f"b{i}" for i in range(5)]  # its 4 and 1 lent by a
    assert "no idle GPUs may be lent" in decision.unschedulable["b5"]


def test_idle_gpus_are_shared_by_guarantee_weight_and_decayed_usage() -> None:
    nodes = {"n1": 4, "n2": 4, "n3": 4}
    queue = [(Job(f"a{i}", submitted=float(i)), "a") for i in range(12)]
    queue += [(Job(f"b{i}", submitted=float(20 + i)), "b") for i in range(12)]
    by_weight = {
        "a": TeamQuota(team="a", guaranteed_milli=2000, max_milli=12000),
        "b": TeamQuota(team="b", guaranteed_milli=1000, max_milli=12000),
    }

    first = plan(teams_view([], queue, by_weight, nodes=nodes))

    got = placed(first)
    # 2 + 1 nominal, then 9 idle GPUs by weight 2:1 (effective shares (held + 1) / weight).
    assert (sum(j.startswith("a") for j in got), sum(j.startswith("b") for j in got)) == (8, 4)

    factors = fair_share_factors({"a": 900.0, "b": 100.0}, {"a": 2000.0, "b": 1000.0})
    with_history = {t: replace(q, fair_share=factors[t]) for t, q in by_weight.items()}

    second = plan(teams_view([], queue, with_history, nodes=nodes))

    got = placed(second)
    # a used 90 % of the recent GPU-hours on 2/3 of the weight: b now gets more of the idle GPUs.
    assert sum(j.startswith("b") for j in got) > 4
    assert len(got) == 12


def test_a_spent_budget_makes_jobs_wait_and_a_grant_lets_them_run() -> None:
    spent = {
        "a": TeamQuota(team="a", name="Vision", max_milli=8000, budget_gpu_h=100.0, budget_used_gpu_h=100.0)
    }
    queue = [(Job("a1"), "a"), (Job("cpu", gpus=0), "a")]

    waiting = plan(teams_view([], queue, spent))

    assert placed(waiting) == ["cpu"]  # a CPU-only job uses no GPU-hours
    assert (
        waiting.unschedulable["a1"]
        == "waiting for budget: budget of 100 GPU-h used (team Vision, this month)"
    )

    granted = {"a": replace(spent["a"], budget_gpu_h=150.0)}
    assert placed(plan(teams_view([], queue, granted))) == ["a1", "cpu"]


def test_a_higher_priority_class_preempts_a_lower_one_of_its_own_team_only() -> None:
    quotas = {
        "a": TeamQuota(team="a", guaranteed_milli=4000, max_milli=8000),
        "b": TeamQuota(team="b", guaranteed_milli=4000, max_milli=8000),
    }
    running = [(Job(f"a{i}", priority=-100, on=on("n1", i)), "a", False) for i in range(4)]
    running += [(Job(f"b{i}", priority=-100, on=on("n2", i), started=float(i)), "b", False) for i in range(4)]
    queue = [(Job("b-urgent", gpus=2, priority=500, submitted=100.0), "b")]

    decision = plan(teams_view(running, queue, quotas))

    assert {e.job_id for e in decision.evictions} <= {"b0", "b1", "b2", "b3"}
    assert len(decision.evictions) == 2 and all(e.rule == "priority" for e in decision.evictions)


@pytest.mark.parametrize("quotas", [None])
def test_without_quotas_the_policy_is_unchanged(quotas) -> None:
    v = view(NODES, [], [Job(f"j{i}", submitted=float(i)) for i in range(10)])
    v.quotas = quotas

    assert len(placed(plan_cycle(v, POLICY))) == 8
