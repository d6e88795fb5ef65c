"""Declarative placement scenarios, the exhaustive-optimum property and the gang invariant."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from scheduler.topology.cost import CommProfile, ring_bandwidth
from scheduler.topology.placer import NodeView, choose_set, place_job
from tests.scheduler.topology.topo_helpers import (
    dgx1_volta_test_node,
    load,
    matrix_files,
    needs_data,
    nv_pairs_node,
)

pytestmark = pytest.mark.data

# (matrix, busy GPUs, running jobs, request size, expected set)
SCENARIOS = [
    ("a100_pcie_8x_nv12_bridge_pairs", [], [], 2, (0, 1)),
    ("a100_pcie_8x_nv12_bridge_pairs", [0], [], 1, (1,)),  # take the broken pair's partner
    ("a100_pcie_8x_nv12_bridge_pairs", [0, 3], [], 2, (4, 5)),  # keep {6,7} and the socket-1 quad
    ("rtx_a6000x3_nv4_bridge_pair", [], [], 1, (2,)),  # do not split the NVLink pair
    ("gpu3_nv4_pair_plus_pcie", [], [], 2, (0, 1)),
    ("ibm_ac922_v100x4_nv3pairs", [2], [], 1, (3,)),
    ("ibm_ac922_v100x4_nv3pairs", [], [], 2, (0, 1)),
    ("dgx1_v100", [], [], 4, (0, 1, 2, 3)),
    ("dgx1_v100", [0], [], 4, (4, 5, 6, 7)),
    ("pcie_8gpu_pix_pairs_2socket", [1, 2, 5, 7], [(1, 2)], 2, (4, 6)),  # {0,3} shares loaded uplinks
    ("pcie_8gpu_pix_pairs_2socket", [1, 2, 5, 7], [], 2, (0, 3)),
    ("hgx_h100_8gpu_nvswitch", [], [], 4, (0, 1, 2, 3)),  # one NUMA node
    ("pcie_5gpu_mixed_phb_node_sys", [], [], 2, (1, 2)),
    ("t4_4x_pcie_2socket", [], [], 1, (0,)),  # the lone socket-0 GPU: keeps the NODE trio
]


@needs_data
@pytest.mark.parametrize(("name", "busy", "running", "size", "expected"), SCENARIOS)
def test_scenario_gets_the_expected_set(
    name: str, busy: list[int], running: list[tuple[int, ...]], size: int, expected: tuple[int, ...]
) -> None:
    topo = load(name)
    free = [g for g in range(topo.gpu_count) if g not in busy]
    choice = choose_set(topo, free, size, running=running)
    assert choice is not None
    assert choice.gpus == expected


def test_sequential_pairs_and_quads_on_dgx1_volta_match_go_gpuallocator() -> None:
    topo = dgx1_volta_test_node()
    for size, expected in ((2, [(0, 3), (1, 2), (4, 7), (5, 6)]), (4, [(0, 1, 2, 3), (4, 5, 6, 7)])):
        free = list(range(8))
        got = []
        for _ in expected:
            choice = choose_set(topo, free, size)
            assert choice is not None
            got.append(choice.gpus)
            free = [g for g in free if g not in choice.gpus]
        assert got == expected


@needs_data
@pytest.mark.parametrize("name", [p.stem for p in matrix_files()])
def test_single_requests_reach_the_exhaustive_optimum(name: str) -> None:
    topo = load(name)
    n = topo.gpu_count
    rng = np.random.default_rng(11)
    states: list[tuple[list[int], list[tuple[int, ...]]]] = [(list(range(n)), [])]
    for _ in range(4):
        perm = [int(x) for x in rng.permutation(n)]
        busy = perm[: int(rng.integers(1, n))]
        states.append(
            ([g for g in range(n) if g not in busy], [tuple(sorted(busy[:2]))] if len(busy) > 1 else [])
        )
    for free, running in states:
        for size in range(2, len(free) + 1):
            choice = choose_set(topo, free, size, running=running)
            assert choice is not None
            best = max(ring_bandwidth(topo, c, running=running) for c in itertools.combinations(free, size))
            assert ring_bandwidth(topo, choice.gpus, running=running) == pytest.approx(best)
            assert choice.ring_gbps == pytest.approx(best)
            assert set(choice.gpus) <= set(free) and len(choice.gpus) == size


def test_interference_slowdown_steers_the_choice_when_links_tie() -> None:
    topo = nv_pairs_node(4, [(0, 1, 4), (2, 3, 4)], default="NODE")
    job = CommProfile(compute_s=1.0, message_bytes=1e6)
    plain = choose_set(topo, range(4), 2, job=job)
    slowed = choose_set(topo, range(4), 2, job=job, slowdown=[1.5, 1.0, 1.0, 1.0])
    assert plain is not None and plain.gpus == (0, 1)
    assert slowed is not None and slowed.gpus == (2, 3)
    assert slowed.iteration_s == pytest.approx(1.0 + slowed.comm_s)


def test_held_gpus_of_the_same_job_join_the_ring() -> None:
    topo = nv_pairs_node(4, [(0, 1, 4), (2, 3, 4)], default="NODE")
    choice = choose_set(topo, [1, 2, 3], 1, held=[0])
    assert choice is not None and choice.gpus == (1,)
    assert choice.ring_gbps == pytest.approx(4 * 25 * 0.8)


def test_it_returns_none_when_too_few_gpus_are_free() -> None:
    assert choose_set(dgx1_volta_test_node(), [0, 1], 3) is None


def _views(name: str, frees: list[list[int]]) -> list[NodeView]:
    topo = load(name)
    return [NodeView(f"n{k}", topo, tuple(free)) for k, free in enumerate(frees)]


def _assert_gang(
    plan_tasks: tuple[tuple[str, tuple[int, ...]], ...], views: list[NodeView], per_task: int
) -> None:
    used: set[tuple[str, int]] = set()
    free = {v.name: set(v.free) for v in views}
    for node, gpus in plan_tasks:
        assert len(gpus) == per_task
        for g in gpus:
            assert g in free[node]
            assert (node, g) not in used  # no GPU given twice
            used.add((node, g))


@needs_data
def test_a_gang_that_fits_one_node_stays_on_the_best_node() -> None:
    views = _views("a100_pcie_8x_nv12_bridge_pairs", [[1, 2, 5, 6], list(range(8))])
    plan = place_job(views, 2, 2)
    assert plan is not None
    assert plan.nodes == ("n1",)  # n0 has no free NVLink pair
    assert all(views[1].topology.link(*g) == "NV12" for _, g in plan.tasks)
    _assert_gang(plan.tasks, views, 2)


@needs_data
def test_a_gang_spanning_nodes_uses_the_fewest_and_is_network_bound() -> None:
    views = _views("dgx_a100", [[0, 1], list(range(8)), [0, 1, 2, 3]])
    plan = place_job(views, 3, 4)
    assert plan is not None
    assert sorted(plan.nodes) == ["n1", "n2"]
    assert plan.ring_gbps == pytest.approx(8 * 12 * 0.9)
    _assert_gang(plan.tasks, views, 4)


@needs_data
def test_a_gang_that_cannot_fit_gets_nothing() -> None:
    views = _views("dgx_a100", [[0, 1, 2], [0, 1, 2, 3, 4]])
    assert place_job(views, 3, 2) is not None  # 1 + 2 tasks fit
    assert place_job(views, 4, 2) is None  # 3 x 2-GPU tasks at most: all or nothing
