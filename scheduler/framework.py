"""Scheduling framework: plugins, profiles and ``schedule()``.

The cycle, per pending job in the given order (the caller orders the queue):

1. for each task of the job, every node runs the profile's *filter* plugins; a node passes when all
   return ``Status.success()``;
2. each *score* plugin scores the feasible nodes, ``normalize`` maps its scores to 0..100, and the node
   score is ``sum(weight_p * score_p) / sum(weight_p)``;
3. the best node wins; ties break by the node's position in ``snapshot.nodes`` (first wins), a
   stable order callers control;
4. the profile's GPU chooser picks the GPU indices on that node; the task is *reserved* on a working
   copy of the snapshot so later tasks and jobs see it;
5. if any task of the job cannot be placed, the job's reservations are undone (gang: all or nothing)
   and the job gets a user-facing reason in ``Decision.unschedulable``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from scheduler.model import (
    GPU_MILLI,
    ClusterSnapshot,
    Decision,
    JobRequest,
    Node,
    Placement,
    TaskRequest,
)


class StatusCode(enum.Enum):
    SUCCESS = "Success"
    UNSCHEDULABLE = "Unschedulable"
    UNSCHEDULABLE_AND_UNRESOLVABLE = "UnschedulableAndUnresolvable"
    ERROR = "Error"


@dataclass(frozen=True)
class Status:
    """Outcome of a plugin call. Expected failures are values with a reason, never exceptions."""

    code: StatusCode = StatusCode.SUCCESS
    reason: str = ""

    @classmethod
    def success(cls) -> Status:
        return _SUCCESS

    @classmethod
    def unschedulable(cls, reason: str) -> Status:
        return cls(StatusCode.UNSCHEDULABLE, reason)

    @classmethod
    def unresolvable(cls, reason: str) -> Status:
        return cls(StatusCode.UNSCHEDULABLE_AND_UNRESOLVABLE, reason)

    @property
    def ok(self) -> bool:
        return self.code is StatusCode.SUCCESS


_SUCCESS = Status()


@dataclass
class CycleState:
    """Per-cycle scratch space shared by plugins (e.g. precomputed workload statistics)."""

    snapshot: ClusterSnapshot
    job: JobRequest | None = None
    data: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class FilterPlugin(Protocol):
    name: str

    def filter(self, state: CycleState, task: TaskRequest, node: Node) -> Status: ...


@runtime_checkable
class ScorePlugin(Protocol):
    name: str

    def score(self, state: CycleState, task: TaskRequest, node: Node) -> float: ...


@runtime_checkable
class NormalizePlugin(Protocol):
    def normalize(self, scores: list[float]) -> list[float]: ...


@runtime_checkable
class GpuChooserPlugin(Protocol):
    """Picks which GPUs of the chosen node a task gets (None when none fit)."""

    name: str

    def choose_gpus(self, state: CycleState, task: TaskRequest, node: Node) -> tuple[int, ...] | None: ...


PluginFactory = Callable[..., Any]
REGISTRY: dict[str, PluginFactory] = {}


def register(name: str) -> Callable[[PluginFactory], PluginFactory]:
    """Class decorator: make a plugin available to profiles under ``name``."""

    def wrap(cls: PluginFactory) -> PluginFactory:
        if name in REGISTRY and REGISTRY[name] is not cls:
            raise ValueError(f"plugin name {name!r} registered twice")
        REGISTRY[name] = cls
        cls.name = name  # type: ignore[attr-defined]
        return cls

    return wrap


def create_plugin(name: str, args: dict[str, Any] | None = None) -> Any:
    _load_builtin_plugins()
    try:
        factory = REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(REGISTRY))
        raise ValueError(f"unknown scheduler plugin {name!r}; known plugins: {known}") from None
    return factory(**(args or {}))


def _load_builtin_plugins() -> None:
    import scheduler.plugins  # noqa: F401  (registers the built-in plugins on import)


@dataclass
class Profile:
    """Which plugins run, with which weights and arguments.

    ``filters``: plugin names; ``scores``: plugin name -> weight; ``gpu_chooser``: plugin name;
    ``args``: plugin name -> keyword arguments for its constructor.
    """

    name: str = "default"
    filters: Sequence[str] = ("resource_fit",)
    scores: dict[str, float] = field(default_factory=dict)
    gpu_chooser: str = "first_fit_gpus"
    args: dict[str, dict[str, Any]] = field(default_factory=dict)

    def build(self) -> BuiltProfile:
        filters = [create_plugin(n, self.args.get(n)) for n in self.filters]
        scores = [(create_plugin(n, self.args.get(n)), float(w)) for n, w in self.scores.items()]
        chooser = create_plugin(self.gpu_chooser, self.args.get(self.gpu_chooser))
        return BuiltProfile(self, filters, scores, chooser)


@dataclass
class BuiltProfile:
    profile: Profile
    filters: list[Any]
    scores: list[tuple[Any, float]]
    chooser: Any


def min_max_normalize(scores: list[float]) -> list[float]:
    """Map scores linearly onto 0..100 (all equal -> all 100)."""
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    if hi == lo:
        return [100.0] * len(scores)
    return [100.0 * (s - lo) / (hi - lo) for s in scores]


def reserve(snapshot_node: Node, placement: Placement) -> None:
    """Account a placement on a node (working copy)."""
    snapshot_node.used_cpu_milli += placement.cpu_milli
    snapshot_node.used_memory_mib += placement.memory_mib
    for idx in placement.gpu_indices:
        gpu = snapshot_node.gpus[idx]
        gpu.used_milli += placement.gpu_milli
        gpu.used_memory_mib += placement.gpu_memory_mib
        gpu.tenants.append(placement.task_id)


def unreserve(snapshot_node: Node, placement: Placement) -> None:
    snapshot_node.used_cpu_milli -= placement.cpu_milli
    snapshot_node.used_memory_mib -= placement.memory_mib
    for idx in placement.gpu_indices:
        gpu = snapshot_node.gpus[idx]
        gpu.used_milli -= placement.gpu_milli
        gpu.used_memory_mib -= placement.gpu_memory_mib
        if placement.task_id in gpu.tenants:
            gpu.tenants.remove(placement.task_id)


def placement_for(task: TaskRequest, job: JobRequest, node: Node, gpus: tuple[int, ...]) -> Placement:
    per_gpu_milli = GPU_MILLI if task.gpus else task.gpu_milli
    per_gpu_mem = task.gpu_memory_mib
    if task.gpus and not per_gpu_mem:
        # A whole GPU owns all of its memory.
        per_gpu_mem = node.gpus[gpus[0]].memory_mib if gpus else 0
    return Placement(
        job_id=job.job_id,
        task_id=task.task_id,
        node=node.name,
        gpu_indices=gpus,
        gpu_milli=per_gpu_milli if gpus else 0,
        gpu_memory_mib=per_gpu_mem if gpus else 0,
        cpu_milli=task.cpu_milli,
        memory_mib=task.memory_mib,
    )


def _place_task(built: BuiltProfile, state: CycleState, task: TaskRequest) -> tuple[Placement | None, str]:
    job = state.job
    assert job is not None
    feasible: list[Node] = []
    reasons: dict[str, int] = {}
    for node in state.snapshot.nodes:
        if not node.schedulable:
            reasons["node is not schedulable"] = reasons.get("node is not schedulable", 0) + 1
            continue
        for plugin in built.filters:
            status = plugin.filter(state, task, node)
            if not status.ok:
                reasons[status.reason] = reasons.get(status.reason, 0) + 1
                break
        else:
            feasible.append(node)
    if not feasible:
        summary = "; ".join(f"{count} node(s): {why}" for why, count in sorted(reasons.items()))
        return None, f"0/{len(state.snapshot.nodes)} nodes fit task {task.task_id}: {summary}"

    totals = [0.0] * len(feasible)
    weight_sum = sum(w for _, w in built.scores) or 1.0
    for plugin, weight in built.scores:
        raw = [float(plugin.score(state, task, node)) for node in feasible]
        norm = plugin.normalize(raw) if isinstance(plugin, NormalizePlugin) else raw
        for i, s in enumerate(norm):
            totals[i] += weight * s / weight_sum

    order = sorted(range(len(feasible)), key=lambda i: (-totals[i], i))
    for i in order:
        node = feasible[i]
        gpus = built.chooser.choose_gpus(state, task, node) if task.total_gpu_milli else ()
        if gpus is None:
            continue
        placement = placement_for(task, job, node, tuple(gpus))
        placement.reason = f"node {node.name} scored {totals[i]:.1f}/100 by profile {built.profile.name}"
        return placement, ""
    return None, f"no GPU set on the {len(feasible)} feasible node(s) fits task {task.task_id}"


def schedule(
    snapshot: ClusterSnapshot,
    pending: Sequence[JobRequest],
    profile: Profile | BuiltProfile | None = None,
) -> Decision:
    """Place ``pending`` jobs, in the given order, onto ``snapshot``; the snapshot is not modified."""
    built = profile if isinstance(profile, BuiltProfile) else (profile or Profile()).build()
    working = snapshot.copy()
    nodes = {n.name: n for n in working.nodes}
    decision = Decision()
    state = CycleState(snapshot=working)
    for job in pending:
        state.job = job
        placed: list[Placement] = []
        failure = ""
        for task in job.tasks:
            placement, failure = _place_task(built, state, task)
            if placement is None:
                break
            reserve(nodes[placement.node], placement)
            placed.append(placement)
        if failure:
            for placement in placed:
                unreserve(nodes[placement.node], placement)
            decision.unschedulable[job.job_id] = failure
        else:
            decision.placements.extend(placed)
    state.job = None
    return decision
