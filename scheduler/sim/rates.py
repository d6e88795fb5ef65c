"""Progress rates of running jobs (the performance ground truth, ``scheduler.sim.perf``): a shared
GPU's tenants at their measured co-located rates, whole-GPU jobs at their communication rate over the
bottleneck link; completions are rescheduled whenever a rate changes."""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from scheduler.model import Node, Placement
from scheduler.policy.queue_sort import QueuePriority
from scheduler.policy.registry import Policy
from scheduler.sim.cluster import ClusterSpec
from scheduler.sim.perf import PerfModel, best_link
from scheduler.sim.records import SimConfig, SlotKind, _Job


class SimRates:
    # The simulator's state, set by ``Simulator.__init__`` and ``Simulator.run`` (declared here for
    # the modules that read it: rates, queue, state changes, offers).
    cfg: SimConfig
    spec: ClusterSpec
    policy: Policy
    priority: QueuePriority
    perf: PerfModel
    jobs: list[_Job]
    nodes: list[Node]
    links: list[Any]
    node_by_name: dict[str, int]
    offsets: list[int]
    node_group: list[int]
    node_gpus: np.ndarray
    free_milli: np.ndarray
    free_mem: np.ndarray
    tenants: list[list[int]]
    tenant_count: np.ndarray
    gpu_kind: list[SlotKind | None]
    gpu_moves: int
    gpu_bound: bool
    sig_id: np.ndarray
    node_vkey: list[tuple[object, ...] | None]
    node_classes: list[list[int] | None]
    node_clone: list[Node | None]
    node_running: list[dict[str, Placement]]
    task_profiles: dict[str, dict[str, float | str]]
    att: np.ndarray
    since: np.ndarray
    _best_links: dict[tuple[int, int], str | None]
    _bottleneck: dict[tuple[int, tuple[int, ...]], str | None]
    buckets: dict[tuple[tuple[int, int, int], ...], list[tuple[tuple[float, ...], int]]]
    waiting: int
    heap: list[tuple[float, int, int]]
    running: set[int]
    shared_gids: set[int]
    alloc_milli: int
    useful: float
    placements: int
    violations: int
    preemptions: int
    idle_epoch: int
    slot_epoch: int

    def _advance(self, job: _Job, now: float) -> None:
        job.remaining -= job.rate * (now - job.last)
        job.last = now

    def _set_rate(self, job: _Job, rate: float, now: float) -> None:
        self._advance(job, now)
        # Useful GPUs = sum of num_gpus * rate: a GPU with two tenants at 0.7 each does 1.4 GPUs of work.
        self.useful += job.trace.num_gpus * (rate - job.rate)
        job.rate = rate
        job.version += 1
        if rate * self.cfg.slowdown_tolerance < 1.0 - 1e-9 and not job.violated:
            job.violated = True
            self.violations += 1
        finish = now + max(job.remaining, 0.0) / rate
        heapq.heappush(self.heap, (finish, job.version, job.idx))

    def _shared_rate(self, job_idx: int, gid: int) -> float:
        me = self.jobs[job_idx].type_idx
        return self.perf.shared_rate(me, (self.jobs[o].type_idx for o in self.tenants[gid] if o != job_idx))

    def _refresh_gpu(self, gid: int, now: float, skip: int = -1) -> None:
        for o in self.tenants[gid]:
            if o != skip:
                self._set_rate(self.jobs[o], self._shared_rate(o, gid), now)

    def _best_link(self, group: int, num_gpus: int) -> str | None:
        key = (group, num_gpus)
        link = self._best_links.get(key, "")
        if link == "":
            g = self.spec.groups[group]
            link = self._best_links[key] = best_link(g.links, num_gpus, g.gpus)
        return link
