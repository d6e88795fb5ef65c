"""The simulator's state as the policy's round reads it (``scheduler.policy.round.RoundState``).

A running or waiting job is its index in ``Simulator.jobs``, a GPU its global index. This module only
reads the arrays and applies what the round decides (an eviction is a preemption: the job releases
its GPUs and waits again at once; a migration also places the drain's target and then the moved
jobs); it holds no rule.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from scheduler.model import GPU_MILLI
from scheduler.policy.round import Candidates, Running, Waiting

if TYPE_CHECKING:
    from scheduler.sim.engine import Simulator


class SimRoundState:
    def __init__(self, sim: Simulator, now: float) -> None:
        self.sim = sim
        self.now = now

    def idle_gpus(self) -> int:
        return self.sim._idle_gpus()

    def idle_per_node(self) -> np.ndarray:
        sim = self.sim
        idle = (sim.free_milli == GPU_MILLI).astype(np.int64)
        return np.add.reduceat(idle, sim.offsets[:-1])

    def node_gpus(self) -> np.ndarray:
        return self.sim.node_gpus

    def waiting(self) -> Iterator[Waiting[int]]:
        jobs = self.sim.jobs
        # ``scan_limit`` bounds every walk of the queue (a rule that needs more would see more than a
        # cycle is offered); the round's walks stop far earlier on every shipped cluster.
        for idx in itertools.islice(self.sim._queue_in_order(), self.sim.cfg.scan_limit):
            job = jobs[idx]
            assert job.request is not None
            yield Waiting(idx, job.request, job.attained)

    def candidates(self, now: float) -> Candidates[int]:
        sim = self.sim
        ids = np.fromiter(sim.running, dtype=np.int64, count=len(sim.running))
        return Candidates(
            ids.tolist(),
            sim.att[ids] + sim.ngpus[ids] * (now - sim.since[ids]),
            sim.job_priority[ids],
            sim.since[ids],
            ids,
            sim.job_preemptible[ids],
            sim.job_min_runtime[ids],
        )

    def running(self, job: int) -> Running[int]:
        j = self.sim.jobs[job]
        req = j.request
        assert req is not None
        return Running(
            job, req.job_id, req.priority, j.started_at, job, req.preemptible, req.min_runtime_s, j.shared,
            j.trace.num_gpus, len(j.placements), j.rate, req.slowdown_tolerance,
        )  # fmt: skip

    def shared_gpus(self) -> list[tuple[int, Sequence[int]]]:
        tenants = self.sim.tenants
        return [(gid, list(tenants[gid])) for gid in sorted(self.sim.shared_gids)]

    def gpu_label(self, gpu: int) -> str:
        sim = self.sim
        ni = int(sim.gpu_node[gpu])
        return f"GPU {gpu - sim.offsets[ni]} of {sim.nodes[ni].name}"

    def holders(self, job: int) -> list[Sequence[int]]:
        tenants = self.sim.tenants
        return [tenants[g] for g in self.sim.jobs[job].gids]

    def jobs_on_node(self, node: int) -> Iterable[int]:
        owner = self.sim.task_owner
        return dict.fromkeys(owner[tid] for tid in self.sim.node_running[node])

    def node_tenants(self, node: int) -> list[Sequence[int]]:
        sim = self.sim
        return [sim.tenants[gid] for gid in range(sim.offsets[node], sim.offsets[node + 1])]

    def evict(self, job: int, rule: str, preemptor: object, reason: str, avoid: Sequence[int]) -> None:
        sim = self.sim
        victim = sim.jobs[job]
        for other in avoid:
            victim.avoid.add(sim.jobs[other].type_idx)
        sim._preempt(victim, self.now)
        if rule == "unpack-idle":
            sim.unpacks += 1

    def migrate(self, target: int, jobs: Sequence[int], reason: str) -> None:
        sim = self.sim
        moved = [sim.jobs[m] for m in jobs]
        for job in moved:
            sim._release(job, self.now)
            sim._enqueue(job)
            sim.migrations += 1
        # The target first (a one-job cycle), so the drained nodes go to it; then the moved jobs.
        sim._cycle(self.now, [sim.jobs[target]])
        sim._cycle(self.now, moved)
