"""Topology-aware placement of multi-GPU and multi-task jobs (adapter over ``scheduler.topology``).

Hooks:

* ``choose_gpus``: whole-GPU tasks get the free set with the lowest predicted iteration time on the
  node, ring including GPUs the same job already holds there (``scheduler.topology.choose_set``;
  shared-uplink penalties from the jobs running on the node); a multi-task job follows the gang plan
  made for it at its first task when the engine picked the planned node. Shared (fractional) tasks get
  a GPU that leaves the best whole-GPU sets intact. Nodes without a topology: lowest free indices.
* ``score``/``score_rows`` (+ ``normalize``/``normalize_rows`` to 0..100): the predicted ring bandwidth
  the job would get with this task on this node (the network bandwidth if the job's other tasks are
  elsewhere); when a gang plan exists for the task, its planned node scores 1 and every other node 0.
  Nodes without a topology score 0. ``is_neutral`` tells the engine when the score says nothing:
  single-GPU single-task jobs, fractional tasks, and feasible nodes none of which has a topology
  (e.g. the Alibaba trace), so the plugin costs one array lookup there and changes no total.
* ``annotate``: appends the chosen set's ring bandwidth and links to ``Placement.reason``.

Wiring in a profile: ``multi_gpu_chooser="topology_aware"`` and ``scores={"topology_aware": w, ...}``.
Constructor arguments: ``compute_s`` and ``gradient_mb`` (defaults for jobs whose profile lacks them);
``fallback``: a GPU chooser plugin name (e.g. ``"fgd_gpus"``) that chooses instead on nodes without a
usable topology and for fractional tasks of single-task jobs (where GPU choice is a fragmentation and
interference question, not a communication one); without it those get the lowest free indices and
``_shared_gpu`` as before. With a fallback the plugin can serve as a profile's ``gpu_chooser``: 1-GPU
tasks then avoid splitting NVLink pairs on nodes that have them, and everything else is unchanged.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np

from scheduler.engine.fit import fitting_gpus
from scheduler.framework import BatchGpuChooserPlugin, CycleState, min_max_normalize
from scheduler.model import ClusterSnapshot, Node, Placement, TaskRequest
from scheduler.plugin_registry import create_plugin, register
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

_MISS = object()
_PLANS = "topology_aware.plans"
_NODES = "topology_aware.nodes"
_BIG = 1e4  # stands in for an infinite ring bandwidth (one GPU) in scores
# (the task's gang plan spot or None, the job's task ids, its communication profile)
_ScoreContext = tuple[tuple[str, tuple[int, ...]] | None, set[str], CommProfile]


def node_topology(node: Node) -> Topology | None:
    """The node's topology when usable (known and matching its GPU count), else None."""
    try:
        topo = topology_from_any(node.topology)
    except ValueError:
        return None
    if topo is None or topo.gpu_count != len(node.gpus):
        return None
    return topo


class _NodeIndex:
    """Per snapshot, built lazily (most calls need one node or none): each node's usable topology,
    parsed once (backends may store dicts or text); nodes by name; running tasks' jobs per node."""

    def __init__(self, snapshot: ClusterSnapshot) -> None:
        self.snapshot = snapshot
        self._topo: dict[str, tuple[Node, Topology | None]] = {}
        self._by_name: dict[str, Node] | None = None
        self._job_of: dict[str, dict[str, str]] | None = None

    def topo(self, node: Node) -> Topology | None:
        hit = self._topo.get(node.name)
        if hit is not None and hit[0] is node:
            return hit[1]
        topo = node_topology(node)
        self._topo[node.name] = (node, topo)
        return topo

    def any_topo(self, rows: np.ndarray) -> bool:
        """Whether a node of ``rows`` (positions in snapshot.nodes = CycleState.arrays rows) has one."""
        nodes = self.snapshot.nodes
        return any(self.topo(nodes[r]) is not None for r in rows.tolist())

    @property
    def by_name(self) -> dict[str, Node]:
        if self._by_name is None:
            self._by_name = {n.name: n for n in self.snapshot.nodes}
        return self._by_name

    def node_at(self, row: int, name: str) -> Node:
        """The snapshot node of CycleState.arrays row ``row`` (named ``name``)."""
        nodes = self.snapshot.nodes
        if row < len(nodes) and nodes[row].name == name:
            return nodes[row]
        return self.by_name[name]

    def job_of(self, node_name: str) -> dict[str, str]:
        """Task id -> job id of the snapshot's running placements on ``node_name``."""
        if self._job_of is None:
            self._job_of = {}
            for p in self.snapshot.running:
                self._job_of.setdefault(p.node, {})[p.task_id] = p.job_id
        return self._job_of.get(node_name, {})


def _index(state: CycleState) -> _NodeIndex:
    idx: _NodeIndex | None = state.data.get(_NODES)
    if idx is None or idx.snapshot is not state.snapshot:
        idx = _NodeIndex(state.snapshot)
        state.data[_NODES] = idx
    return idx


def _multi_task(state: CycleState) -> bool:
    return state.job is not None and len(state.job.tasks) > 1


@register("topology_aware")
class TopologyAware:
    name = "topology_aware"

    def __init__(
        self, compute_s: float = 0.2, gradient_mb: float = 100.0, fallback: str | None = None
    ) -> None:
        self.default_profile = CommProfile(compute_s=compute_s, message_bytes=gradient_mb * 1e6)
        self._cache: OrderedDict[tuple[Any, ...], Choice | None] = OrderedDict()
        self._fp_ids: dict[tuple[Any, ...], int] = {}  # fingerprint -> small id (``_choice`` keys)
        self._fp_of: dict[int, tuple[Topology, int]] = {}  # id(topology) -> (it, its fingerprint id)
        if fallback == self.name:
            raise ValueError("topology_aware cannot be its own fallback")
        self.fallback: Any = create_plugin(fallback) if fallback else None
        self._fallback_batch = isinstance(self.fallback, BatchGpuChooserPlugin)

    # -- helpers --------------------------------------------------------------------------------

    def _topo(self, state: CycleState, node: Node) -> Topology | None:
        return _index(state).topo(node)  # (also a node outside the snapshot: direct calls)

    def _scored(self, state: CycleState, task: TaskRequest) -> bool:
        """Whether the score has anything to say about ``task`` (module docstring)."""
        return task.gpus >= 2 or (task.gpus == 1 and _multi_task(state))

    def _delegate(self, state: CycleState, task: TaskRequest, topo: Topology | None) -> bool:
        """Whether the fallback chooser decides for ``task`` on a node with topology ``topo``."""
        if self.fallback is None:
            return False
        return topo is None or (task.is_shared and not _multi_task(state))

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
        job_of: dict[str, str] | None = None
        groups: dict[str, set[int]] = {}
        for gpu in node.gpus:
            if not gpu.tenants:
                continue
            for tenant in gpu.tenants:
                if tenant in mine:
                    continue
                if job_of is None:
                    job_of = _index(state).job_of(node.name)
                key = job_of.get(tenant, tenant)
                group = groups.get(key)
                if group is None:
                    groups[key] = {gpu.index}
                else:
                    group.add(gpu.index)
        return tuple(tuple(sorted(g)) for g in groups.values() if len(g) > 1)

    def _held(self, node: Node, mine: set[str]) -> tuple[int, ...]:
        return tuple(g.index for g in node.gpus if g.tenants and not mine.isdisjoint(g.tenants))

    def _choice(
        self,
        topo: Topology,
        free: tuple[int, ...],
        size: int,
        running: Any,
        held: tuple[int, ...],
        job: CommProfile,
    ) -> Choice | None:
        key = (self._fingerprint_id(topo), free, size, running, held, job)
        hit = self._cache.get(key, _MISS)
        if hit is not _MISS:
            self._cache.move_to_end(key)
            return hit  # type: ignore[return-value]
        choice = choose_set(topo, free, size, running=running, held=held, job=job)
        self._cache[key] = choice
        if len(self._cache) > 4096:
            self._cache.popitem(last=False)
        return choice

    def _fingerprint_id(self, topo: Topology) -> int:
        """A small int per distinct ``topo.fingerprint`` (a nested tuple: Python re-hashes it on
        every lookup), found by the object's identity."""
        hit = self._fp_of.get(id(topo))
        if hit is not None and hit[0] is topo:
            return hit[1]
        if len(self._fp_of) > 4096 or len(self._fp_ids) > 4096:
            # (parsed topologies may be new objects every cycle; ids of fingerprints restart,
            # so the choices keyed by them go too)
            self._fp_of.clear()
            self._fp_ids.clear()
            self._cache.clear()
        fp = self._fp_ids.setdefault(topo.fingerprint, len(self._fp_ids))
        self._fp_of[id(topo)] = (topo, fp)
        return fp

    def _plan(self, state: CycleState) -> dict[str, tuple[str, tuple[int, ...]]]:
        # (Only multi-task jobs of whole GPUs get a plan; callers check that first.)
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
            idx = _index(state)
            for node in state.snapshot.nodes:
                topo = idx.topo(node)
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

    def is_neutral(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> bool:
        """No opinion: the task is not scored, or no feasible node has a topology (score 0 for all)."""
        if not self._scored(state, task):
            return True
        return not _index(state).any_topo(rows)

    def score(self, state: CycleState, task: TaskRequest, node: Node) -> float:
        """Raw score: predicted ring GB/s of the job with this task here (plan: 1 there, 0 elsewhere)."""
        topo = self._topo(state, node)
        if topo is None or not self._scored(state, task):
            return 0.0
        return self._score_node(state, task, node, topo, self._job_nodes(state))

    def score_rows(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> np.ndarray:
        out = np.zeros(len(rows))
        if not self._scored(state, task):
            return out
        idx = _index(state)
        nodes = state.snapshot.nodes
        job_nodes = self._job_nodes(state)
        ctx: _ScoreContext | None = None
        for i, r in enumerate(rows.tolist()):
            node = nodes[r]
            topo = idx.topo(node)
            if topo is not None:
                if ctx is None:  # (at the first node with a topology, as per node before)
                    ctx = self._score_context(state, task)
                out[i] = self._score_node(state, task, node, topo, job_nodes, ctx)
        return out

    def _score_context(self, state: CycleState, task: TaskRequest) -> _ScoreContext:
        """What ``_score_node`` needs of the job, the same for every node: (the task's gang plan
        spot or None, the job's task ids, its communication profile)."""
        planned = self._plan(state).get(task.task_id) if _multi_task(state) else None
        return planned, self._job_tasks(state), self._comm(state)

    def _job_nodes(self, state: CycleState) -> set[str]:
        """Names of the nodes where tasks of the current job already hold GPUs (this cycle)."""
        mine = self._job_tasks(state)
        if not mine:
            return set()
        names = set()
        for n in state.snapshot.nodes:
            for g in n.gpus:
                if g.tenants and not mine.isdisjoint(g.tenants):
                    names.add(n.name)
                    break
        return names

    def _score_node(
        self,
        state: CycleState,
        task: TaskRequest,
        node: Node,
        topo: Topology,
        job_nodes: set[str],
        ctx: _ScoreContext | None = None,
    ) -> float:
        planned, mine, comm = ctx if ctx is not None else self._score_context(state, task)
        if planned is not None:
            return 1.0 if planned[0] == node.name else 0.0
        free = tuple(g.index for g in node.gpus if g.is_idle)
        held = self._held(node, mine)
        choice = self._choice(topo, free, task.gpus, self._running(state, node, mine), held, comm)
        if choice is None:
            return 0.0
        ring = min(choice.ring_gbps, _BIG)
        if job_nodes - {node.name}:
            ring = min(ring, network_bandwidth(topo.near_nic_count, topo.nic_gbit))
        return float(ring)

    def normalize(self, scores: list[float]) -> list[float]:
        return min_max_normalize(scores)

    def normalize_rows(self, scores: np.ndarray) -> np.ndarray:
        return np.asarray(min_max_normalize([float(x) for x in scores]), dtype=float)

    def choose_gpus_row(self, state: CycleState, task: TaskRequest, row: int) -> tuple[int, ...] | None:
        """Batch entry point: delegates to the fallback's row hook cheaply on nodes without topology."""
        idx = _index(state)
        node = idx.node_at(row, state.arrays.names[row])
        topo = idx.topo(node)
        if self._delegate(state, task, topo):
            if self._fallback_batch:
                return self.fallback.choose_gpus_row(state, task, row)
            gpus = self.fallback.choose_gpus(state, task, node)
            return None if gpus is None else tuple(gpus)
        return self._choose_on(state, task, node, topo)

    def choose_gpus(self, state: CycleState, task: TaskRequest, node: Node) -> tuple[int, ...] | None:
        topo = self._topo(state, node)
        if self._delegate(state, task, topo):
            gpus = self.fallback.choose_gpus(state, task, node)
            return None if gpus is None else tuple(gpus)
        return self._choose_on(state, task, node, topo)

    def _choose_on(
        self, state: CycleState, task: TaskRequest, node: Node, topo: Topology | None
    ) -> tuple[int, ...] | None:
        candidates = fitting_gpus(task, node)
        needed = max(task.gpus, 1)
        if len(candidates) < needed:
            return None
        if topo is None:
            return tuple(candidates[:needed])
        if not task.gpus:
            return (self._shared_gpu(topo, node, candidates, self._held(node, self._job_tasks(state))),)
        planned = self._plan(state).get(task.task_id) if _multi_task(state) else None
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

    # -- explanation ------------------------------------------------------------------------------

    def annotate(self, state: CycleState, task: TaskRequest, placement: Placement) -> None:
        """Append the ring the job's GPUs on this node form (with this task) and its slowest link."""
        if not placement.gpu_indices or not (task.gpus or _multi_task(state)):
            return
        idx = _index(state)
        node = idx.by_name.get(placement.node)
        topo = idx.topo(node) if node is not None else None
        if topo is None or node is None or topo.gpu_count > MAX_TABLE_GPUS:
            return
        members = sorted(set(placement.gpu_indices) | set(self._held(node, self._job_tasks(state))))
        if len(members) < 2:
            if task.gpus == 1 and not _multi_task(state):
                text = f"topology: GPU {members[0]} chosen to keep the best GPU sets free"
                placement.reason = f"{placement.reason}; {text}" if placement.reason else text
            return
        ring = float(tables_for(topo).ring[sum(1 << g for g in members)])
        links = ", ".join(sorted({topo.link(i, j) for i in members for j in members if i < j}))
        own = sorted(placement.gpu_indices)
        bandwidth = f"a ring of {ring:.0f} GB/s (pair links {links})"
        if own == members:
            text = f"topology: GPUs {own} on {node.name} form {bandwidth}"
        else:
            # Say which GPUs are this task's: replica 1 on GPUs 4-7 must not read as if it held 0-7.
            text = (
                f"topology: this task's GPUs {own}; with the job's other tasks on {node.name}, "
                f"GPUs {members} form {bandwidth}"
            )
        placement.reason = f"{placement.reason}; {text}" if placement.reason else text
