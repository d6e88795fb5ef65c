"""The drain (defragmentation) planner: migrate running jobs so that a waiting multi-GPU job fits.

In queue order (at most ``window`` jobs), each waiting job takes its need from the idle GPUs; the
first whole-GPU job whose need the idle GPUs cover by count but that no set of nodes holds (idle
GPUs scattered over nodes) gets nodes drained (``first_blocked``): on each node chosen for one of
its tasks, the fewest GPUs of single-node jobs are moved until the task fits (``drain_plan``), and
only if every moved job fits the idle GPUs of the other nodes (best fit, largest first); else the
drain is refused and nothing moves. Moved jobs restart (the checkpoint restore) and are placed right
after the waiting job, which is placed first so the drained nodes go to it (``Migration`` records).
One drain per round: draining for every blocked job of the window measured the same (full Philly
-1.4 %, the Sept slice +0.8 %, others within 0.2 %).

Units that free GPUs on a node (``units_of``): a whole-GPU job running on that node only (its GPU
count, [job]); a shared GPU all of whose tenants are shared jobs (1, its tenants). Jobs spanning
nodes, and jobs that may not be preempted or are younger than their minimum run time, stay.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

import numpy as np

EPS = 1e-9
J = TypeVar("J")
W = TypeVar("W")


def first_blocked(waiting: Iterable[tuple[W, float, bool]], idle: float) -> tuple[W, float] | None:
    """The first waiting job (``(job, idle GPUs it needs, whether it is a whole-GPU job that fits
    nowhere now)``, in queue order) that the idle GPUs cover by count but not per node, with the idle
    GPUs left after its need; None once the idle GPUs no longer cover the queue's needs. A caller
    whose drain for that job is refused goes on with the rest of the same iterator and that budget."""
    budget = idle
    for job, need, blocked in waiting:
        if need > budget + EPS:
            return None
        budget -= need
        if blocked:
            return job, budget
    return None


def drain_plan(
    sizes: tuple[int, ...],
    idle_node: np.ndarray,
    node_gpus: np.ndarray,
    units_of: Callable[[int], list[tuple[int, list[J]]]],
    gpus_of: Callable[[J], int],
) -> list[J] | None:
    """Jobs to move so that tasks of ``sizes`` whole GPUs (largest first) fit on distinct nodes, or
    None (refused: no node can be freed, or a moved job would fit nowhere else).

    ``idle_node``: idle GPUs per node (not changed); ``node_gpus``: GPUs per node; ``units_of(n)``:
    what frees GPUs on node ``n`` (``(GPUs freed, jobs to move)``); ``gpus_of(j)``: the idle GPUs a
    moved job needs elsewhere (1 for a shared job: a GPU of its own). Jobs must sort (ties)."""
    idle = idle_node.copy()
    movers: list[J] = []
    open_ = np.ones(len(idle), dtype=bool)
    for g in sizes:
        eligible = open_ & (node_gpus >= g)
        ready = np.flatnonzero(eligible & (idle >= g))
        if ready.size:  # a node that holds the task already
            open_[int(ready[0])] = False
            idle[int(ready[0])] = 0
            continue
        best: tuple[int, int, list[J]] | None = None
        cand = np.flatnonzero(eligible)
        # Fewest GPUs short first: a node short of s GPUs costs at least s moved GPUs, so the walk
        # stops once that bound exceeds the best plan found (ties: the lowest node index).
        for ni in cand[np.argsort(-idle[cand], kind="stable")].tolist():
            short = g - int(idle[ni])
            if best is not None and short * 1000 > best[0]:
                break
            cands = sorted(units_of(ni), key=lambda u: (u[0], u[1]))
            freed = 0
            picked: list[J] = []
            for size, ids in cands:
                if freed >= short:
                    break
                freed += size
                picked.extend(ids)
            if freed < short:
                continue
            cost = sum(gpus_of(j) for j in picked) * 1000 + len(picked)
            if best is None or (cost, ni) < best[:2]:
                best = (cost, ni, picked)
        if best is None:
            return None
        _, ni, picked = best
        open_[ni] = False
        movers.extend(picked)
        idle[ni] = 0  # the task takes the node's freed GPUs (the rest stay out of the fit below)
    # Every moved job must fit the idle GPUs of the nodes not chosen (best fit, largest first).
    rest = np.where(open_, idle, 0)
    for j in sorted(movers, key=lambda j: -gpus_of(j)):
        need = gpus_of(j)
        ok_nodes = np.flatnonzero(rest >= need)
        if ok_nodes.size == 0:
            return None
        best_node = int(ok_nodes[np.argmin(rest[ok_nodes])])
        rest[best_node] -= need
    return movers
