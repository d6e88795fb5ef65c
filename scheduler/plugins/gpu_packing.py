"""Score, GpuPacking baseline: fill partly used GPUs, then idle GPUs of started nodes, then new nodes.

GPUs are taken least-free first (``k`` of them with free >= the per-GPU request). Then:

    (a) no idle GPU needed:    max(100 - sum_i floor(100 * free_i / 1000) / 10, 50)
    (b) k' >= 1 idle GPUs on a node with some GPU in use: max(50 - k', 33)
    (c) every GPU of the node idle:  max(33 - #GPUs, #GPUs)
    0 for a task without GPUs.
"""

from __future__ import annotations

import numpy as np

from scheduler.engine.arrays import ClusterArrays
from scheduler.engine.row_adapters import RowScoreMixin
from scheduler.framework import CycleState
from scheduler.model import GPU_MILLI, TaskRequest
from scheduler.plugin_registry import register


@register("gpu_packing")
class GpuPacking(RowScoreMixin):
    name = "gpu_packing"
    cacheable = True

    def score_rows(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> np.ndarray:
        arrays: ClusterArrays = state.arrays
        if not task.total_gpu_milli:
            return np.zeros(len(rows))
        milli = GPU_MILLI if task.gpus else task.gpu_milli
        k = max(task.gpus, 1)
        exists = arrays.gpu_exists[rows]
        free = np.where(exists, arrays.gpu_free[rows], -1)
        ordered = np.sort(free, axis=1, kind="stable")
        fit = ordered >= milli
        chosen = fit & (np.cumsum(fit, axis=1) <= k)
        idle_used = (chosen & (ordered == GPU_MILLI)).sum(axis=1)
        partial_sum = np.where(chosen, ordered * 100 // GPU_MILLI, 0).sum(axis=1)
        idle_all = (free == GPU_MILLI).sum(axis=1) == arrays.gpu_count[rows]
        n_gpus = arrays.gpu_count[rows]
        case_c = np.maximum(33 - n_gpus, n_gpus)
        case_b = np.maximum(50 - idle_used, 33)
        case_a = np.maximum(100 - partial_sum // 10, 50)
        return np.where(idle_all, case_c, np.where(idle_used > 0, case_b, case_a)).astype(float)
