"""Scheduling framework: the plugin Protocols, ``CycleState`` and profiles (the registry of plugin names
is ``scheduler.plugin_registry``).

``schedule()`` (``scheduler.engine.schedule``) runs them. The cycle, per pending job in the given order (the caller orders the queue):

1. for each task of the job, every node runs the profile's *filter* plugins; a node passes when all
   return ``Status.success()``;
2. each *score* plugin scores the feasible nodes, ``normalize`` maps its scores to 0..100, and the node
   score is ``sum(weight_p * score_p) / sum(weight_p)``; a plugin whose ``is_neutral(state, task,
   rows)`` says it has no opinion on this task (same score for every node) is left out of both sums,
   so e.g. a topology score on a cluster without topology changes no float of the total;
3. the best node wins; ties break by the node's position in ``snapshot.nodes`` (first wins), a
   stable order callers control;
4. the profile's GPU chooser picks the GPU indices on that node (``multi_gpu_chooser``, when set,
   for tasks of two or more whole GPUs and for every GPU task of a job of two or more tasks, a
   gang); a filter with ``admitted_gpus_row`` restricts the choice to the GPUs it admits on that
   node (the chooser sees the others as full); the task is *reserved* on a working copy of the
   snapshot so later tasks and jobs see it;
5. if any task of the job cannot be placed, the job's reservations are undone (gang: all or nothing)
   and the job gets a user-facing reason in ``Decision.unschedulable``.

Plugins come in two shapes. A per-node plugin implements ``filter``/``score``/``choose_gpus`` on one
``Node``. A *batch* plugin also implements ``filter_rows``/``score_rows``/``choose_gpus_row`` on the
NumPy view of the whole cluster (``CycleState.arrays``, see ``scheduler.engine.arrays``); its per-node
methods call the same math on a one-row view. The engine (``scheduler.engine.placement``) uses the batch
hook when a plugin has one and the per-node hook otherwise, so both kinds mix in one profile. A batch
plugin with ``cacheable = True`` promises its value for a row depends only on the task's shape, that
row's state and ``cache_token(state)``; the engine then recomputes only rows that changed.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from scheduler.engine.arrays import ClusterArrays
from scheduler.model import ClusterSnapshot, JobRequest, Node, TaskRequest
from scheduler.plugin_registry import create_plugin


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
    # NumPy view of ``snapshot.nodes`` (what batch plugins read), kept in step by the engine.
    arrays: ClusterArrays
    job: JobRequest | None = None
    data: dict[str, Any] = field(default_factory=dict)
    # Randomness for plugins that need it (Random baseline), as ``rng``: seeded so that cycles are
    # reproducible, and made on first use (a generator costs more to make than most cycles' work).
    seeded_rng: np.random.Generator | None = None

    @property
    def rng(self) -> np.random.Generator:
        if self.seeded_rng is None:
            self.seeded_rng = np.random.default_rng(0)
        return self.seeded_rng


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


@runtime_checkable
class BatchFilterPlugin(Protocol):
    """Filter every row in ``rows`` at once; returns a boolean array aligned with ``rows``."""

    name: str

    def filter_rows(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class BatchScorePlugin(Protocol):
    """Score every row in ``rows`` at once; returns a float array aligned with ``rows``."""

    name: str

    def score_rows(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class BatchNormalizePlugin(Protocol):
    def normalize_rows(self, scores: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class NeutralAwarePlugin(Protocol):
    """Optional on score plugins: True when the plugin would give every row of ``rows`` the same
    score for ``task`` (nothing to say); the engine then skips it and drops its weight."""

    def is_neutral(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> bool: ...


@runtime_checkable
class GpuAdmissionPlugin(Protocol):
    """Optional on filter plugins: which GPU slots of ``row`` the filter admits for ``task``
    (a boolean array over ``CycleState.arrays`` columns), or None when it admits every fitting GPU.
    The engine keeps the GPU chooser to admitted GPUs, so a node that passed the filter because one
    of its GPUs is fine never gets the task on another one."""

    def admitted_gpus_row(self, state: CycleState, task: TaskRequest, row: int) -> np.ndarray | None: ...


@runtime_checkable
class BatchGpuChooserPlugin(Protocol):
    name: str

    def choose_gpus_row(self, state: CycleState, task: TaskRequest, row: int) -> tuple[int, ...] | None: ...


# What a profile's slots hold: a plugin with the per-node hook, the batch hook or both.
FilterLike = FilterPlugin | BatchFilterPlugin
ScoreLike = ScorePlugin | BatchScorePlugin
ChooserLike = GpuChooserPlugin | BatchGpuChooserPlugin


@dataclass
class Profile:
    """Which plugins run, with which weights and arguments.

    ``filters``: plugin names; ``scores``: plugin name -> weight; ``gpu_chooser``: plugin name;
    ``multi_gpu_chooser``: plugin name used instead of ``gpu_chooser`` for tasks of 2+ whole GPUs
    and for every GPU task (whole or fractional) of a job with 2+ tasks (e.g. a topology-aware
    GPU-set search that plans the gang), None = ``gpu_chooser`` for all;
    ``args``: plugin name -> keyword arguments for its constructor;
    ``whole_gpus``: hand out whole GPUs only (a shared request takes one whole GPU), the way the
    stock Kubernetes device plugin does; for comparisons.
    """

    name: str = "default"
    filters: Sequence[str] = ("resource_fit",)
    scores: dict[str, float] = field(default_factory=dict)
    gpu_chooser: str = "first_fit_gpus"
    args: dict[str, dict[str, Any]] = field(default_factory=dict)
    multi_gpu_chooser: str | None = None
    whole_gpus: bool = False
    description: str = ""

    def plugin_names(self) -> list[str]:
        names = [*self.filters, *self.scores, self.gpu_chooser]
        if self.multi_gpu_chooser:
            names.append(self.multi_gpu_chooser)
        return names

    def build(self) -> BuiltProfile:
        filters = [create_plugin(n, self.args.get(n)) for n in self.filters]
        scores = [(create_plugin(n, self.args.get(n)), float(w)) for n, w in self.scores.items()]
        chooser = create_plugin(self.gpu_chooser, self.args.get(self.gpu_chooser))
        multi = self.multi_gpu_chooser
        multi_chooser = create_plugin(multi, self.args.get(multi)) if multi else None
        return BuiltProfile(self, filters, scores, chooser, multi_chooser)


@dataclass
class BuiltProfile:
    profile: Profile
    filters: list[FilterLike]
    scores: list[tuple[ScoreLike, float]]
    chooser: ChooserLike
    multi_chooser: ChooserLike | None = None

    def chooser_for(self, task: TaskRequest, job: JobRequest | None = None) -> ChooserLike:
        """The chooser for ``task`` of ``job``: ``multi_chooser`` for 2+ whole GPUs and for every
        GPU task of a multi-task job (its tasks form a gang placed as one set), else ``chooser``."""
        if self.multi_chooser is None:
            return self.chooser
        if task.gpus >= 2:
            return self.multi_chooser
        if job is not None and len(job.tasks) > 1 and task.total_gpu_milli > 0:
            return self.multi_chooser
        return self.chooser


def min_max_normalize(scores: list[float]) -> list[float]:
    """Map scores linearly onto 0..100 (all equal -> all 100)."""
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    if hi == lo:
        return [100.0] * len(scores)
    return [100.0 * (s - lo) / (hi - lo) for s in scores]


def min_max_rows(scores: np.ndarray) -> np.ndarray:
    """``min_max_normalize`` on an array."""
    if scores.size == 0:
        return scores
    lo, hi = float(scores.min()), float(scores.max())
    if hi == lo:
        return np.full(scores.shape, 100.0)
    return 100.0 * (scores - lo) / (hi - lo)
