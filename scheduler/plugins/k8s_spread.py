"""Score, Kubernetes-default-like spread (NodeResourcesLeastAllocated over CPU, memory and whole GPUs).

``score = floor(100 * mean(cpu_left / cpu_cap, mem_left / mem_cap, idle_gpus_left / gpus))`` after
placing the task, where a GPU counts as free only when idle (the stock device plugin hands out whole
GPUs); a node without GPUs has no GPU term. Emptier nodes win, so load spreads out.
"""

from __future__ import annotations

import numpy as np

from scheduler.engine.arrays import ClusterArrays
from scheduler.engine.row_adapters import RowScoreMixin
from scheduler.framework import CycleState
from scheduler.model import GPU_MILLI, TaskRequest
from scheduler.plugin_registry import register


@register("k8s_spread")
class K8sSpread(RowScoreMixin):
    name = "k8s_spread"
    cacheable = True

    def score_rows(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> np.ndarray:
        arrays: ClusterArrays = state.arrays
        cpu = (arrays.cpu_free[rows] - task.cpu_milli) / np.maximum(arrays.cpu_cap[rows], 1)
        mem = (arrays.mem_free[rows] - task.memory_mib) / np.maximum(arrays.mem_cap[rows], 1)
        idle = (arrays.gpu_exists[rows] & (arrays.gpu_free[rows] == GPU_MILLI)).sum(axis=1)
        need = task.gpus if task.gpus else (1 if task.gpu_milli else 0)
        n_gpus = arrays.gpu_count[rows]
        gpu = (idle - need) / np.maximum(n_gpus, 1)
        mean = np.where(n_gpus > 0, (cpu + mem + gpu) / 3.0, (cpu + mem) / 2.0)
        return np.floor(100.0 * np.clip(mean, 0.0, 1.0))
