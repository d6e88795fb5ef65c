"""``schedule()``'s options for batch callers (the simulator): ``explain=False``, ``annotate=False``
and ``arrays=``.

Both must leave every decision as the default call makes it: the scenarios of
``test_scheduling_scenarios`` are replayed with each option and compared placement by placement.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from sched_invariants import make_node, make_snapshot
from test_scheduling_scenarios import SCENARIOS, Scenario

from scheduler.engine.arrays import ClusterArrays
from scheduler.engine.schedule import schedule
from scheduler.model import Gpu, JobRequest, Node, Placement, TaskRequest
from scheduler.profiles import get_profile


def _placements(decision: object) -> list[tuple[str, str, tuple[int, ...]]]:
    return [(p.task_id, p.node, p.gpu_indices) for p in decision.placements]  # type: ignore[attr-defined]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_no_explanations_and_given_arrays_decide_the_same(scenario: Scenario) -> None:
    # make_snapshot reserves the running placements on the nodes: work on copies.
    snapshot = make_snapshot(copy.deepcopy(scenario.nodes), scenario.running)
    profile = get_profile(scenario.profile).build()
    want = schedule(snapshot, scenario.pending, profile, data=scenario.data)
    quiet = schedule(snapshot, scenario.pending, profile, data=scenario.data, explain=False)
    given = schedule(
        snapshot, scenario.pending, profile, data=scenario.data, arrays=ClusterArrays.from_snapshot(snapshot)
    )
    bare = schedule(snapshot, scenario.pending, profile, data=scenario.data, explain=False, annotate=False)
    for got in (quiet, given, bare):
        assert _placements(got) == _placements(want)
        assert set(got.unschedulable) == set(want.unschedulable)
    # Without annotations no plugin wrote a prediction (with them, shared placements carry one).
    assert all(p.predicted_slowdown is None and p.reason == "" for p in bare.placements)
    annotated = [p for p in quiet.placements if p.predicted_slowdown is not None]
    if scenario.profile == "default" and any(t.is_shared for j in scenario.pending for t in j.tasks):
        assert annotated
    assert given.unschedulable == want.unschedulable
    for job_id, reason in want.unschedulable.items():
        if reason.startswith("0/"):  # the per-node explanation: skipped, a generic reason instead
            assert quiet.unschedulable[job_id] == "no node fits"
        else:
            assert quiet.unschedulable[job_id] == reason


def _gpu_node(name: str, used: list[int], model: str = "T4", cpu_used: int = 0) -> Node:
    return Node(
        name=name,
        cpu_milli=32_000,
        memory_mib=128_000,
        used_cpu_milli=cpu_used,
        gpus=[Gpu(index=i, model=model, memory_mib=16_000, used_milli=u) for i, u in enumerate(used)],
    )


def test_take_equals_building_the_arrays_of_those_nodes() -> None:
    nodes = [
        _gpu_node("a", [0, 0, 0, 0, 0, 0, 0, 0], model="V100"),
        _gpu_node("b", [1000, 500], model="T4", cpu_used=4000),
        _gpu_node("c", [0, 0, 0, 0], model="A100"),
        make_node("cpu", cpu=8000),
    ]
    running = [
        Placement("j1", "t1", "b", (0,), gpu_milli=1000, gpu_memory_mib=16_000, cpu_milli=2000),
        Placement("j2", "t2", "b", (1,), gpu_milli=500, gpu_memory_mib=8000, cpu_milli=2000),
    ]
    full = ClusterArrays.from_nodes(nodes, running)
    for rows in ([1, 2], [3, 1], [2, 0, 1], [3], []):
        sub = [nodes[i] for i in rows]
        want = ClusterArrays.from_nodes(sub, [p for p in running if p.node in {n.name for n in sub}])
        got = full.take(rows)
        assert got.names == want.names and got.models == want.models
        for name in ("cpu_cap", "cpu_free", "mem_cap", "mem_free", "gpu_count", "gpu_exists", "gpu_free"):
            assert np.array_equal(getattr(got, name), getattr(want, name)), name
        for name in ("gpu_mem_cap", "gpu_mem_free", "model_id", "schedulable", "tags", "version"):
            assert np.array_equal(getattr(got, name), getattr(want, name)), name


def test_refresh_row_rewrites_a_row_as_built() -> None:
    nodes = [_gpu_node("a", [0, 0]), _gpu_node("b", [0, 0])]
    full = ClusterArrays.from_nodes(nodes)
    nodes[1].gpus[1].used_milli = 500
    nodes[1].gpus[1].used_memory_mib = 4000
    nodes[1].used_cpu_milli = 1000
    placed = Placement("j", "t", "b", (1,), gpu_milli=500, gpu_memory_mib=4000, cpu_milli=1000)
    full.refresh_row(1, nodes[1], [placed])
    want = ClusterArrays.from_nodes(nodes, [placed])
    for name in ("cpu_free", "mem_free", "gpu_free", "gpu_mem_free", "tags"):
        assert np.array_equal(getattr(full, name), getattr(want, name)), name
    assert full.version.tolist() == [0, 1]


def test_calls_on_taken_arrays_decide_as_fresh_ones_while_the_caller_rewrites_rows() -> None:
    nodes = [_gpu_node(f"n{i}", [0] * 4) for i in range(6)]
    nodes[2].gpus[0].used_milli = 1000
    profile = get_profile("default").build()
    full = ClusterArrays.from_nodes(nodes)

    def job(i: int, gpus: int = 0, milli: int = 0) -> JobRequest:
        task = TaskRequest(f"t{i}", cpu_milli=2000, memory_mib=4000, gpus=gpus, gpu_milli=milli)
        return JobRequest(job_id=f"j{i}", tasks=[task])

    for round_ in range(4):
        pending = [job(10 * round_ + k, gpus=1 + k % 2) for k in range(2)] + [job(10 * round_ + 5, milli=500)]
        snapshot = make_snapshot(nodes)
        want = schedule(snapshot, pending, profile)
        rows = list(range(len(nodes)))
        got = schedule(snapshot, pending, profile, arrays=full.take(rows), explain=False)
        assert _placements(got) == _placements(want)
        # Apply the decision the way the simulator does: change the nodes, rewrite their rows.
        for p in want.placements:
            at = next(i for i, n in enumerate(nodes) if n.name == p.node)
            for g in p.gpu_indices:
                nodes[at].gpus[g].used_milli += p.gpu_milli
            nodes[at].used_cpu_milli += p.cpu_milli
            full.refresh_row(at, nodes[at])
