"""Benchmark of the parallelizer against the exhaustive optimum and the baselines.

Single requests: for every topology, the idle node and ``states`` seeded random occupancy states (a
random number of busy GPUs grouped into running jobs of 1-3 GPUs, whose PCIe traffic loads shared
uplinks), every request size 1..free: the predicted ring bandwidth ``R_pen`` of our choice, of the
exhaustive optimum (every subset scored by the reference ``cost.ring_bandwidth``, independent of the
tables our search uses), besteffort, first fit and random.

Sequential arrivals: ``streams`` seeded streams of 1/2/4/8-GPU requests (probabilities
0.4/0.3/0.2/0.1, sizes above the node dropped) arriving as a Poisson process with exponential
durations sized for the offered load, served FIFO; per policy, how many multi-GPU requests got a set
as good as the best on the idle node ("ideal") and as good as the best among the GPUs free at that
moment ("state-optimal"), the mean predicted iteration time and all-reduce time of multi-GPU requests
(``CommProfile`` defaults: 0.2 s compute, 100 MB gradients) and the mean wait.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from scheduler.bench.topology.baselines import besteffort, first_fit, random_fit
from scheduler.topology.cost import INF, CommProfile, iteration_time, ring_bandwidth
from scheduler.topology.graph import Topology
from scheduler.topology.parser import parse_topology, read_topology_file
from scheduler.topology.placer import choose_set
from scheduler.topology.tables import build_tables, set_bandwidths, tables_for

POLICIES = ("ours", "besteffort", "first_fit", "random")
_REL = 1e-9


def load_topologies(directory: Path) -> list[tuple[str, Topology]]:
    """Every ``*.txt`` matrix of ``directory``; the file name hints the GPU model (e.g. ``v100``)."""
    out = []
    for path in sorted(directory.glob("*.txt")):
        out.append((path.stem, read_topology_file(str(path), gpu_model=path.stem)))
    return out


def synthetic_16() -> list[tuple[str, Topology]]:
    """Two 16-GPU nodes for the decision-time target (no 16-GPU matrix is in the shared folder).

    ``dgx2_v100_16``: DGX-2 as README describes it (all pairs NV6 through NVSwitch, two sockets).
    ``pcie16_pix_pxb_2socket``: PIX pairs, PXB quads, PHB halves of a socket, SYS across sockets.
    """
    n = 16

    def matrix(cell: Callable[[int, int], str], numa: Callable[[int], int]) -> str:
        head = "\t" + "\t".join(f"GPU{j}" for j in range(n)) + "\tCPU Affinity\tNUMA Affinity"
        rows = [
            f"GPU{i}\t" + "\t".join(" X " if i == j else cell(i, j) for j in range(n)) + f"\t0-1\t{numa(i)}"
            for i in range(n)
        ]
        return "\n".join([head, *rows]) + "\n"

    def pcie(i: int, j: int) -> str:
        if i // 8 != j // 8:
            return "SYS"
        if i // 2 == j // 2:
            return "PIX"
        if i // 4 == j // 4:
            return "PXB"
        return "PHB"

    return [
        ("dgx2_v100_16", parse_topology(matrix(lambda i, j: "NV6", lambda i: i // 8), gpu_model="V100")),
        ("pcie16_pix_pxb_2socket", parse_topology(matrix(pcie, lambda i: i // 8), gpu_model="L40S")),
    ]


@dataclass
class _Reference:
    """Memoised reference bandwidths of one topology (direct cycle enumeration up to 9 GPUs)."""

    topo: Topology

    def __post_init__(self) -> None:
        self._memo: dict[tuple[tuple[int, ...], tuple[tuple[int, ...], ...]], float] = {}

    def bandwidth(self, gpus: Sequence[int], running: tuple[tuple[int, ...], ...]) -> float:
        key = (tuple(sorted(gpus)), running)
        value = self._memo.get(key)
        if value is None:
            if self.topo.gpu_count <= 9:
                value = ring_bandwidth(self.topo, key[0], running=running)
            else:
                mask = sum(1 << g for g in key[0])
                value = float(set_bandwidths(self.topo, np.array([mask], dtype=np.int64), running)[0])
            self._memo[key] = value
        return value

    def optimum(self, free: Sequence[int], size: int, running: tuple[tuple[int, ...], ...]) -> float:
        if self.topo.gpu_count <= 9:
            return max(self.bandwidth(c, running) for c in itertools.combinations(free, size))
        masks = np.array([sum(1 << g for g in c) for c in itertools.combinations(free, size)], dtype=np.int64)
        return float(set_bandwidths(self.topo, masks, running).max())


def _policy(
    name: str, topo: Topology, rng: np.random.Generator
) -> Callable[[list[int], int, tuple[tuple[int, ...], ...]], tuple[int, ...] | None]:
    if name == "ours":
        return lambda free, size, running: _ours(topo, free, size, running)
    if name == "besteffort":
        return lambda free, size, running: besteffort(topo, free, size)
    if name == "first_fit":
        return lambda free, size, running: first_fit(topo, free, size)
    return lambda free, size, running: random_fit(topo, free, size, rng)


def _ours(
    topo: Topology, free: list[int], size: int, running: tuple[tuple[int, ...], ...]
) -> tuple[int, ...] | None:
    choice = choose_set(topo, free, size, running=running)
    return None if choice is None else choice.gpus


def _same(a: float, b: float) -> bool:
    return a == b or (a != INF and b != INF and abs(a - b) <= _REL * max(abs(a), abs(b)))


def _timing(samples: list[tuple[float, float]]) -> dict[str, float]:
    """Wall and CPU (process) time per decision in ms; CPU time excludes waits for the shared cores."""
    wall = np.array([w for w, _ in samples]) * 1e3
    cpu = np.array([c for _, c in samples]) * 1e3
    if not wall.size:
        return {"calls": 0}
    return {
        "calls": int(wall.size),
        "median_ms": float(np.median(wall)),
        "p99_ms": float(np.percentile(wall, 99)),
        "max_ms": float(wall.max()),
        "cpu_median_ms": float(np.median(cpu)),
        "cpu_p99_ms": float(np.percentile(cpu, 99)),
    }


class _Clock:
    """Measures one decision: wall time and this process's CPU time."""

    def __enter__(self) -> _Clock:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sample = (time.perf_counter() - self.wall, time.process_time() - self.cpu)


def single_requests(topo: Topology, *, states: int, seed: int) -> dict[str, Any]:
    """The single-request experiment on one topology (see the module docstring)."""
    n = topo.gpu_count
    rng = np.random.default_rng(seed)
    ref = _Reference(topo)
    policies = {p: _policy(p, topo, np.random.default_rng(seed + 1)) for p in POLICIES}
    scenarios: list[tuple[list[int], tuple[tuple[int, ...], ...]]] = [(list(range(n)), ())]
    for _ in range(states):
        busy_count = int(rng.integers(1, n))
        busy = [int(x) for x in rng.permutation(n)[:busy_count]]
        jobs: list[tuple[int, ...]] = []
        while busy:
            take = int(rng.integers(1, 4))
            jobs.append(tuple(sorted(busy[:take])))
            busy = busy[take:]
        used = {g for r in jobs for g in r}
        scenarios.append(([g for g in range(n) if g not in used], tuple(r for r in jobs if len(r) > 1)))
    cases = multi = 0
    optimal = dict.fromkeys(POLICIES, 0)
    ratios: dict[str, list[float]] = {p: [] for p in POLICIES}
    skipped = dict.fromkeys(POLICIES, 0)
    mismatches: list[dict[str, Any]] = []
    times: list[tuple[float, float]] = []
    for free, running in scenarios:
        for size in range(1, len(free) + 1):
            cases += 1
            best = ref.optimum(free, size, running) if size > 1 else INF
            if size > 1:
                multi += 1
            for name, fn in policies.items():
                with _Clock() as clock:
                    pick = fn(free, size, running)
                if name == "ours":
                    times.append(clock.sample)
                if pick is None:
                    skipped[name] += 1
                    continue
                got = ref.bandwidth(pick, running) if size > 1 else INF
                if _same(got, best):
                    optimal[name] += 1
                elif name == "ours" and len(mismatches) < 5:
                    mismatches.append(
                        {"free": free, "size": size, "running": running, "got": got, "best": best}
                    )
                if size > 1:
                    ratios[name].append(got / best)
    return {
        "cases": cases,
        "multi_gpu_cases": multi,
        "optimal": optimal,
        "ours_equals_optimum_pct": 100.0 * optimal["ours"] / cases,
        "mean_bandwidth_ratio_to_optimum": {p: float(np.mean(r)) if r else None for p, r in ratios.items()},
        "skipped": skipped,
        "mismatches": mismatches,
        "decision_time": _timing(times),
    }


def request_stream(n: int, count: int, seed: int, load: float = 0.8) -> list[tuple[float, int, float]]:
    """``(arrival, size, duration)`` of a seeded 1/2/4/8-GPU stream at ``load`` (offered GPU load)."""
    rng = np.random.default_rng(seed)
    sizes = np.array([s for s in (1, 2, 4, 8) if s <= n])
    probs = np.array([0.4, 0.3, 0.2, 0.1][: sizes.size])
    probs = probs / probs.sum()
    mean_size = float((sizes * probs).sum())
    mean_duration = load * n / mean_size
    t = 0.0
    out = []
    for _ in range(count):
        t += float(rng.exponential(1.0))
        out.append((t, int(rng.choice(sizes, p=probs)), float(rng.exponential(mean_duration))))
    return out


def sequential(
    topo: Topology,
    *,
    requests: int,
    seed: int,
    load: float = 0.8,
    streams: int = 1,
    job: CommProfile | None = None,
) -> dict[str, Any]:
    """The sequential-arrival experiment on one topology: every policy on the same ``streams``
    seeded streams (seeds ``seed .. seed + streams - 1``), counts summed over the streams."""
    job = job or CommProfile()
    n = topo.gpu_count
    ref = _Reference(topo)
    tables = tables_for(topo)
    ideal = {k: float(tables.ring[tables.counts == k].max()) for k in range(2, n + 1)}
    out: dict[str, Any] = {}
    for name in POLICIES:
        stats: dict[str, Any] = {
            "placed": 0,
            "multi_gpu": 0,
            "ideal": 0,
            "state_optimal": 0,
            "iter": [],
            "wait": [],
            "times": [],
        }
        unplaceable = 0
        for stream_seed in range(seed, seed + streams):
            unplaceable += _replay(
                topo,
                request_stream(n, requests, stream_seed, load),
                _policy(name, topo, np.random.default_rng(stream_seed + 7)),
                ref,
                ideal,
                job,
                stats,
            )
        out[name] = {
            "placed": stats["placed"],
            "multi_gpu_placed": stats["multi_gpu"],
            "ideal_placements": stats["ideal"],
            "state_optimal_placements": stats["state_optimal"],
            "mean_iteration_s": float(np.mean(stats["iter"])) if stats["iter"] else None,
            "mean_allreduce_ms": float(np.mean(stats["iter"]) - job.compute_s) * 1e3
            if stats["iter"]
            else None,
            "mean_wait": float(np.mean(stats["wait"])) if stats["wait"] else None,
            "skipped": unplaceable,
            "decision_time": _timing(stats["times"]),
        }
    return out


def _replay(
    topo: Topology,
    stream: list[tuple[float, int, float]],
    fn: Callable[[list[int], int, tuple[tuple[int, ...], ...]], tuple[int, ...] | None],
    ref: _Reference,
    ideal: dict[int, float],
    job: CommProfile,
    stats: dict[str, Any],
) -> int:
    """Serve one stream FIFO with policy ``fn``, adding to ``stats``; returns requests skipped."""
    queue: list[tuple[float, int, float]] = []
    ending: list[tuple[float, tuple[int, ...]]] = []
    free = set(range(topo.gpu_count))
    events = iter(stream)
    upcoming = next(events, None)
    now = 0.0
    skipped = 0
    while upcoming is not None or queue or ending:
        next_end = min((e[0] for e in ending), default=INF)
        if upcoming is not None and upcoming[0] <= next_end:
            now = upcoming[0]
            queue.append(upcoming)
            upcoming = next(events, None)
        else:
            now = next_end
            for e in [e for e in ending if e[0] == next_end]:
                ending.remove(e)
                free |= set(e[1])
        while queue:
            arrival, size, duration = queue[0]
            if size > len(free):
                break
            running = tuple(tuple(sorted(e[1])) for e in ending if len(e[1]) > 1)
            with _Clock() as clock:
                pick = fn(sorted(free), size, running)
            queue.pop(0)
            if pick is None:  # besteffort beyond its partition budget
                skipped += 1
                continue
            stats["times"].append(clock.sample)
            stats["placed"] += 1
            stats["wait"].append(now - arrival)
            if size > 1:
                got = ref.bandwidth(pick, running)
                stats["multi_gpu"] += 1
                stats["ideal"] += int(got >= ideal[size] * (1 - _REL))
                stats["state_optimal"] += int(_same(got, ref.optimum(sorted(free), size, running)))
                stats["iter"].append(iteration_time(size, got, job))
            free -= set(pick)
            ending.append((now + duration, pick))
    return skipped


def table_build_ms(topo: Topology) -> float:
    start = time.perf_counter()
    build_tables(topo)
    return (time.perf_counter() - start) * 1e3


def evaluate(
    topologies: list[tuple[str, Topology]],
    *,
    states: int,
    requests: int,
    seed: int,
    load: float = 0.8,
    streams: int = 1,
) -> dict[str, Any]:
    """Run both experiments on every topology; targets summarised under ``targets``."""
    results: dict[str, Any] = {}
    for name, topo in topologies:
        build = table_build_ms(topo)
        tables_for(topo)
        results[name] = {
            "gpus": topo.gpu_count,
            "uniform": topo.is_uniform,
            "nvswitch": topo.is_nvswitch,
            "generation": topo.generation.name,
            "table_build_ms": build,
            "single": single_requests(topo, states=states, seed=seed),
            "sequential": sequential(topo, requests=requests, seed=seed, load=load, streams=streams),
        }
    return {"topologies": results, "targets": _targets(results)}


def _targets(results: dict[str, Any]) -> dict[str, Any]:
    """Target checks: single requests at the optimum; sequential counts vs. besteffort and first fit
    (both for "state-optimal" and "ideal" placements); decision time by node size."""
    single_ok = all(r["single"]["ours_equals_optimum_pct"] == 100.0 for r in results.values())
    sequential: dict[str, Any] = {}
    for metric in ("state_optimal_placements", "ideal_placements"):
        vs_be: dict[str, bool] = {}
        vs_ff: dict[str, float | None] = {}
        for name, r in results.items():
            seq = r["sequential"]
            ours, be, ff = (seq[p][metric] for p in ("ours", "besteffort", "first_fit"))
            vs_be[name] = ours >= be
            vs_ff[name] = None if r["uniform"] else (100.0 * (ours - ff) / ff if ff else None)
        sequential[metric] = {"at_least_besteffort": vs_be, "gain_over_first_fit_pct": vs_ff}
    times: dict[str, dict[str, float]] = {}
    for r in results.values():
        entry = times.setdefault(f"{r['gpus']}_gpus", {"median_ms": 0.0, "p99_ms": 0.0, "cpu_p99_ms": 0.0})
        for t in (r["single"]["decision_time"], r["sequential"]["ours"]["decision_time"]):
            for key in entry:
                entry[key] = max(entry[key], float(t.get(key, 0.0)))
    return {
        "single_ours_equals_optimum_everywhere": single_ok,
        "sequential": sequential,
        "worst_decision_time_by_node_size": times,
    }
