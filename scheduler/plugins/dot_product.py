"""Score, DotProduct baseline (Tetris-style alignment, as in the FGD paper's simulator).

Node vector = (free CPU / cpu_scale, free milli-GPU / gpu_scale); task vector = (CPU request /
cpu_scale, k * milli / gpu_scale); ``score = floor(100 * (1 - dot / 2))``. The node whose free
resources align least with the request (the fullest in the dimensions the task uses) wins. Scales
are the largest node spec of the trace cluster: 128 cores and 8 GPUs.
"""

from __future__ import annotations

import numpy as np

from scheduler.engine.arrays import ClusterArrays
from scheduler.engine.row_adapters import RowScoreMixin
from scheduler.framework import CycleState
from scheduler.model import TaskRequest
from scheduler.plugin_registry import register


class NodeSpecScaled(RowScoreMixin):
    """A score over free CPU and free milli-GPU, each divided by its scale (default: the largest node
    of the trace cluster)."""

    def __init__(self, cpu_scale: float = 128_000.0, gpu_scale: float = 8_000.0) -> None:
        self.cpu_scale = cpu_scale
        self.gpu_scale = gpu_scale


@register("dot_product")
class DotProduct(NodeSpecScaled):
    name = "dot_product"
    cacheable = True

    def score_rows(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> np.ndarray:
        arrays: ClusterArrays = state.arrays
        free_cpu = arrays.cpu_free[rows] / self.cpu_scale
        free_gpu = arrays.gpu_free[rows].sum(axis=1) / self.gpu_scale
        dot = free_cpu * (task.cpu_milli / self.cpu_scale) + free_gpu * (
            task.total_gpu_milli / self.gpu_scale
        )
        return np.floor(100.0 * (1.0 - dot / 2.0))
