"""Topology-aware placement of multi-GPU and multi-task jobs (adapter over ``scheduler.topology``).

Hooks:

* ``choose_gpus``: whole-GPU tasks get the free set with the lowest predicted iteration time on the
  node, ring including GPUs the same job already holds there (``scheduler.topology.choose_set``;
  shared-uplink penalties from the jobs running on the node); a multi-task job follows the gang plan
  made for it at its first task when the engine picked the planned node. Shared (fractional) tasks get
  a GPU that leaves the best whole-GPU sets intact. Nodes without a topology: lowest free indices.
* ``score`` (+ ``normalize`` to 0..100): the predicted ring bandwidth the job would get with this task
  on this node (the network bandwidth if the job's other tasks are elsewhere); the node planned for
  this task by the gang plan scores highest. Single-GPU, single-task jobs score neutral.

Wiring in a profile: ``multi_gpu_chooser="topology_aware"`` and ``scores={"topology_aware": w, ...}``.
Constructor arguments: ``compute_s`` and ``gradient_mb`` (defaults for jobs whose profile lacks them).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from scheduler.framework import CycleState, min_max_normalize, register
from scheduler.model import Node, TaskRequest
from scheduler.plugins.resource_fit import fitting_gpus
from scheduler.topology import (
    Choice,
    CommProfile,
    JobPlan,
    NodeView,
    Topology,
    choose_set,
    place_job,
    topology_from_any,
)
from scheduler.topology.links import network_bandwidth
from scheduler.topology.tables import MAX_TABLE_GPUS, tables_for

_PLANS = "topology_aware.plans"
_BIG = 1e4  # stands in for an infinite ring bandwidth (one GPU) in scores


def node_topology(node: Node) -> Topology | None:
    """The node's topology when usable (known and matching its GPU count), else None."""
    try:
        topo = topology_from_any(node.topology)
    except ValueError:
        return None
    if topo is None or topo.gpu_count != len(node.gpus):
        return None
    return topo


@register("topology_aware")
class TopologyAware:
    name = "topology_aware"

    def __init__(self, compute_s: float = 0.2, gradient_mb: float = 100.0) -> None:
        self.default_profile = CommProfile(compute_s=compute_s, message_bytes=gradient_mb * 1e6)
        self._cache: OrderedDict[tuple[Any, ...], Choice | None] = OrderedDict()

    # -- helpers --------------------------------------------------------------------------------

    def _comm(self, state: CycleState) -> CommProfile:
        if state.job is None or not state.job.profile:
            return self.default_profile
        base = CommProfile.from_profile(state.job.profile)
        profile = state.job.profile
        return CommProfile(
            compute_s=base.compute_s if "compute_s" in profile else self.default_profile.compute_s,
            message_bytes=base.message_bytes
            if ("gradient_mb" in profile or "message_bytes" in profile)
            else self.default_profile.message_bytes,
        )

    def _job_tasks(self, state: CycleState) -> set[str]:
        return {t.task_id for t in state.job.tasks} if state.job is not None else set()

    def _running(self, state: CycleState, node: Node, mine: set[str]) -> tuple[tuple[int, ...], ...]:
        """GPU sets of other jobs on ``node`` (tasks of one running job grouped together)."""
        job_of = {p.task_id: p.job_id for p in state.snapshot.running if p.node == node.name}
        groups: dict[str, set[int]] = {}
        for gpu in node.gpus:
            for tenant in gpu.tenants:
                if tenant in mine:
                    continue
                groups.setdefault(job_of.get(tenant, tenant), set()).add(gpu.index)
        return tuple(tuple(sorted(g)) for g in groups.values() if len(g) > 1)

    def _held(self, node: Node, mine: set[str]) -> tuple[int, ...]:
        return tuple(g.index for g in node.gpus if mine.intersection(g.tenants))

    def _choice(
        self,
        topo: Topology,
        free: tuple[int, ...],
        size: int,
        running: Any,
        held: tuple[int, ...],
        job: CommProfile,
    ) -> Choice | None:
        key = (topo.fingerprint, free, size, running, held, job)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        choice = choose_set(topo, free, size, running=running, held=held, job=job)
        self._cache[key] = choice
        if len(self._cache) > 4096:
            self._cache.popitem(last=False)
        return choice

    def _plan(self, state: CycleState) -> dict[str, tuple[str, tuple[int, ...]]]:
        """Gang plan of the current job (task id -> node, GPUs), made once at its first task."""
        job = state.job
        if job is None or len(job.tasks) < 2:
            return {}
        plans: dict[str, dict[str, tuple[str, tuple[int, ...]]]] = state.data.setdefault(_PLANS, {})
        if job.job_id in plans:
            return plans[job.job_id]
        sizes = {t.gpus for t in job.tasks}
        plan: dict[str, tuple[str, tuple[int, ...]]] = {}
        if len(sizes) == 1 and next(iter(sizes)) >= 1:
            views = []
            for node in state.snapshot.nodes:
                topo = node_topology(node)
                if not node.schedulable or topo is None or topo.gpu_count > MAX_TABLE_GPUS:
                    continue
                free = tuple(g.index for g in node.gpus if g.is_idle)
                views.append(NodeView(node.name, topo, free, self._running(state, node, set())))
            result: JobPlan | None = place_job(views, len(job.tasks), next(iter(sizes)), self._comm(state))
            if result is not None:
                plan = {t.task_id: spot for t, spot in zip(job.tasks, result.tasks, strict=True)}
        plans[job.job_id] = plan
        return plan

    # -- hooks ----------------------------------------------------------------------------------

    def score(self, state: CycleState, task: TaskRequest, node: Node) -> float:
        """Raw score: predicted ring GB/s of the job with this task here (plan target: highest)."""
        topo = node_topology(node)
        multi_task = state.job is not None and len(state.job.tasks) > 1
        if topo is None or not task.gpus or (task.gpus == 1 and not multi_task):
            return 0.0
        planned = self._plan(state).get(task.task_id)
        if planned is not None and planned[0] == node.name:
            return 2 * _BIG
        mine = self._job_tasks(state)
        free = tuple(g.index for g in node.gpus if g.is_idle)
        held = self._held(node, mine)
        choice = self._choice(
            topo, free, task.gpus, self._running(state, node, mine), held, self._comm(state)
        )
        if choice is None:
            return 0.0
        ring = min(choice.ring_gbps, _BIG)
        elsewhere = any(
            mine.intersection(g.tenants)
            for other in state.snapshot.nodes
            if other is not node
            for g in other.gpus
        )
        if elsewhere:
            ring = min(ring, network_bandwidth(topo.near_nic_count, topo.nic_gbit))
        return float(ring)

    def normalize(self, scores: list[float]) -> list[float]:
        return min_max_normalize(scores)

    def choose_gpus(self, state: CycleState, task: TaskRequest, node: Node) -> tuple[int, ...] | None:
        candidates = fitting_gpus(task, node)
        needed = max(task.gpus, 1)
        if len(candidates) < needed:
            return None
        topo = node_topology(node)
        if topo is None:
            return tuple(candidates[:needed])
        if not task.gpus:
            return (self._shared_gpu(topo, node, candidates, self._held(node, self._job_tasks(state))),)
        planned = self._plan(state).get(task.task_id)
        if planned is not None and planned[0] == node.name and set(planned[1]) <= set(candidates):
            return planned[1]
        mine = self._job_tasks(state)
        choice = self._choice(
            topo,
            tuple(candidates),
            task.gpus,
            self._running(state, node, mine),
            self._held(node, mine),
            self._comm(state),
        )
        return None if choice is None else choice.gpus

    def _shared_gpu(self, topo: Topology, node: Node, candidates: list[int], held: tuple[int, ...]) -> int:
        """A GPU for a fractional task. With GPUs of the same job on the node: the candidate giving
        the job's ring the most bandwidth (a GPU it already holds needs no link). Otherwise one
        already shared if any (no whole GPU consumed), else the idle GPU whose loss keeps the best
        whole-GPU sets (``choose_set`` with size 1)."""
        shared = [i for i in candidates if not node.gpus[i].is_idle]
        if topo.gpu_count > MAX_TABLE_GPUS:
            return (shared or candidates)[0]
        tables = tables_for(topo)
        if held:
            base = sum(1 << g for g in held)
            return max(candidates, key=lambda c: (float(tables.ring[base | (1 << c)]), c in shared, -c))
        if shared:
            return shared[0]
        choice = choose_set(topo, candidates, 1)
        return choice.gpus[0] if choice is not None else candidates[0]
