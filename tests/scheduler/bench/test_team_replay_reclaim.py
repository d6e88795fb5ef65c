"""A hand-made team trace through the plan_cycle replay: a lender that returns gets its guarantee
back by reclaim within the grace period; without quotas it waits for the borrower to finish."""

from __future__ import annotations

import pytest

from scheduler.bench.fairness_metrics import reclaim_episodes
from scheduler.bench.team_sim import TeamSimConfig, TeamSimulator
from scheduler.sim.cluster import ClusterSpec, NodeGroup
from scheduler.sim.trace import TraceJob

SPEC = ClusterSpec(
    "four",
    "v100",
    [NodeGroup(count=1, gpus=4, gpu_model="T4", gpu_memory_mib=16384, cpu_cores=32, memory_gib=128)],
)
GUARANTEES = {"a": 2, "b": 2}


def trace() -> list[TraceJob]:
    # Team b fills the 4 GPUs at t=0 (2 on its guarantee, 2 borrowed from a); a asks for 2 at t=100.
    jobs = [TraceJob(f"b{i}", 0.0, 10_000.0, 1, team="b") for i in range(4)]
    return [*jobs, TraceJob("a0", 100.0, 500.0, 2, team="a")]


def replay(quotas: bool) -> TeamSimulator:
    sim = TeamSimulator(trace(), SPEC, "fifo", GUARANTEES, TeamSimConfig(quotas=quotas, grace_s=30.0))
    sim.run()
    return sim


def test_the_returning_lender_reclaims_two_borrowed_jobs_and_starts_after_the_grace() -> None:
    sim = replay(quotas=True)
    result = sim._result()
    a0 = sim.by_id["a0"]
    assert result.reclaims == 2
    assert a0.first_start == pytest.approx(130.0)  # cycle at 100, victims' grace 30 s
    assert a0.finish == pytest.approx(630.0)
    # Two of b's jobs ran 100 s, then resume when a0 ends, paying the 30 s restore.
    preempted = sorted(sim.by_id[f"b{i}"].finish for i in range(4))
    assert preempted == pytest.approx([10_000.0, 10_000.0, 630.0 + 9_900.0 + 30.0, 630.0 + 9_900.0 + 30.0])
    episodes = reclaim_episodes(result.samples, {t: g * 1000 for t, g in GUARANTEES.items()})
    assert [(e.team, e.start, e.seconds, e.closed) for e in episodes] == [("a", 100.0, 30.0, True)]


def test_without_quotas_the_lender_waits_for_the_borrower_to_finish() -> None:
    sim = replay(quotas=False)
    assert sim._result().reclaims == 0
    assert sim.by_id["a0"].first_start == pytest.approx(10_000.0)


def test_two_teams_each_asking_beyond_their_guarantee_on_an_idle_cluster_both_run() -> None:
    jobs = [TraceJob("a0", 0.0, 100.0, 3, team="a"), TraceJob("b0", 0.0, 100.0, 3, team="b")]
    sim = TeamSimulator(jobs, SPEC, "fifo", GUARANTEES, TeamSimConfig())
    sim.run()
    # Neither 3-GPU job fits a 2-GPU guarantee; the first borrows the other's idle guarantee.
    assert sorted(s.finish for s in sim.jobs) == pytest.approx([100.0, 200.0])
