"""The parallelizer: GPU sets for a job's tasks that minimise predicted iteration time.

One node (``choose_set``), exact: every ``size``-subset of the free GPUs is scored at once from the
per-topology tables (``scheduler.topology.tables``), so the chosen set always has the lowest predicted
iteration time ``compute x slowdown + T(S)`` (shared-uplink penalties included). Among sets within a
relative 1e-9 of the best, keep good sets free for later requests, in this order:

1. ``sum_k best_k(rest) / R*_k``: the best ring still available for every request size k in
   {2, 4, 8, 16} from the GPUs left free (so a 1-GPU job takes a GPU whose loss costs no size its best
   set: it does not split an NVLink pair when another GPU will do);
2. ``pack(rest)``: the best packing of disjoint ideal sets of sizes {2, 4, 8, 16} into the rest,
   a k-set weighing k^2 (keeps an ideal quad whole rather than two ideal pairs apart);
3. PCIe/NUMA locality of the set (sum of pair closeness PIX 5 ... SYS 1; NVLink pairs by NUMA), as
   go-gpuallocator's PCIe score does; it also decides on NVSwitch boards;
4. ``sum_k mass_k(rest) / mass_k(all)``: how many good k-sets remain, weighted by ``(R/R*_k)^4``
   (prefers an already broken pair over a fresh one);
5. lowest GPU indices.

Nodes with more than 16 GPUs (no tables) use a greedy heuristic: start from the held GPUs or the
best free pair and add the GPU with the best bandwidth to the members.

Several tasks (``place_job``, gang: all tasks or none): if one node can hold all ``R x g`` GPUs, every
such node is solved exactly and the lowest predicted time wins (ties: the tightest fit); the set is then
split into tasks by taking the best ``g``-subset repeatedly. Otherwise (heuristic) the fewest nodes
that fit are used, largest capacity first, since the network is the bottleneck ring edge.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from scheduler.topology.cost import (
    INF,
    CommProfile,
    allreduce_time,
    multi_node_bandwidth,
    pair_bandwidth,
    ring_bandwidth,
)
from scheduler.topology.graph import Topology
from scheduler.topology.tables import MAX_TABLE_GPUS, popcounts, set_bandwidths, tables_for

_TIE = 1e-9


@dataclass(frozen=True)
class Choice:
    """A GPU set on one node and its predicted cost (``ring_gbps`` is inf for one GPU)."""

    gpus: tuple[int, ...]
    ring_gbps: float
    comm_s: float
    iteration_s: float
    slowdown: float = 1.0


@functools.lru_cache(maxsize=32)
def _masks_by_count(n: int) -> tuple[np.ndarray, ...]:
    counts = popcounts(n)
    masks = np.arange(1 << n, dtype=np.int64)
    return tuple(masks[counts == k] for k in range(n + 1))


@functools.lru_cache(maxsize=32)
def _reversed_bits(n: int) -> np.ndarray:
    masks = np.arange(1 << n, dtype=np.int64)
    out = np.zeros(1 << n, dtype=np.int64)
    for b in range(n):
        out |= ((masks >> b) & 1) << (n - 1 - b)
    return out


def _to_mask(gpus: Iterable[int]) -> int:
    mask = 0
    for g in gpus:
        mask |= 1 << g
    return mask


def _members(mask: int) -> tuple[int, ...]:
    return tuple(i for i in range(mask.bit_length()) if mask >> i & 1)


def choose_set(
    topo: Topology,
    free: Iterable[int],
    size: int,
    *,
    running: Sequence[Sequence[int]] = (),
    held: Iterable[int] = (),
    slowdown: Sequence[float] | None = None,
    job: CommProfile | None = None,
) -> Choice | None:
    """The best ``size`` GPUs out of ``free`` on one node, or None when fewer are free.

    ``held``: GPUs of the same job already on this node (they join the ring; not re-chosen).
    ``running``: GPU sets of other jobs on this node (shared-uplink penalties). ``slowdown[i]``:
    predicted interference slowdown of the job on GPU i (1.0 when None).
    """
    job = job or CommProfile()
    free_set = sorted(set(free) - set(held))
    held_set = sorted(set(held))
    if size < 0 or len(free_set) < size:
        return None
    n = topo.gpu_count
    if any(g < 0 or g >= n for g in (*free_set, *held_set)):
        raise ValueError(f"GPU index out of range for a {n}-GPU topology")
    if n > MAX_TABLE_GPUS:
        return _greedy(topo, free_set, size, running, held_set, slowdown, job)
    tables = tables_for(topo)
    free_mask, held_mask = _to_mask(free_set), _to_mask(held_set)
    cand = _masks_by_count(n)[size]
    cand = cand[(cand & ~free_mask) == 0]
    union = cand | held_mask
    ring = set_bandwidths(topo, union, running)
    members = size + len(held_set)
    sd = np.ones(cand.size)
    if slowdown is not None:
        for i, factor in enumerate(slowdown):
            sd = np.where((union >> i) & 1 == 1, np.maximum(sd, float(factor)), sd)
    if members > 1:
        comm = 2 * (members - 1) / members * job.message_bytes / (ring * 1e9) + allreduce_time(
            members, INF, 0.0
        )
    else:
        comm = np.zeros(cand.size)
    total = job.compute_s * sd + comm
    best = float(total.min())
    tied = np.flatnonzero(total <= best * (1 + _TIE) + 1e-15)
    if tied.size > 1:
        rest = free_mask & ~cand[tied]
        future = np.zeros(tied.size)
        packs = tables.pack[rest]
        plenty = np.zeros(tied.size)
        full = (1 << n) - 1
        for k in tables.sizes:
            future += np.clip(tables.best[k][rest], 0.0, None) / tables.ideal[k]
            plenty += tables.mass[k][rest] / tables.mass[k][full]
        # np.lexsort: the last key is the primary one.
        order = np.lexsort(
            (
                _reversed_bits(n)[cand[tied]],
                np.round(plenty, 9),
                tables.locality[union[tied]],
                np.round(packs, 9),
                np.round(future, 9),
            )
        )
        pick = int(tied[order[-1]])
    else:
        pick = int(tied[0])
    return Choice(
        gpus=_members(int(cand[pick])),
        ring_gbps=float(ring[pick]),
        comm_s=float(comm[pick]),
        iteration_s=float(total[pick]),
        slowdown=float(sd[pick]),
    )


def _greedy(
    topo: Topology,
    free: list[int],
    size: int,
    running: Sequence[Sequence[int]],
    held: list[int],
    slowdown: Sequence[float] | None,
    job: CommProfile,
) -> Choice:
    """Heuristic for nodes beyond the table size: grow the set by the best-connected free GPU."""
    b = pair_bandwidth(topo)
    chosen: list[int] = []
    pool = list(free)
    members = list(held)
    while len(chosen) < size:
        if not members:
            if size == 1 or len(pool) < 2:
                pick = [pool[0]]
            else:
                i, j = max(
                    ((i, j) for i in pool for j in pool if i < j), key=lambda p: (b[p[0], p[1]], -p[0])
                )
                pick = [i, j] if size >= 2 else [i]
        else:
            pick = [max(pool, key=lambda g: (min(b[g, m] for m in members), -g))]
        for g in pick:
            chosen.append(g)
            members.append(g)
            pool.remove(g)
    ring = (
        ring_bandwidth(topo, members, running=running)
        if len(members) <= 9
        else float(min(b[i, j] for i in members for j in members if i != j) if len(members) > 1 else INF)
    )
    sd = max((slowdown[g] for g in members), default=1.0) if slowdown is not None else 1.0
    comm = allreduce_time(len(members), ring, job.message_bytes)
    return Choice(tuple(sorted(chosen)), ring, comm, job.compute_s * sd + comm, sd)


@dataclass(frozen=True)
class NodeView:
    """What the parallelizer needs to know about one node."""

    name: str
    topology: Topology
    free: tuple[int, ...]
    running: tuple[tuple[int, ...], ...] = ()
    slowdown: tuple[float, ...] | None = None


@dataclass(frozen=True)
class JobPlan:
    """Where every task of a gang goes: ``tasks[k] = (node name, GPU indices)``."""

    tasks: tuple[tuple[str, tuple[int, ...]], ...]
    ring_gbps: float
    comm_s: float
    iteration_s: float

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(name for name, _ in self.tasks))


def split_tasks(topo: Topology, gpus: Sequence[int], tasks: int, per_task: int) -> list[tuple[int, ...]]:
    """Split a node's set into ``tasks`` groups of ``per_task``, best-connected group first."""
    remaining = list(gpus)
    groups: list[tuple[int, ...]] = []
    for _ in range(tasks):
        choice = choose_set(topo, remaining, per_task) if per_task else Choice((), INF, 0.0, 0.0)
        if choice is None:  # cannot happen: sizes add up
            raise ValueError("split_tasks: not enough GPUs")
        groups.append(choice.gpus)
        remaining = [g for g in remaining if g not in choice.gpus]
    return groups


def place_job(
    nodes: Sequence[NodeView], tasks: int, per_task: int, job: CommProfile | None = None
) -> JobPlan | None:
    """Place a gang of ``tasks`` x ``per_task`` whole GPUs, or return None (nothing placed)."""
    job = job or CommProfile()
    need = tasks * per_task
    if tasks <= 0 or per_task <= 0:
        return None
    best: tuple[float, int, int, Choice, NodeView] | None = None
    for order, node in enumerate(nodes):
        if len(node.free) < need:
            continue
        choice = choose_set(
            node.topology, node.free, need, running=node.running, slowdown=node.slowdown, job=job
        )
        if choice is None:
            continue
        key = (choice.iteration_s * (1 + _TIE), len(node.free) - need, order)
        if best is None or key < best[:3]:
            best = (key[0], key[1], key[2], choice, node)
    if best is not None:
        choice, node = best[3], best[4]
        groups = split_tasks(node.topology, choice.gpus, tasks, per_task)
        return JobPlan(
            tuple((node.name, g) for g in groups), choice.ring_gbps, choice.comm_s, choice.iteration_s
        )
    # Several nodes (heuristic): fewest nodes, largest capacity first.
    ranked = sorted(
        ((len(n.free) // per_task, -k, n) for k, n in enumerate(nodes) if len(n.free) >= per_task),
        key=lambda t: (t[0], t[1]),
        reverse=True,
    )
    if sum(c for c, _, _ in ranked) < tasks:
        return None
    left = tasks
    parts: list[tuple[NodeView, Choice, int]] = []
    for cap, _, node in ranked:
        if left == 0:
            break
        take = min(cap, left)
        choice = choose_set(
            node.topology, node.free, take * per_task, running=node.running, slowdown=node.slowdown, job=job
        )
        if choice is None:
            return None
        parts.append((node, choice, take))
        left -= take
    ring = multi_node_bandwidth([(n.topology, c.ring_gbps) for n, c, _ in parts])
    comm = allreduce_time(need, ring, job.message_bytes, across_nodes=True)
    sd = max(c.slowdown for _, c, _ in parts)
    placed: list[tuple[str, tuple[int, ...]]] = []
    for node, choice, take in parts:
        placed.extend((node.name, g) for g in split_tasks(node.topology, choice.gpus, take, per_task))
    return JobPlan(tuple(placed), ring, comm, job.compute_s * sd + comm)
