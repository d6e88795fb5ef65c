"""The simulator's rounds and the platform's ``plan_cycle`` choose the same evictions and migrations
from the same state: at every round of a tiny trace, the simulator's state is also built into the
``PolicyView`` the platform would build, ``plan_cycle`` plans it, and both answers are compared with
each other and with the hand-derived choice (so a rule changed on one side, or on both, fails)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from sim_helpers import FIRST_FIT, cluster, two_type_perf

from scheduler.model import ClusterSnapshot, Decision, JobRequest
from scheduler.policy import Policy, PolicyView, RunningJob, get_policy, plan_cycle
from scheduler.policy.registry import OURS_LAS_THRESHOLDS_GPU_S
from scheduler.policy.round import RoundOutcome
from scheduler.sim.cluster import ClusterSpec
from scheduler.sim.engine import RUNNING, SimConfig, Simulator
from scheduler.sim.trace import TraceJob

Row = tuple[str, str, str, str]


class Probe(Simulator):
    """A simulator that, at each round, also asks ``plan_cycle`` about the same state."""

    rounds: list[tuple[float, Decision, RoundOutcome]]

    def _round(self, now: float) -> bool:
        decision = plan_cycle(platform_view(self, now), self.policy)
        acted = super()._round(now)
        assert self.last_round is not None
        self.rounds.append((now, decision, self.last_round))
        return acted


def _request(sim: Simulator, idx: int) -> JobRequest:
    job = sim.jobs[idx]
    assert job.request is not None
    # The platform's request carries the service of earlier runs and the job's class.
    return replace(job.request, attained_gpu_s=job.attained, group=job.trace.group)


def platform_view(sim: Simulator, now: float) -> PolicyView:
    running = [
        RunningJob(
            request=_request(sim, j.idx), placements=list(j.placements), started_at=j.started_at, rate=j.rate
        )
        for j in sim.jobs
        if j.state == RUNNING
    ]
    waiting = [idx for bucket in sim.buckets.values() for _, idx in bucket]
    snapshot = ClusterSnapshot(nodes=sim.nodes, running=[p for r in running for p in r.placements], now=now)
    return PolicyView(
        snapshot=snapshot.copy(),
        queue=[_request(sim, i) for i in waiting],
        running=running,
        now=now,
        history=sim.priority.history,
    )


def sim_rows(sim: Simulator, outcome: RoundOutcome) -> tuple[list[Row], list[tuple[str, str]]]:
    name = [j.trace.job_id for j in sim.jobs]
    evictions = [(name[e.job], e.rule, name[e.preemptor], e.reason) for e in outcome.evictions]
    migrations = [(name[m], name[outcome.drain_target]) for m in outcome.migrated]
    return evictions, migrations


def plan_rows(decision: Decision) -> tuple[list[Row], list[tuple[str, str]]]:
    evictions = [(e.job_id, e.rule, e.preemptor, e.reason) for e in decision.evictions]
    return evictions, [(m.job_id, m.preemptor) for m in decision.migrations]


def rounds_of(
    jobs: list[TraceJob], spec: ClusterSpec, pol: Policy, until: float
) -> list[tuple[float, Any, Any]]:
    """(time, the simulator's rows, plan_cycle's rows) of every round up to ``until``."""
    sim = Probe(jobs, spec, pol, two_type_perf(0.5, 0.8), SimConfig(cycle_s=0.0, round_s=360.0))
    sim.rounds = []
    sim.run()
    return [(t, sim_rows(sim, out), plan_rows(d)) for t, d, out in sim.rounds if t <= until]


def acting(rounds: list[tuple[float, Any, Any]]) -> list[tuple[float, Any]]:
    for t, ours, platform in rounds:
        assert ours == platform, f"the simulator and plan_cycle disagree at t={t}"
    return [(t, ours) for t, ours, _ in rounds if ours != ([], [])]


@pytest.mark.parametrize("name", ["tiresias", "ours"])
def test_las_preemption_evicts_the_same_job_in_both(name: str) -> None:
    # One node of 4 GPUs. a and b (2 GPUs each) start at 0; c (2 GPUs) arrives at 2,000. Round 2,160:
    # a and b have 4,320 GPU-s (level 1, over 1 GPU-h), c has none (level 0) and needs 2 GPUs. They
    # started together, so the later submitted (b) goes first.
    jobs = [
        TraceJob("a", 0.0, 20000.0, 2, family="LM"),
        TraceJob("b", 0.0, 20000.0, 2, family="LM"),
        TraceJob("c", 2000.0, 1000.0, 2, family="LM"),
    ]
    got = acting(rounds_of(jobs, cluster(nodes=1, gpus=4), get_policy(name), until=2160.0))
    why = "las: waiting job c at level 0 outranks level 1 (1.20 GPU-h attained)"
    assert got == [(2160.0, ([("b", "las", "c", why)], []))]


def _packing(**rules: Any) -> Policy:
    # First fit puts both halves on GPU 0 even when GPU 1 is idle.
    return Policy(
        name="t-pack", order="las", share="half", profile=FIRST_FIT,
        las_thresholds=OURS_LAS_THRESHOLDS_GPU_S, **rules,
    )  # fmt: skip


def test_a_pair_measured_beyond_tolerance_is_unpacked_the_same_in_both() -> None:
    # a (ResNet-18) and b (LM) share GPU 0 at rates 0.5 and 0.8: 0.5 x 1.5 < 1, so the newest (b,
    # submitted later at the same start) is moved off at the first round.
    jobs = [TraceJob("a", 0.0, 5000.0, 1, family="ResNet-18"), TraceJob("b", 0.0, 5000.0, 1, family="LM")]
    pol = _packing(introspective=True, unpack_rule="tolerance")
    got = acting(rounds_of(jobs, cluster(nodes=1, gpus=1), pol, until=360.0))
    why = "unpack: GPU 0 of g0-n0000 measured a at 0.50, b at 0.80 (rule tolerance)"
    assert got == [(360.0, ([("b", "unpack", "b", why)], []))]


def test_a_packed_job_restarts_alone_on_a_spare_gpu_the_same_in_both() -> None:
    # Both halves on GPU 0, GPU 1 idle and nobody waiting: one spare GPU, so the newest tenant (b)
    # restarts alone at the first round.
    jobs = [TraceJob("a", 0.0, 5000.0, 1, family="ResNet-18"), TraceJob("b", 0.0, 5000.0, 1, family="LM")]
    got = acting(rounds_of(jobs, cluster(nodes=1, gpus=2), _packing(unpack_on_idle=True), until=360.0))
    why = "unpack-idle: idle GPUs are left over, so it restarts alone"
    assert got == [(360.0, ([("b", "unpack-idle", "b", why)], []))]


def test_a_drain_moves_the_same_job_for_the_same_waiting_job_in_both() -> None:
    # Two nodes of 2 GPUs, first fit: a on n0 g0, b (100 s) on n0 g1, c on n1 g0. After b ends, d
    # (2 GPUs) arrives at 200 and fits no node; round 360 drains n0 by moving a (1 GPU, to n1 g1).
    jobs = [
        TraceJob("a", 0.0, 10000.0, 1, family="LM"),
        TraceJob("b", 0.0, 100.0, 1, family="LM"),
        TraceJob("c", 0.0, 10000.0, 1, family="LM"),
        TraceJob("d", 200.0, 1000.0, 2, family="LM"),
    ]
    pol = replace(get_policy("fifo"), profile=FIRST_FIT, defragment=True)
    got = acting(rounds_of(jobs, cluster(nodes=2, gpus=2), pol, until=360.0))
    assert got == [(360.0, ([], [("a", "d")]))]
