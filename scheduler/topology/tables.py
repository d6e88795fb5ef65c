"""Per-topology tables over every GPU subset (bitmask), built once and cached.

``ring[mask]`` is ``R(S)`` of ``scheduler.topology.cost`` without penalties, computed for all masks at
once by a bottleneck Held-Karp DP (``path[mask, v]`` = best bottleneck of a Hamiltonian path from the
lowest GPU of ``mask`` to ``v`` through ``mask``), vectorised with NumPy layer by layer:
O(2^n n^2) work, a few ms for 8 GPUs, ~0.1-0.3 s once for 16. NVSwitch boards need no DP.

``best[k][mask]`` is the best ``R`` of any ``k``-subset of ``mask`` and ``mass[k][mask]`` the sum of
``(R(sub) / R*_k)^4`` over the ``k``-subsets (``R*_k`` = best on the idle node): how many good
``k``-sets a set of free GPUs still holds (subset-sum and subset-max transforms, O(2^n n)).
``pack[mask]`` is the best weighted packing of disjoint ideal sets of mixed sizes (see ``_packing``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from scheduler.topology.cost import nvlink_matrix, pair_bandwidth, pcie_domains
from scheduler.topology.graph import Topology
from scheduler.topology.links import PCIE_CLASSES, nvswitch_bandwidth

MAX_TABLE_GPUS = 16
_CACHE_SIZE = 64


def popcounts(n: int) -> np.ndarray:
    masks = np.arange(1 << n, dtype=np.int64)
    counts = np.zeros(1 << n, dtype=np.int64)
    for b in range(n):
        counts += (masks >> b) & 1
    return counts


def _bottleneck_cycles(weights: np.ndarray) -> np.ndarray:
    """Best bottleneck Hamiltonian cycle value of every mask (0 where none; pairs = the edge)."""
    n = weights.shape[0]
    size = 1 << n
    masks = np.arange(size, dtype=np.int64)
    counts = popcounts(n)
    low = np.zeros(size, dtype=np.int64)
    for b in range(n - 1, -1, -1):
        low[(masks >> b) & 1 == 1] = b
    path = np.zeros((size, n))
    for s in range(n):
        path[1 << s, s] = np.inf
    for k in range(1, n):
        layer = masks[counts == k]
        for v in range(n):
            bit = 1 << v
            ok = layer[((layer & bit) == 0) & (low[layer] < v)]
            if ok.size == 0:
                continue
            target = ok | bit
            acc = path[target, v]
            for u in range(n):
                has_u = (ok >> u) & 1 == 1
                if not has_u.any() or weights[u, v] <= 0:
                    continue
                cand = np.where(has_u, np.minimum(path[ok, u], weights[u, v]), 0.0)
                acc = np.maximum(acc, cand)
            path[target, v] = acc
    cycle = np.zeros(size)
    for v in range(n):
        has_v = ((masks >> v) & 1 == 1) & (low != v) & (counts >= 2)
        back = weights[v, low]
        val = np.where(has_v, np.minimum(path[:, v], back), 0.0)
        cycle = np.maximum(cycle, val)
    # A pair's "cycle" is its single edge used both ways.
    pairs = masks[counts == 2]
    if pairs.size:
        hi = np.zeros(pairs.size, dtype=np.int64)
        for b in range(n):
            hi[(pairs >> b) & 1 == 1] = b
        cycle[pairs] = weights[low[pairs], hi]
    return cycle


_PACK_BUDGET = 4000


def _packing(
    ring: np.ndarray, counts: np.ndarray, sizes: tuple[int, ...], ideal: dict[int, float]
) -> np.ndarray:
    """``pack[mask]``: the best weighted packing of disjoint ideal sets inside ``mask``.

    An ideal ``k``-set (``k`` in ``sizes``, ``R >= R*_k``) weighs ``k^2``, so one intact ideal quad
    outweighs two ideal pairs: ``pack[m] = max_{ideal S subset of m} |S|^2 + pack[m \\ S]``, by
    layers of popcount. With more than 4,000 ideal sets (e.g. NVSwitch, where every set is ideal) the
    count-only bound ``v(c) = max_k k^2 + v(c - k)`` stands in (exact when every set is ideal).
    """
    size = ring.size
    masks = np.arange(size, dtype=np.int64)
    good = [(int(k), np.flatnonzero((counts == k) & (ring >= ideal[k] * (1 - 1e-9)))) for k in sizes]
    total = sum(g.size for _, g in good)
    top = int(counts.max())
    if total > _PACK_BUDGET or total == sum(int((counts == k).sum()) for k in sizes):
        by_count = np.zeros(top + 1)
        for c in range(1, top + 1):
            by_count[c] = max([k * k + by_count[c - k] for k in sizes if k <= c] + [by_count[c - 1]])
        return by_count[counts]
    pack = np.zeros(size)
    smallest = min(sizes) if sizes else top + 1
    for c in range(smallest, top + 1):
        layer = masks[counts == c]
        acc = pack[layer]
        for k, subs in good:
            if k > c:
                continue
            for sub in subs:
                inside = (layer & sub) == sub
                if inside.any():
                    acc = np.where(inside, np.maximum(acc, k * k + pack[layer ^ sub]), acc)
        pack[layer] = acc
    return pack


@dataclass
class SetTables:
    """Ring bandwidth and look-ahead tables of one topology (see the module docstring)."""

    topo: Topology
    pair: np.ndarray
    nv: np.ndarray
    ring: np.ndarray
    nvring: np.ndarray
    counts: np.ndarray
    locality: np.ndarray
    sizes: tuple[int, ...]
    ideal: dict[int, float]
    best: dict[int, np.ndarray]
    pack: np.ndarray
    mass: dict[int, np.ndarray]
    domains: list[int]
    _cross: dict[int, np.ndarray] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return self.topo.gpu_count

    def load(self, running: Sequence[Sequence[int]]) -> dict[int, int]:
        """``U_D`` per domain (same as ``cost.domain_load``, from the cached tables)."""
        out: dict[int, int] = {}
        if self.topo.is_nvswitch:
            return out
        for gpus in running:
            mask = 0
            for g in gpus:
                mask |= 1 << g
            if bin(mask).count("1") < 2 or self.nvring[mask]:
                continue
            for domain in self.domains:
                if mask & domain and mask & ~domain:
                    out[domain] = out.get(domain, 0) + 1
        return out

    def cross(self, domain: int) -> np.ndarray:
        """``cross_D[mask]``: best edge from ``mask n D`` to ``mask \\ D`` (0 if none)."""
        table = self._cross.get(domain)
        if table is None:
            masks = np.arange(1 << self.n, dtype=np.int64)
            table = np.zeros(1 << self.n)
            for i in range(self.n):
                if not domain >> i & 1:
                    continue
                for j in range(self.n):
                    if domain >> j & 1:
                        continue
                    both = ((masks >> i) & 1 == 1) & ((masks >> j) & 1 == 1)
                    table = np.where(both, np.maximum(table, self.pair[i, j]), table)
            self._cross[domain] = table
        return table


def build_tables(topo: Topology) -> SetTables:
    """Compute every table of ``topo`` (at most ``MAX_TABLE_GPUS`` GPUs)."""
    n = topo.gpu_count
    if n > MAX_TABLE_GPUS:
        raise ValueError(f"topology tables support up to {MAX_TABLE_GPUS} GPUs per node, got {n}")
    size = 1 << n
    masks = np.arange(size, dtype=np.int64)
    counts = popcounts(n)
    bits = ((masks[:, None] >> np.arange(n)) & 1).astype(bool)
    pair = pair_bandwidth(topo)
    nv = nvlink_matrix(topo)
    if topo.is_nvswitch:
        ring = np.full(size, nvswitch_bandwidth(topo.links_per_gpu, topo.generation))
        nvring = np.ones(size, dtype=bool)
    else:
        nvring = _bottleneck_cycles(nv) > 0
        agg = np.where(bits, bits.astype(float) @ nv, np.inf).min(axis=1)
        ring = np.where(nvring, agg, _bottleneck_cycles(pair))
    ring[counts <= 1] = np.inf
    nvring[counts <= 1] = True
    # Locality: sum over pairs of (6 - rank of the PCIe class), PIX = 5 ... SYS = 1; ties on NVSwitch.
    close = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i != j:
                close[i, j] = len(PCIE_CLASSES) - PCIE_CLASSES.index(topo.pcie_class(i, j))
    fb = bits.astype(float)
    locality = np.einsum("mi,ij,mj->m", fb, close, fb) / 2.0
    sizes = tuple(k for k in (2, 4, 8, 16) if k <= n)
    ideal: dict[int, float] = {}
    best: dict[int, np.ndarray] = {}
    mass: dict[int, np.ndarray] = {}
    for k in sizes:
        exact = counts == k
        ideal[k] = float(ring[exact].max())
        b = np.where(exact, ring, -np.inf)
        m = np.where(exact, (ring / ideal[k]) ** 4, 0.0)
        for bit in range(n):
            has = masks[(masks >> bit) & 1 == 1]
            b[has] = np.maximum(b[has], b[has ^ (1 << bit)])
            m[has] = m[has] + m[has ^ (1 << bit)]
        best[k] = b
        mass[k] = m
    return SetTables(
        topo=topo,
        pair=pair,
        nv=nv,
        ring=ring,
        nvring=nvring,
        counts=counts,
        locality=locality,
        sizes=sizes,
        ideal=ideal,
        best=best,
        pack=_packing(ring, counts, sizes, ideal),
        mass=mass,
        domains=pcie_domains(topo),
    )


_LOCK = threading.Lock()
_TABLES: OrderedDict[tuple[object, ...], SetTables] = OrderedDict()


def tables_for(topo: Topology) -> SetTables:
    """Cached ``build_tables`` (keyed by the topology's fingerprint, LRU of 64 topologies)."""
    key = topo.fingerprint
    with _LOCK:
        hit = _TABLES.get(key)
        if hit is not None:
            _TABLES.move_to_end(key)
            return hit
    tables = build_tables(topo)
    with _LOCK:
        _TABLES[key] = tables
        while len(_TABLES) > _CACHE_SIZE:
            _TABLES.popitem(last=False)
    return tables


def set_bandwidths(topo: Topology, masks: np.ndarray, running: Sequence[Sequence[int]] = ()) -> np.ndarray:
    """``R_pen`` of every GPU-set bitmask in ``masks`` (vectorised; equals ``cost.ring_bandwidth``)."""
    tables = tables_for(topo)
    ring = tables.ring[masks].copy()
    for domain, users in tables.load(running).items():
        hit = ((masks & domain) != 0) & ((masks & ~domain) != 0) & ~tables.nvring[masks]
        if hit.any():
            ring = np.where(hit, np.minimum(ring, tables.cross(domain)[masks] / (1 + users)), ring)
    return ring
