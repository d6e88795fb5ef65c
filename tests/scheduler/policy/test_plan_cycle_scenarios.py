"""Scenario tests for ``plan_cycle``: cluster + running jobs + queue -> placements, evictions,
migrations and reasons. Every scenario also checks the invariants of ``scenario.check_invariants``
(no GPU oversubscribed, preemptors only on what was idle or freed, protected jobs never evicted)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from scenario import Job, check_invariants, gpus_of, view

import scheduler.plugins.sim_interference as sim_interference
from scheduler.interference.predict import SetPrediction, SetQuery
from scheduler.model import Decision
from scheduler.policy import PolicyView, get_policy, plan_cycle


def plan(v: PolicyView, policy: str) -> Decision:
    decision = plan_cycle(v, get_policy(policy))
    check_invariants(v, decision)
    return decision


def evicted(decision: Decision) -> list[tuple[str, str, str]]:
    return [(e.job_id, e.rule, e.preemptor) for e in decision.evictions]


@pytest.mark.parametrize("policy", ["tiresias", "ours"])
def test_a_job_of_a_higher_las_level_is_evicted_for_a_new_job_which_gets_its_gpus(policy: str) -> None:
    # Both threshold sets start at 1 GPU-h: old has 2 GPU-h before this run and 2 GPUs x 1,000 s in
    # it (2.56 GPU-h, level 1), new none (level 0).
    old = Job("old", gpus=2, attained_h=2.0, started=9_000.0, on=[("n1", (0, 1))])
    v = view({"n1": 2}, running=[old], queue=[Job("new")])
    d = plan(v, policy)
    assert evicted(d) == [("old", "las", "new")]
    assert "level 0" in d.evictions[0].reason and "level 1" in d.evictions[0].reason
    # Placed in the same Decision on what the victim frees (the platform holds it until old stops).
    assert gpus_of(d.placements_for("new")) <= {("n1", 0), ("n1", 1)}
    assert d.positions == {}


def test_a_job_in_the_same_las_level_is_not_evicted_and_the_new_job_waits_first() -> None:
    # 0.2 GPU-h before this run, 2 GPUs x 1,000 s in it: 0.76 GPU-h, level 0 like the new job.
    old = Job("old", gpus=2, attained_h=0.2, started=9_000.0, on=[("n1", (0, 1))])
    d = plan(view({"n1": 2}, running=[old], queue=[Job("new")]), "tiresias")
    assert d.evictions == [] and d.placements == []
    assert d.positions == {"new": 1}
    assert "2D-LAS" in d.queue_order


@pytest.mark.parametrize("policy", ["k8s", "fifo", "sjf", "gandiva", "gpushare"])
def test_policies_without_las_preemption_never_evict_for_levels(policy: str) -> None:
    v = view(
        {"n1": 2}, running=[Job("old", gpus=2, attained_h=50.0, on=[("n1", (0, 1))])], queue=[Job("new")]
    )
    d = plan(v, policy)
    assert d.evictions == [] and d.migrations == []
    assert d.positions == {"new": 1}


@pytest.mark.parametrize("policy", ["tiresias", "ours", "fifo"])
def test_a_job_that_may_not_be_preempted_is_never_evicted_by_level_or_priority(policy: str) -> None:
    running = [Job("pinned", gpus=2, attained_h=50.0, preemptible=False, on=[("n1", (0, 1))])]
    v = view({"n1": 2}, running=running, queue=[Job("new", priority=10)])
    d = plan(v, policy)
    assert d.evictions == [] and d.placements == []
    assert d.positions == {"new": 1}


def test_the_minimum_run_time_is_honoured_then_the_job_may_be_evicted() -> None:
    # now = 10,000 s. Started at 2,000 with 9,000 s guaranteed: 8,000 s old, protected.
    young = Job("old", gpus=2, attained_h=5.0, started=2_000.0, min_runtime_s=9_000.0, on=[("n1", (0, 1))])
    d = plan(view({"n1": 2}, running=[young], queue=[Job("new")]), "tiresias")
    assert d.evictions == [] and d.positions == {"new": 1}
    # The same job with 7,000 s guaranteed is past it (8,000 s old): evicted.
    young.min_runtime_s = 7_000.0
    d = plan(view({"n1": 2}, running=[young], queue=[Job("new")]), "tiresias")
    assert evicted(d) == [("old", "las", "new")]


def test_a_gang_is_evicted_whole_and_frees_every_task() -> None:
    # gang: two tasks of two GPUs on n1 and n2 (20 GPU-h, level 2 of Tiresias). big needs the whole
    # of both nodes: one eviction names the gang, and big gets both of its nodes.
    gang = Job("gang", gpus=2, tasks=2, attained_h=20.0, on=[("n1", (0, 1)), ("n2", (0, 1))])
    v = view({"n1": 2, "n2": 2}, running=[gang], queue=[Job("big", gpus=2, tasks=2)])
    d = plan(v, "tiresias")
    assert evicted(d) == [("gang", "las", "big")]
    assert gpus_of(d.placements_for("big")) == {("n1", 0), ("n1", 1), ("n2", 0), ("n2", 1)}


def test_a_higher_priority_job_evicts_the_lowest_priority_one_with_rule_priority() -> None:
    # fifo has no LAS preemption: only priority decides. low0 (priority 0) goes, not mid (1).
    running = [Job("mid", priority=1, on=[("n1", (0,))]), Job("low0", priority=0, on=[("n1", (1,))])]
    v = view({"n1": 2}, running=running, queue=[Job("urgent", priority=5)])
    d = plan(v, "fifo")
    assert evicted(d) == [("low0", "priority", "urgent")]
    assert "priority 5" in d.evictions[0].reason
    assert gpus_of(d.placements_for("urgent")) == {("n1", 1)}


def test_priority_outranks_las_levels_under_ours() -> None:
    # vip has attained a lot (level 3) but a higher priority: it evicts the level-0 job; and a
    # level-0 job of lower priority does not evict the high-priority job of a higher level.
    running = [Job("fresh", attained_h=0.1, on=[("n1", (0,))])]
    d = plan(view({"n1": 1}, running=running, queue=[Job("vip", priority=2, attained_h=500.0)]), "ours")
    assert evicted(d) == [("fresh", "priority", "vip")]
    running = [Job("vip", priority=2, attained_h=500.0, on=[("n1", (0,))])]
    d = plan(view({"n1": 1}, running=running, queue=[Job("fresh", attained_h=0.1)]), "ours")
    assert d.evictions == [] and d.positions == {"fresh": 1}


def test_a_drain_moves_the_fewest_gpus_so_a_waiting_job_gets_a_whole_node() -> None:
    # 2 nodes x 4 GPUs, one 1-GPU job on each: 6 idle GPUs but no node with 4. w needs 4 on one
    # node: a is moved from n1 to n2, w takes n1.
    running = [Job("a", on=[("n1", (0,))], started=100.0), Job("b", on=[("n2", (0,))], started=200.0)]
    v = view({"n1": 4, "n2": 4}, running=running, queue=[Job("w", gpus=4)])
    d = plan(v, "ours")
    assert d.evictions == []
    assert [(m.job_id, m.rule, m.preemptor, m.from_nodes) for m in d.migrations] == [
        ("a", "drain", "w", ("n1",))
    ]
    assert gpus_of(d.placements_for("w")) == {("n1", i) for i in range(4)}
    assert {p.node for p in d.migrations[0].to} == {"n2"}
    assert "w" in d.migrations[0].reason


def test_a_drain_is_refused_when_the_moved_jobs_would_fit_nowhere() -> None:
    # 3 GPUs in use on each 4-GPU node: 2 idle GPUs, one per node. Freeing a node for w (2 GPUs)
    # means moving a 3-GPU job onto one idle GPU: refused, nothing moves, w waits.
    running = [Job("a", gpus=3, on=[("n1", (0, 1, 2))]), Job("b", gpus=3, on=[("n2", (0, 1, 2))])]
    v = view({"n1": 4, "n2": 4}, running=running, queue=[Job("w", gpus=2)])
    d = plan(v, "ours")
    assert d.migrations == [] and d.evictions == [] and d.placements == []
    assert d.positions == {"w": 1}


def test_a_drain_never_moves_a_job_that_may_not_be_preempted() -> None:
    running = [Job("a", preemptible=False, on=[("n1", (0,))]), Job("b", preemptible=False, on=[("n2", (0,))])]
    d = plan(view({"n1": 4, "n2": 4}, running=running, queue=[Job("w", gpus=4)]), "ours")
    assert d.migrations == [] and d.positions == {"w": 1}


@pytest.fixture
def slowdown_125(monkeypatch: pytest.MonkeyPatch) -> None:
    """The model's view: every job of a co-located set 1.25x slower (an input of the policy)."""

    def fake(model: object, queries: Sequence[SetQuery]) -> list[SetPrediction]:
        return [SetPrediction(np.full(len(q.profiles), 1.25), np.full(len(q.profiles), 1.25), 1.0, "model")
                for q in queries]  # fmt: skip

    monkeypatch.setattr(sim_interference, "predict_sets", fake)


def test_packing_is_refused_when_the_predicted_slowdown_exceeds_the_tolerance(slowdown_125: None) -> None:
    # One GPU, half of it held by a shared job. s allows sharing: offered as a half-GPU share, the
    # co-location is predicted 1.25x slower, beyond s's tolerance of 1.2: s waits, with the reason.
    running = [Job("r", milli=500, allow_sharing=True, on=[("n1", (0,))])]
    v = view({"n1": 1}, running=running, queue=[Job("s", allow_sharing=True, tolerance=1.2)])
    v.rounds = False
    d = plan(v, "ours")
    assert d.placements == [] and d.positions == {"s": 1}
    assert "slowdown" in d.unschedulable["s"] or "interference" in d.unschedulable["s"]


def test_packing_is_admitted_when_the_predicted_slowdown_is_within_the_tolerance(slowdown_125: None) -> None:
    running = [Job("r", milli=500, allow_sharing=True, on=[("n1", (0,))])]
    v = view({"n1": 1}, running=running, queue=[Job("s", allow_sharing=True, tolerance=1.5)])
    v.rounds = False
    d = plan(v, "ours")
    (p,) = d.placements_for("s")
    assert (p.node, p.gpu_indices, p.gpu_milli) == ("n1", (0,), 500)


def test_a_job_that_does_not_allow_sharing_is_never_packed(slowdown_125: None) -> None:
    running = [Job("r", milli=500, allow_sharing=True, on=[("n1", (0,))])]
    v = view({"n1": 1}, running=running, queue=[Job("s", allow_sharing=False, tolerance=5.0)])
    v.rounds = False
    d = plan(v, "ours")
    assert d.placements == [] and d.positions == {"s": 1}


def test_a_pair_measured_beyond_tolerance_is_unpacked_newest_first() -> None:
    # Measured 0.6 each: 0.6 x 1.5 < 1, so the newer tenant (y) is moved off the GPU.
    running = [
        Job("x", milli=500, allow_sharing=True, on=[("n1", (0,))], started=100.0, rate=0.6),
        Job("y", milli=500, allow_sharing=True, on=[("n1", (0,))], started=900.0, rate=0.6),
    ]
    d = plan(view({"n1": 1}, running=running, queue=[]), "ours")
    assert evicted(d) == [("y", "unpack", "y")]


def test_queue_positions_follow_priority_then_the_policy_order() -> None:
    queue = [
        Job("late", submitted=30.0),
        Job("early", submitted=10.0),
        Job("vip", priority=3, submitted=50.0),
    ]
    d = plan(view({"n1": 0}, running=[], queue=queue), "fifo")
    assert d.positions == {"vip": 1, "early": 2, "late": 3}
    assert d.queue_order.startswith("priority")
