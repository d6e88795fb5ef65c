"""Baseline GPU-set policies: go-gpuallocator "besteffort", first fit, random.

besteffort (NVIDIA/go-gpuallocator, re-implemented from ../shared/references/topology-allocation.md
section 1): pair score = PCIe score (SYS 10, NODE 20, PHB 30, PXB 40, PIX 50; the hidden PCIe class of
an NVLink pair is guessed from NUMA affinity) + 100 per NVLink; NVLinks through NVSwitch are invisible
to it (its NVSwitch blind spot), so those pairs score PCIe only. Set score = sum of its pair scores.
The free GPUs are padded with null devices to a multiple of ``size`` and every partition into groups
of ``size`` is enumerated canonically (a group holds no padding or all of it); the first partition with
the strictly highest total wins and its best group is returned. Unlike the Go code, a group holding
padding is never returned (the padding case noted in the reference).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from scheduler.topology.graph import Topology

PCIE_SCORE = {"SYS": 10, "NODE": 20, "PHB": 30, "PXB": 40, "PIX": 50}
# Partition counts grow as N! / ((k!)^(N/k) (N/k)!); beyond this besteffort is not evaluated.
MAX_PARTITIONS = 300_000


def pair_scores(topo: Topology) -> np.ndarray:
    """go-gpuallocator pair scores of ``topo`` (0 on the diagonal)."""
    n = topo.gpu_count
    out = np.zeros((n, n), dtype=np.int64)
    for i in range(n):
        for j in range(n):
            if i == j:
                continue
            score = PCIE_SCORE[topo.pcie_class(i, j)]
            if topo.classes[i][j] == "NV" and not topo.is_nvswitch:
                score += 100 * topo.nvlinks[i][j]
            out[i, j] = score
    return out


def partition_count(n: int, size: int) -> int:
    """Partitions of ``n`` padded devices into groups of ``size`` (upper bound on besteffort's work)."""
    padded = -(-n // size) * size
    groups = padded // size
    count = 1
    remaining = padded
    for _ in range(groups):
        count *= _comb(remaining - 1, size - 1)
        remaining -= size
    return count


def _comb(a: int, b: int) -> int:
    from math import comb

    return comb(a, b)


def besteffort(
    topo: Topology, free: Iterable[int], size: int, required: Sequence[int] = ()
) -> tuple[int, ...] | None:
    """go-gpuallocator's besteffort choice, or None (fewer free than ``size``, or too costly)."""
    available = sorted(set(free))
    if size <= 0 or len(available) < size or len(required) > size:
        return None
    if any(r not in available for r in required):
        return None
    if size == 1:
        return (required[0],) if required else (available[0],)
    if partition_count(len(available), size) > MAX_PARTITIONS:
        return None
    scores = pair_scores(topo)
    pads = (-len(available)) % size
    items: list[int] = available + [-1 - k for k in range(pads)]

    def group_score(group: Sequence[int]) -> int:
        real = [g for g in group if g >= 0]
        return int(sum(scores[a, b] for a, b in itertools.combinations(real, 2)))

    def valid(partition: list[tuple[int, ...]]) -> bool:
        return any(all(g >= 0 for g in grp) and all(r in grp for r in required) for grp in partition)

    best_total = -1
    best_partition: list[tuple[int, ...]] | None = None
    for partition in _partitions(items, size, pads):
        if not valid(partition):
            continue
        total = sum(group_score(g) for g in partition)
        if total > best_total:
            best_total, best_partition = total, partition
    if best_partition is None:
        return None
    groups = [g for g in best_partition if all(x >= 0 for x in g) and all(r in g for r in required)]
    pick = max(groups, key=group_score)  # max keeps the first of equal scores
    return tuple(sorted(pick))


def _partitions(items: list[int], size: int, pads: int) -> Iterator[list[tuple[int, ...]]]:
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for combo in itertools.combinations(rest, size - 1):
        group = (first, *combo)
        padding = sum(1 for g in group if g < 0)
        if padding not in (0, pads):
            continue
        left = [x for x in rest if x not in combo]
        for tail in _partitions(left, size, pads):
            yield [group, *tail]


def first_fit(topo: Topology, free: Iterable[int], size: int) -> tuple[int, ...] | None:
    """The ``size`` lowest-indexed free GPUs (the stock device plugin without topology)."""
    available = sorted(set(free))
    return tuple(available[:size]) if 0 <= size <= len(available) else None


def random_fit(
    topo: Topology, free: Iterable[int], size: int, rng: np.random.Generator
) -> tuple[int, ...] | None:
    """``size`` free GPUs drawn uniformly at random."""
    available = sorted(set(free))
    if not 0 <= size <= len(available):
        return None
    return tuple(sorted(int(x) for x in rng.choice(available, size=size, replace=False)))
