"""Ours' caches across ``schedule()`` calls give the decisions of the uncached path: the slot-class
verdict memo of ``sim_interference`` (fed by the simulator's per-node slot classes), the working
node copies reused while a node is unchanged, and the incremental ``Simulator.slot_kinds``; a
cached class or kind follows its GPU when a tenant leaves."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from sim_helpers import cluster, two_type_perf

import scheduler.plugins.sim_interference as placement
from scheduler.framework import Profile
from scheduler.interference.predict import SetPrediction, SetQuery
from scheduler.model import GPU_MILLI
from scheduler.policy.registry import Policy
from scheduler.sim.engine import SimConfig, SimResult, Simulator, _Job
from scheduler.sim.trace import TraceJob


def _policy(idle_first: bool = True) -> Policy:
    profile = Profile(
        name="t-sim-interference-cache",
        filters=("resource_fit", "sim_interference"),
        scores={"sim_interference": 1.0},
        gpu_chooser="sim_interference",
        args={
            "sim_interference": {"use_model": False, "min_total_throughput": 1.0, "idle_first": idle_first}
        },
    )
    return Policy(name="t-ours-cache", order="las", share="half", profile=profile, preemptive=True)


@pytest.fixture
def by_types(monkeypatch: pytest.MonkeyPatch) -> None:
    """Predictions that depend on who shares: LM next to LM too slow (refused), the rest admitted
    at a throughput that depends on the mix (so GPU choice and scores differ between GPUs)."""

    def fake(model: object, queries: Sequence[SetQuery]) -> list[SetPrediction]:
        out = []
        for q in queries:
            lm = sum(1 for p in q.profiles if "LM" in str(p.get("job_key", p.get("job_type", ""))))
            s = np.full(len(q.profiles), 1.9 if lm >= 2 else 1.2 + 0.1 * lm)
            out.append(SetPrediction(s, s.copy(), 1.0, "model"))
        return out

    monkeypatch.setattr(placement, "predict_sets", fake)


def _jobs(n: int, seed: int) -> list[TraceJob]:
    rng = random.Random(seed)
    jobs = []
    t = 0.0
    for i in range(n):
        t += rng.expovariate(1 / 20.0)
        # 8 GPUs: two tasks on two nodes; placing the first and not the second rolls it back.
        gpus = 1 if rng.random() < 0.8 else rng.choice([2, 4, 8])
        jobs.append(TraceJob(f"j{i}", t, rng.uniform(50, 900), gpus, family=rng.choice(["ResNet-18", "LM"])))
    return jobs


def _run(
    jobs: list[TraceJob], cached: bool, check_kinds: bool = False, idle_first: bool = True
) -> tuple[SimResult, Simulator]:
    """``cached``: the slot classes for ``sim_interference`` and the reused node copies, else
    neither (the per-node verdict path on fresh copies)."""
    sim = Simulator(
        jobs, cluster(nodes=3, gpus=4), _policy(idle_first), two_type_perf(0.7, 0.8), SimConfig(cycle_s=10.0)
    )
    sim.uses_interference = cached  # without it the plugin gets no slot classes: the per-node path
    if not cached:
        offer = sim._offer

        def fresh(*args: object, **kwargs: object) -> bool:
            sim.node_clone = [None] * len(sim.nodes)
            return offer(*args, **kwargs)  # type: ignore[arg-type]

        sim._offer = fresh  # type: ignore[method-assign]
    if check_kinds:
        offer = sim._offer

        def checked(*args: object, **kwargs: object) -> bool:
            assert sim.slot_kinds() == _kinds_from_scratch(sim)
            assert list(sim.slot_kinds()) == list(_kinds_from_scratch(sim))  # same order too
            for node, clone in zip(sim.nodes, sim.node_clone, strict=True):
                if clone is not None:  # a kept working copy is the node as it is now
                    assert clone is not node
                    assert (clone.used_cpu_milli, clone.used_memory_mib) == (
                        node.used_cpu_milli,
                        node.used_memory_mib,
                    )
                    assert [(g.used_milli, g.used_memory_mib, g.tenants) for g in clone.gpus] == [
                        (g.used_milli, g.used_memory_mib, g.tenants) for g in node.gpus
                    ]
            return offer(*args, **kwargs)  # type: ignore[arg-type]

        sim._offer = checked  # type: ignore[method-assign]
    return sim.run(), sim


def _kinds_from_scratch(sim: Simulator) -> dict[tuple[object, ...], int]:
    out: dict[tuple[object, ...], int] = {}
    for gid in np.flatnonzero((sim.free_milli > 0) & (sim.free_milli < GPU_MILLI)).tolist():
        k = (
            sim.node_group[int(sim.gpu_node[gid])],
            tuple(sorted(sim.jobs[j].type_idx for j in sim.tenants[gid])),
            int(sim.free_milli[gid]),
            int(sim.free_mem[gid]),
        )
        out[k] = out.get(k, 0) + 1
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_slot_class_memo_and_reused_copies_give_the_decisions_of_the_uncached_path(
    by_types: None, seed: int
) -> None:
    jobs = _jobs(120, seed)
    slow, _ = _run(jobs, cached=False)
    fast, sim = _run(jobs, cached=True, check_kinds=True)
    # The run's own memo was used, with admitted and refused classes alike.
    classes = [t.classes for t in sim.memo._tables.values() if t.classes]
    assert classes and {ok for ok, _, _ in classes[0].values()} == {True, False}
    assert fast.placements == slow.placements > 0
    assert fast.preemptions == slow.preemptions
    assert fast.violations == slow.violations
    assert fast.unpacks_on_idle == slow.unpacks_on_idle
    np.testing.assert_array_equal(fast.first_start, slow.first_start)
    np.testing.assert_array_equal(fast.finish, slow.finish)
    np.testing.assert_array_equal(fast.useful, slow.useful)


def test_a_cached_slot_class_and_kind_follow_the_gpu_when_a_tenant_leaves(by_types: None) -> None:
    # a and b (both ResNet-18) share the one GPU, half each (the pair is predicted productive). When a
    # ends, the node's cached key and classes are dropped, and recomputed they name b alone; the
    # slot kind (resident types, free milli) moves with it; when b ends nothing is left.
    jobs = [
        TraceJob("a", 0.0, 100.0, 1, family="ResNet-18"),
        TraceJob("b", 0.0, 500.0, 1, family="ResNet-18"),
    ]
    sim = Simulator(
        jobs, cluster(nodes=1, gpus=1), _policy(), two_type_perf(0.7, 0.8), SimConfig(cycle_s=0.0)
    )
    a, b = sim.jobs
    seen: list[tuple[str, Any, Any, Any]] = []
    release = sim._release

    def spy(job: _Job, now: float) -> None:
        before = sim._verdict_key(0)
        sim.node_vkey[0], sim.node_classes[0] = before  # cached, as after an offer
        release(job, now)
        assert sim.node_vkey[0] is None and sim.node_classes[0] is None  # invalidated by the release
        seen.append((job.trace.job_id, before, sim._verdict_key(0), dict(sim.slot_kinds())))

    sim._release = spy  # type: ignore[method-assign]
    sim.run()
    assert [x[0] for x in seen] == ["a", "b"]
    _, two, one, kinds_one = seen[0]
    group = sim.node_group[0]
    assert two[1] == [-1]  # two halves: the GPU is full, no class (nobody fits)
    assert one[1] == [sim._slot_ids[(group, ((b.type_idx, b.shape),))]]
    assert [k[:3] for k in kinds_one] == [(group, (b.type_idx,), GPU_MILLI // 2)]
    _, _, none_left, kinds_none = seen[1]
    assert none_left[1] == [-1] and kinds_none == {}


def test_the_plugin_interns_a_row_changed_during_the_call_as_the_simulator_would(by_types: None) -> None:
    # A call that places a job next to a resident sees that row changed (free milli moved): its
    # slot classes come from the node's residents, interned in the simulator's table.
    jobs = [
        TraceJob("a", 0.0, 1000.0, 1, family="ResNet-18"),
        TraceJob("b", 0.0, 1000.0, 1, family="LM"),
    ]
    sim = Simulator(
        jobs, cluster(nodes=1, gpus=1), _policy(), two_type_perf(0.7, 0.8), SimConfig(cycle_s=0.0)
    )
    seen: list[np.ndarray] = []
    orig = placement.CachedInterference._row_classes

    def spy(self: placement.CachedInterference, state: object, sub: np.ndarray) -> np.ndarray:
        out = orig(self, state, sub)  # type: ignore[arg-type]
        seen.append(out.copy())
        return out

    placement.CachedInterference._row_classes = spy  # type: ignore[method-assign]
    try:
        sim.run()
    finally:
        placement.CachedInterference._row_classes = orig  # type: ignore[method-assign]
    a = sim.jobs[0]
    assert seen, "b met a's GPU within the call that placed a"
    assert int(seen[0][0, 0]) == sim._slot_ids[(sim.node_group[0], ((a.type_idx, a.shape),))]


@pytest.mark.parametrize(("seed", "idle_first"), [(0, True), (1, True), (0, False)])
def test_the_gpu_admission_from_the_slot_class_memo_equals_the_per_node_verdicts(
    by_types: None, seed: int, idle_first: bool
) -> None:
    # Every admission the slot-class path answers is compared, in place, with the real plugin's
    # per-node answer on the same row and cluster state (without ``idle_first`` a row's idle GPUs
    # meet the slot-class path too).
    orig = placement.CachedInterference._fast_admitted
    compared: list[np.ndarray] = []

    def spy(self: placement.CachedInterference, state: object, task: object, row: int) -> np.ndarray | None:
        got = orig(self, state, task, row)  # type: ignore[arg-type]
        if got is not None:
            slow = super(placement.CachedInterference, self).admitted_gpus_row(state, task, row)  # type: ignore[arg-type]
            assert slow is not None
            np.testing.assert_array_equal(got, slow)
            compared.append(got)
        return got

    placement.CachedInterference._fast_admitted = spy  # type: ignore[method-assign]
    try:
        _run(_jobs(120, seed), cached=True, idle_first=idle_first)
    finally:
        placement.CachedInterference._fast_admitted = orig  # type: ignore[method-assign]
    assert compared
    # Both a refused GPU and an admitted one (idle or busy) came up.
    assert any((~c).any() for c in compared) and any(c.any() for c in compared)


@pytest.mark.parametrize(("seed", "idle_first"), [(0, True), (1, True), (0, False)])
def test_the_filter_score_and_neutrality_read_from_one_row_view_equal_the_per_node_answers(
    by_types: None, seed: int, idle_first: bool
) -> None:
    # The filter, the neutrality check and the score of one placement share each row's view
    # (``CachedInterference._slot_view``, kept per task and row version for the call): every answer
    # they give is compared, in place, with the real plugin's per-node answer on the same rows.
    cached = placement.CachedInterference
    real = placement.InterferenceAware
    saved = {
        name: getattr(cached, name) for name in ("_admissible_rows", "score_rows", "is_neutral", "_slot_view")
    }
    compared = {"filter": 0, "score": 0, "neutral": 0}
    reused = []

    def admissible(self: Any, state: Any, cycle: Any, task: Any, rows: Any, cand: Any) -> np.ndarray:
        got = saved["_admissible_rows"](self, state, cycle, task, rows, cand)
        np.testing.assert_array_equal(got, real._admissible_rows(self, state, cycle, task, rows, cand))
        compared["filter"] += 1
        return got

    def score(self: Any, state: Any, task: Any, rows: Any) -> np.ndarray:
        got = saved["score_rows"](self, state, task, rows)
        if not self._idle_somewhere(state, task):
            np.testing.assert_array_equal(got, real.score_rows(self, state, task, rows))
            compared["score"] += 1
        return got

    def neutral(self: Any, state: Any, task: Any, rows: Any) -> bool:
        got = saved["is_neutral"](self, state, task, rows)
        if not self._idle_somewhere(state, task):
            assert got == real.is_neutral(self, state, task, rows)
            compared["neutral"] += 1
        return got

    def view(self: Any, state: Any, cycle: Any, task: Any, rows: Any, busy_given: Any = None) -> Any:
        memo = state.data.get("interference_slot_view", {})
        version = state.arrays.version
        reused.append(all((task.task_id, int(r), int(version[r])) in memo for r in rows.tolist()))
        return saved["_slot_view"](self, state, cycle, task, rows, busy_given)

    for name, fn in (("_admissible_rows", admissible), ("score_rows", score), ("is_neutral", neutral)):
        setattr(cached, name, fn)
    cached._slot_view = view  # type: ignore[method-assign]
    try:
        _run(_jobs(120, seed), cached=True, idle_first=idle_first)
    finally:
        for name, fn in saved.items():
            setattr(cached, name, fn)
    assert all(compared.values()), compared
    # Some answers came from views an earlier step of the same placement made.
    assert any(reused) and not all(reused)
