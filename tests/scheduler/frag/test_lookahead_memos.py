"""Memos of the look-ahead math (``scheduler.frag.lookahead``) that outlive one ``ClusterArrays`` give the unmemoised answers."""

from __future__ import annotations

import numpy as np

from scheduler.engine.arrays import ClusterArrays
from scheduler.frag import lookahead as fl
from scheduler.frag.fragmentation import TargetWorkload
from scheduler.framework import CycleState
from scheduler.model import ClusterSnapshot, Gpu, Node, TaskRequest
from scheduler.plugins.balance_yield import BalanceYield


def _arrays(n: int, busy: int = 0) -> ClusterArrays:
    """n 8-GPU nodes, the first ``busy`` of them with half a GPU in use."""
    nodes = [
        Node(
            name=f"n{i}",
            cpu_milli=32000,
            memory_mib=256000,
            gpus=[Gpu(index=g, model="V100", memory_mib=16000) for g in range(8)],
        )
        for i in range(n)
    ]
    for node in nodes[:busy]:
        node.gpus[0].used_milli = 500
        node.gpus[0].tenants.append("r")
    return ClusterArrays.from_snapshot(ClusterSnapshot(nodes=nodes))


def _workload(sizes: list[tuple[int, int]]) -> TargetWorkload:
    tasks = [
        TaskRequest(task_id=f"t{i}", cpu_milli=1000, gpus=gpus, gpu_milli=0 if gpus else milli)
        for i, (gpus, milli) in enumerate(sizes)
    ]
    return TargetWorkload.from_tasks(tasks)


def _fresh(wl: TargetWorkload, arrays: ClusterArrays) -> tuple[np.ndarray, ...]:
    fl._GAP_TABLES.clear()
    return fl._gap_tables(wl, arrays)


def test_gap_tables_are_shared_across_arrays_and_follow_the_workload_version() -> None:
    wl = _workload([(0, 300), (0, 500), (0, 500), (1, 0)])
    first = _fresh(wl, _arrays(2))
    again = fl._gap_tables(wl, _arrays(3))  # other arrays (the simulator's next call): same tables
    for x, y in zip(first, again, strict=True):
        assert np.array_equal(x, y)
    # The workload is replaced in place (version bumped): recomputed, equal to a fresh computation.
    other = _workload([(0, 200), (0, 700)])
    wl.shapes, wl.probs, wl.version = other.shapes, other.probs, wl.version + 1
    memoised = fl._gap_tables(wl, _arrays(2))
    for x, y in zip(memoised, _fresh(wl, _arrays(2)), strict=True):
        assert np.array_equal(x, y)
    assert not np.array_equal(memoised[0], first[0])


def test_the_balance_token_leaves_out_the_reservation_only_when_every_score_is_zero() -> None:
    arrays = _arrays(4, busy=3)
    task = TaskRequest(task_id="x", cpu_milli=1000, gpu_milli=500)
    plugin = BalanceYield()
    # Gang tasks are most of the GPU request: the balance term yields entirely (scale 0).
    heavy = _workload([(8, 0)] * 3 + [(0, 500)])
    state = CycleState(snapshot=ClusterSnapshot(nodes=[]), data={"target_workload": heavy}, arrays=arrays)
    assert plugin._scale(state) == 0.0
    assert fl.gang_reserved_sizes(state) == (8,)
    assert plugin.cache_token(state) == (0.0, ())
    assert not plugin.score_rows(state, task, np.arange(arrays.n)).any()
    # With some scale left the token carries the reservation, as before.
    light = _workload([(8, 0)] + [(0, 500)] * 60)
    state.data["target_workload"] = light
    scale = plugin._scale(state)
    assert scale > 0
    assert plugin.cache_token(state) == (scale, fl.gang_reserved_sizes(state))
