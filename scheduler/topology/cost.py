"""Communication cost of a GPU set: ring all-reduce bandwidth, time and predicted iteration time.

For a set ``S`` of ``n`` GPUs on one node, with ``B(i, j)`` the effective pair bandwidth of
``scheduler.topology.links`` (GB/s per direction), the ring bandwidth ``R(S)`` is:

* ``n <= 1``: infinite (no communication);
* NVSwitch board: ``R = links_per_gpu x L_gen x 0.82`` for every subset (non-blocking switch);
* ``S`` has a Hamiltonian cycle over NVLink edges alone: NCCL runs one ring per link, so each GPU
  sends over all of its NVLinks into ``S``: ``R = min_{i in S} sum_{j in S} B_nv(i, j)``;
* otherwise a ring must use PCIe/SMP hops: ``R = max over Hamiltonian cycles C of S of
  min_{(i,j) in C} B(i, j)`` (the bottleneck ring; for ``n = 2`` simply ``B(i, j)``).

Shared resources. The PCIe tree is read from the matrix: domains are the groups of GPUs connected at
class PIX, PXB, PHB and NODE; every domain smaller than the node has an uplink (switch uplink, root
port, socket link). A ring over ``S`` crosses the uplink of domain ``D`` when ``S`` has GPUs inside
and outside ``D``; so does every running job (with PCIe traffic, i.e. not an NVLink ring) whose GPUs
straddle ``D``; ``U_D`` counts those jobs. The best crossing edge is shared, so

    R_pen(S) = min(R(S), min_{D crossed by S, U_D > 0} cross_D(S) / (1 + U_D)),
    cross_D(S) = max_{i in S n D, j in S \\ D} B(i, j);

NVLink rings and NVSwitch traffic are not penalised (dedicated links, non-blocking switch).

Several nodes: a ring leaves each node once per direction through its NICs:
``R = min(min_nodes R_pen(local part), min_nodes NET_node)``.

All-reduce time of ``M`` bytes (``alpha`` = 5 us per step inside a node, 25 us across nodes):

    T(S) = 2 (n - 1) / n x M / R(S) + 2 (n - 1) x alpha

Predicted iteration time = ``compute_s x slowdown + T(S)`` where ``slowdown`` is the predicted
interference slowdown of the job's GPUs (the largest over the set; 1.0 = neutral, the default until
the interference model supplies one).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from scheduler.topology.graph import Topology
from scheduler.topology.links import (
    ALPHA_INTRA_S,
    ALPHA_NET_S,
    PCIE_CLASSES,
    network_bandwidth,
    nvlink_bandwidth,
    nvswitch_bandwidth,
    pcie_bandwidth,
)

INF = math.inf


@dataclass(frozen=True)
class CommProfile:
    """What the cost model needs to know about a data-parallel job.

    ``compute_s``: time of one iteration's computation alone; ``message_bytes``: gradient bytes
    all-reduced per iteration (defaults: a ResNet-50-sized step, 0.2 s and 100 MB).
    """

    compute_s: float = 0.2
    message_bytes: float = 100e6

    @classmethod
    def from_profile(cls, profile: dict[str, float | str]) -> CommProfile:
        """Read ``compute_s`` and ``gradient_mb`` (or ``message_bytes``) from a job profile dict."""
        default = cls()

        def number(key: str) -> float | None:
            value = profile.get(key)
            try:
                return float(value) if value is not None else None
            except (TypeError, ValueError):
                return None

        compute = number("compute_s")
        grad_mb = number("gradient_mb")
        message = number("message_bytes")
        if message is None and grad_mb is not None:
            message = grad_mb * 1e6
        return cls(
            compute_s=compute if compute is not None and compute >= 0 else default.compute_s,
            message_bytes=message if message is not None and message >= 0 else default.message_bytes,
        )


def pair_bandwidth(topo: Topology) -> np.ndarray:
    """``B[i, j]`` in GB/s per direction (0 on the diagonal); NVSwitch pairs get the switch rate."""
    n = topo.gpu_count
    gen = topo.generation
    out = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            c = topo.classes[i][j]
            if c == "X":
                continue
            if c == "NV":
                out[i, j] = (
                    nvswitch_bandwidth(topo.links_per_gpu, gen)
                    if topo.is_nvswitch
                    else nvlink_bandwidth(topo.nvlinks[i][j], gen)
                )
            else:
                out[i, j] = pcie_bandwidth(c, gen)
    return out


def nvlink_matrix(topo: Topology) -> np.ndarray:
    """``B_nv[i, j]``: bandwidth of the direct NVLinks of a pair, 0 where there are none."""
    n = topo.gpu_count
    gen = topo.generation
    out = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if topo.classes[i][j] == "NV":
                out[i, j] = nvlink_bandwidth(topo.nvlinks[i][j], gen)
    return out


def pcie_domains(topo: Topology) -> list[int]:
    """Bitmasks of the PCIe domains with an uplink (see the module docstring), deduplicated."""
    n = topo.gpu_count
    full = (1 << n) - 1
    rank = {c: k for k, c in enumerate(PCIE_CLASSES)}
    masks: list[int] = []
    for level in range(len(PCIE_CLASSES) - 1):  # PIX, PXB, PHB, NODE
        parent = list(range(n))
        for i in range(n):
            for j in range(i + 1, n):
                if rank[topo.pcie_class(i, j)] <= level:
                    parent[_find(parent, i)] = _find(parent, j)
        groups: dict[int, int] = {}
        for i in range(n):
            root = _find(parent, i)
            groups[root] = groups.get(root, 0) | (1 << i)
        for mask in groups.values():
            # A single GPU's own link is never shared with another job: not a shared resource.
            if mask != full and mask & (mask - 1) and mask not in masks:
                masks.append(mask)
    return masks


def _find(parent: list[int], x: int) -> int:
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


def _hamiltonian_cycles(members: Sequence[int]) -> Iterable[tuple[int, ...]]:
    """Every undirected Hamiltonian cycle once (first member fixed, one orientation)."""
    first, rest = members[0], members[1:]
    for perm in itertools.permutations(rest):
        if len(perm) > 1 and perm[0] > perm[-1]:
            continue
        yield (first, *perm)


def crosses(mask: int, domain: int) -> bool:
    return bool(mask & domain) and bool(mask & ~domain)


def domain_load(topo: Topology, running: Iterable[Sequence[int]]) -> dict[int, int]:
    """``U_D`` per domain mask: running jobs with PCIe ring traffic that straddle the domain."""
    load: dict[int, int] = {}
    if topo.is_nvswitch:
        return load
    nv = nvlink_matrix(topo)
    for gpus in running:
        members = sorted(set(gpus))
        if len(members) < 2 or _nvlink_hamiltonian(nv, members):
            continue
        mask = sum(1 << g for g in members)
        for domain in pcie_domains(topo):
            if crosses(mask, domain):
                load[domain] = load.get(domain, 0) + 1
    return load


def _nvlink_hamiltonian(nv: np.ndarray, members: Sequence[int]) -> bool:
    if len(members) == 2:
        return bool(nv[members[0], members[1]] > 0)
    return any(
        all(nv[c[k], c[(k + 1) % len(c)]] > 0 for k in range(len(c))) for c in _hamiltonian_cycles(members)
    )


def ring_bandwidth(topo: Topology, gpus: Iterable[int], *, running: Iterable[Sequence[int]] = ()) -> float:
    """``R_pen(S)`` by direct enumeration of Hamiltonian cycles (the reference; fine up to 9 GPUs).

    ``running``: GPU sets of jobs already running on the node (for shared-uplink penalties).
    """
    members = sorted(set(gpus))
    n = len(members)
    if n <= 1:
        return INF
    if topo.is_nvswitch:
        return nvswitch_bandwidth(topo.links_per_gpu, topo.generation)
    nv = nvlink_matrix(topo)
    if _nvlink_hamiltonian(nv, members):
        return float(min(sum(nv[i, j] for j in members) for i in members))
    b = pair_bandwidth(topo)
    if n == 2:
        best = float(b[members[0], members[1]])
    else:
        best = max(
            min(float(b[c[k], c[(k + 1) % n]]) for k in range(n)) for c in _hamiltonian_cycles(members)
        )
    mask = sum(1 << g for g in members)
    for domain, users in domain_load(topo, running).items():
        if users and crosses(mask, domain):
            cross = max(
                float(b[i, j]) for i in members if domain >> i & 1 for j in members if not domain >> j & 1
            )
            best = min(best, cross / (1 + users))
    return best


def allreduce_time(n: int, ring_gbps: float, message_bytes: float, *, across_nodes: bool = False) -> float:
    """``T = 2 (n-1)/n x M / R + 2 (n-1) x alpha`` seconds; 0 for one GPU."""
    if n <= 1:
        return 0.0
    alpha = ALPHA_NET_S if across_nodes else ALPHA_INTRA_S
    return 2 * (n - 1) / n * message_bytes / (ring_gbps * 1e9) + 2 * (n - 1) * alpha


def iteration_time(
    n: int, ring_gbps: float, job: CommProfile, *, slowdown: float = 1.0, across_nodes: bool = False
) -> float:
    """Predicted iteration time: ``compute_s x slowdown + T(S)``."""
    return job.compute_s * slowdown + allreduce_time(
        n, ring_gbps, job.message_bytes, across_nodes=across_nodes
    )


def multi_node_bandwidth(local: Sequence[tuple[Topology, float]]) -> float:
    """Ring bandwidth over several nodes: ``min(local ring GB/s, each node's network GB/s)``.

    ``local``: per node, its topology and the (penalised) ring bandwidth of its part of the set.
    """
    if len(local) <= 1:
        return local[0][1] if local else INF
    return min(min(r, network_bandwidth(t.near_nic_count, t.nic_gbit)) for t, r in local)
