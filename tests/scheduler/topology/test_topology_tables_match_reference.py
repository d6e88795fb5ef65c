"""The vectorised subset tables equal the reference cost model on every shared matrix."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from scheduler.topology.cost import ring_bandwidth
from scheduler.topology.tables import build_tables, set_bandwidths
from tests.scheduler.topology.topo_helpers import dgx1_volta_test_node, load, matrix_files, needs_data

pytestmark = pytest.mark.data


@needs_data
@pytest.mark.parametrize("name", [p.stem for p in matrix_files()])
def test_table_ring_bandwidth_equals_cycle_enumeration_for_every_subset(name: str) -> None:
    topo = load(name)
    tables = build_tables(topo)
    n = topo.gpu_count
    for mask in range(1, 1 << n):
        members = [i for i in range(n) if mask >> i & 1]
        assert tables.ring[mask] == pytest.approx(ring_bandwidth(topo, members)), members


@needs_data
@pytest.mark.parametrize(
    "name", ["pcie_8gpu_pix_pairs_2socket", "dgx1_pcie_only_topo_mp", "a100_pcie_8x_nv12_bridge_pairs"]
)
def test_penalised_bandwidths_equal_the_reference_under_random_running_jobs(name: str) -> None:
    topo = load(name)
    rng = np.random.default_rng(3)
    for _ in range(15):
        perm = [int(x) for x in rng.permutation(8)]
        running = [tuple(sorted(perm[:2])), tuple(sorted(perm[2:5]))]
        free = perm[5:] + perm[:0]
        subsets = [c for k in (2, 3) for c in itertools.combinations(sorted(perm[5:] + perm[:2]), k)]
        masks = np.array([sum(1 << g for g in c) for c in subsets], dtype=np.int64)
        fast = set_bandwidths(topo, masks, running)
        for c, value in zip(subsets, fast, strict=True):
            assert value == pytest.approx(ring_bandwidth(topo, c, running=running)), (c, running, free)


def test_look_ahead_tables_count_disjoint_ideal_sets() -> None:
    tables = build_tables(dgx1_volta_test_node())
    full = 0xFF
    assert tables.ideal[2] == pytest.approx(40.0) and tables.ideal[4] == pytest.approx(80.0)
    assert tables.pack[full] == 8 * 8  # the whole node is the ideal 8-set
    assert tables.pack[full & ~1] == 16 + 4  # quad {4..7} and one NV2 pair from {1, 2, 3}
    assert tables.pack[0b00110111] == 4 + 4  # {0,1,2,4,5}: no ideal quad; pairs {1,2} and {0,4}
    assert tables.best[4][full & ~1] == pytest.approx(80.0)
