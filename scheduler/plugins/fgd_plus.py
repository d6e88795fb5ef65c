"""Score and GPU chooser of our default profile: FGD, learned online and made multi-dimensional.

Placeholder while tuning; see docs/benchmarks/frag.md.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from scheduler.frag.arrays import ClusterArrays
from scheduler.frag.batch import RowChooserMixin, RowScoreMixin
from scheduler.frag.fragmentation import TargetWorkload, node_fragment, shared_fragment_after
from scheduler.frag.history import HISTORY_KEY, WorkloadHistory
from scheduler.framework import CycleState, register
from scheduler.model import TaskRequest
from scheduler.plugins.fgd import target_workload
from scheduler.plugins.resource_fit import first_k, fitting_gpu_mask


def observed_workload(state: CycleState, source: str) -> TargetWorkload:
    if source.startswith("trace_cov"):
        key = "_wl_" + source
        if key not in state.data:
            from scheduler.frag.experiment import TRACE_TASKS_KEY
            state.data[key] = TargetWorkload.from_tasks(state.data[TRACE_TASKS_KEY], coverage=float(source[9:]))
        return state.data[key]
    if source == "observed":
        history = state.data.get(HISTORY_KEY)
        if isinstance(history, WorkloadHistory) and history.total:
            return history.workload()
    return target_workload(state)


def deltas(state: CycleState, task: TaskRequest, rows: np.ndarray, wl: TargetWorkload) -> tuple[np.ndarray, np.ndarray]:
    """(Delta per row, best slot per row): Delta = F_n(M) - F_n'(M) on the best GPU (-inf if none)."""
    arrays: ClusterArrays = state.arrays
    before = node_fragment(wl, arrays, rows)
    if task.is_shared:
        after = shared_fragment_after(wl, arrays, rows, task.gpu_milli, task.cpu_milli, task.memory_mib)
        valid = fitting_gpu_mask(arrays, task, rows)
        d = np.where(valid, before[:, None] - after, -np.inf)
        # Equal fragment change: the fuller GPU (best fit) first.
        free = arrays.gpu_free[rows]
        key = np.where(valid, d - 1e-6 * free, -np.inf)
        best = np.argmax(key, axis=1)
        return d[np.arange(len(rows)), best], np.where(valid.any(axis=1), best, -1)
    gpu_free = arrays.gpu_free[rows]
    if task.gpus:
        used = first_k(fitting_gpu_mask(arrays, task, rows), task.gpus)
        gpu_free = np.where(used, 0, gpu_free)
    after = node_fragment(wl, arrays, rows, gpu_free=gpu_free, cpu_free=arrays.cpu_free[rows] - task.cpu_milli,
                          mem_free=arrays.mem_free[rows] - task.memory_mib)
    return before - after, np.full(len(rows), -1)


def tie_break(arrays: ClusterArrays, task: TaskRequest, rows: np.ndarray, kind: str) -> np.ndarray:
    """A 0..1 preference among nodes of equal fragmentation score."""
    cpu_after = (arrays.cpu_free[rows] - task.cpu_milli) / np.maximum(arrays.cpu_cap[rows], 1)
    mem_after = (arrays.mem_free[rows] - task.memory_mib) / np.maximum(arrays.mem_cap[rows], 1)
    gcap = np.maximum(arrays.gpu_count[rows] * 1000, 1)
    gpu_after = (arrays.gpu_free[rows].sum(axis=1) - task.total_gpu_milli) / gcap
    if kind == "bestfit":
        left = (arrays.gpu_free[rows].sum(axis=1) - task.total_gpu_milli) / 8000.0
        cpu_left = (arrays.cpu_free[rows] - task.cpu_milli) / 128000.0
        return np.clip(1.0 - 0.5 * left - 0.5 * cpu_left, 0, 1)
    if kind == "balance":
        return 1.0 - np.std(np.stack([cpu_after, mem_after, gpu_after]), axis=0)
    if kind == "ratio":
        return 1.0 - np.abs(cpu_after - gpu_after) / 2
    if kind == "ratio_mem":
        return 1.0 - (np.abs(cpu_after - gpu_after) + np.abs(mem_after - gpu_after)) / 4
    if kind == "cpu_rich":
        return np.clip(cpu_after - gpu_after + 1, 0, 2) / 2
    raise ValueError(kind)


@register("fgd_plus")
class FgdPlus(RowScoreMixin):
    name = "fgd_plus"
    cacheable = True

    def __init__(self, source: str = "observed", quantize: bool = False, pack: float = 0.0,
                 with_memory: bool = False, quantum: float = 0.0, coverage: float = 0.95, tie: str = "bestfit") -> None:
        self.tie = tie
        self.quantum = quantum
        self.coverage = coverage
        self.source = source
        self.quantize = quantize
        self.pack = pack
        self.with_memory = with_memory

    def cache_token(self, state: CycleState) -> Hashable:
        wl = observed_workload(state, self.source)
        return (id(wl), wl.version)

    def score_rows(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> np.ndarray:
        d, _ = deltas(state, task, rows, observed_workload(state, self.source))
        if self.quantum:
            return np.floor(d / self.quantum)
        s = 100.0 / (1.0 + np.exp(-d / 1000.0))
        if self.quantize:
            s = np.floor(s)
        if self.pack:
            s = s + self.pack * tie_break(state.arrays, task, rows, self.tie)
        return s


@register("fgd_plus_gpus")
class FgdPlusGpus(RowChooserMixin):
    name = "fgd_plus_gpus"

    def __init__(self, source: str = "observed") -> None:
        self.source = source

    def choose_gpus_row(self, state: CycleState, task: TaskRequest, row: int) -> tuple[int, ...] | None:
        rows = np.array([row])
        mask = fitting_gpu_mask(state.arrays, task, rows)[0]
        needed = max(task.gpus, 1)
        if int(mask.sum()) < needed:
            return None
        if task.gpus:
            return tuple(int(i) for i in np.flatnonzero(mask)[:needed])
        best = int(deltas(state, task, rows, observed_workload(state, self.source))[1][0])
        return None if best < 0 else (best,)
