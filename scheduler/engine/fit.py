"""Which GPUs can take a task: on one ``Node`` and, vectorised, on rows of ``ClusterArrays``.

A whole-GPU task needs idle GPUs (no milli-GPU and no GPU memory in use); a shared task needs a GPU
with ``free milli >= gpu_milli`` and ``free memory >= gpu_memory_mib``. The engine, the
``resource_fit`` filter and the GPU choosers share these so they agree on what fits.
"""

from __future__ import annotations

import numpy as np

from scheduler.engine.arrays import ClusterArrays
from scheduler.model import GPU_MILLI, Node, TaskRequest


def fitting_gpus(task: TaskRequest, node: Node) -> list[int]:
    """Indices of GPUs on ``node`` that can take (one GPU's share of) ``task``."""
    if task.gpu_models and node.gpu_model not in task.gpu_models:
        return []
    if task.gpus:
        return [g.index for g in node.gpus if g.is_idle]
    return [
        g.index
        for g in node.gpus
        if g.free_milli >= task.gpu_milli and g.free_memory_mib >= task.gpu_memory_mib
    ]


def fitting_gpu_mask(arrays: ClusterArrays, task: TaskRequest, rows: np.ndarray) -> np.ndarray:
    """(len(rows), G) mask of GPU slots that can take one GPU's share of ``task`` (model not checked)."""
    free = arrays.gpu_free[rows]
    mem_free = arrays.gpu_mem_free[rows]
    if task.gpus:
        return arrays.gpu_exists[rows] & (free == GPU_MILLI) & (mem_free == arrays.gpu_mem_cap[rows])
    return arrays.gpu_exists[rows] & (free >= task.gpu_milli) & (mem_free >= task.gpu_memory_mib)


def first_k(mask: np.ndarray, k: int) -> np.ndarray:
    """The first ``k`` True entries of each row of ``mask`` (a mask of the same shape)."""
    return mask & (np.cumsum(mask, axis=1) <= k)
