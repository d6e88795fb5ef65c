"""Baselines: go-gpuallocator besteffort on its own test vectors, first fit, random."""

from __future__ import annotations

import numpy as np
import pytest

from scheduler.bench.topology.baselines import besteffort, first_fit, pair_scores, partition_count, random_fit
from tests.scheduler.topology.topo_helpers import dgx1_volta_test_node, nv_pairs_node


def test_pair_scores_add_100_per_nvlink_to_the_pcie_score() -> None:
    scores = pair_scores(dgx1_volta_test_node())
    assert scores[0, 3] == 230  # NV2 + host bridge
    assert scores[0, 4] == 210  # NV2 + cross CPU
    assert scores[0, 1] == 150  # NV1 + single switch
    assert scores[0, 5] == 10  # cross CPU only


@pytest.mark.parametrize(
    ("available", "required", "size", "expected"),
    [
        ([0, 2, 4, 5], [], 2, (4, 5)),
        ([0, 4, 5, 6], [], 2, (5, 6)),
        ([0, 1, 3], [], 2, (0, 3)),
        ([0, 1, 4], [], 2, (0, 4)),
        (list(range(8)), [4], 2, (4, 7)),
        (list(range(8)), [4], 4, (4, 5, 6, 7)),
        (list(range(8)), [0, 2, 4, 6], 4, (0, 2, 4, 6)),
        (list(range(1, 8)), [0, 1, 2, 3], 4, None),
    ],
)
def test_besteffort_reproduces_the_go_gpuallocator_dgx1_volta_vectors(
    available: list[int], required: list[int], size: int, expected: tuple[int, ...] | None
) -> None:
    assert besteffort(dgx1_volta_test_node(), available, size, required) == expected


def test_besteffort_sequential_allocations_follow_the_nvlink_structure() -> None:
    topo = dgx1_volta_test_node()
    for size, expected in ((2, [(0, 3), (1, 2), (4, 7), (5, 6)]), (4, [(0, 1, 2, 3), (4, 5, 6, 7)])):
        free = set(range(8))
        got = []
        for _ in expected:
            pick = besteffort(topo, free, size)
            assert pick is not None
            got.append(pick)
            free -= set(pick)
        assert got == expected


def test_besteffort_on_rtx8000_bridges_and_pascal_switch_pairs() -> None:
    rtx = nv_pairs_node(4, [(0, 3, 2), (1, 2, 2)], default="SYS")
    assert besteffort(rtx, range(4), 2) == (0, 3)
    assert besteffort(rtx, [1, 2], 2) == (1, 2)


def test_besteffort_never_returns_a_group_holding_padding() -> None:
    # 5 free GPUs, size 3: one padded group {a, b, null}. Make the best pair sit outside every full
    # group that scores well, so a padded group would win on its real pair alone.
    topo = nv_pairs_node(5, [(3, 4, 8)], default="SYS")
    pick = besteffort(topo, range(5), 3)
    assert pick is not None and len(pick) == 3 and all(0 <= g < 5 for g in pick)


def test_partition_counts_match_the_closed_form() -> None:
    assert partition_count(8, 2) == 105
    assert partition_count(8, 4) == 35
    assert partition_count(16, 8) == 6435


def test_first_fit_takes_the_lowest_free_indices() -> None:
    assert first_fit(dgx1_volta_test_node(), [5, 1, 7, 3], 3) == (1, 3, 5)
    assert first_fit(dgx1_volta_test_node(), [5], 3) is None


def test_random_fit_is_seeded_and_draws_free_gpus() -> None:
    topo = dgx1_volta_test_node()
    a = random_fit(topo, [0, 2, 4, 6], 2, np.random.default_rng(5))
    b = random_fit(topo, [0, 2, 4, 6], 2, np.random.default_rng(5))
    assert a == b and a is not None and set(a) <= {0, 2, 4, 6} and len(set(a)) == 2
