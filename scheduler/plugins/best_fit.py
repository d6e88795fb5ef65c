"""Score, BestFit baseline: the least weighted CPU + GPU left over after placing the task.

``score = floor(100 * (1 - (0.5 * (c_n - cpu) / cpu_scale + 0.5 * (G_n - k * milli) / gpu_scale)))``
with free CPU c_n and free milli-GPU G_n, then min-max normalised over the feasible nodes.
"""

from __future__ import annotations

import numpy as np

from scheduler.engine.arrays import ClusterArrays
from scheduler.framework import CycleState, min_max_rows
from scheduler.model import TaskRequest
from scheduler.plugin_registry import register
from scheduler.plugins.dot_product import NodeSpecScaled


@register("best_fit")
class BestFit(NodeSpecScaled):
    name = "best_fit"
    cacheable = True

    def score_rows(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> np.ndarray:
        arrays: ClusterArrays = state.arrays
        cpu_left = (arrays.cpu_free[rows] - task.cpu_milli) / self.cpu_scale
        gpu_left = (arrays.gpu_free[rows].sum(axis=1) - task.total_gpu_milli) / self.gpu_scale
        return np.floor(100.0 * (1.0 - (0.5 * cpu_left + 0.5 * gpu_left)))

    def normalize_rows(self, scores: np.ndarray) -> np.ndarray:
        return min_max_rows(scores)

    def normalize(self, scores: list[float]) -> list[float]:
        return [float(x) for x in min_max_rows(np.asarray(scores, dtype=float))]
