"""Score, BestFit baseline: the least weighted CPU + GPU left over after placing the task.

``score = floor(100 * (1 - (0.5 * (c_n - cpu) / cpu_scale + 0.5 * (G_n - k * milli) / gpu_scale)))``
with free CPU c_n and free milli-GPU G_n, then min-max normalised over the feasible nodes.
"""

from __future__ import annotations

import numpy as np

from scheduler.engine.arrays import ClusterArrays
from scheduler.engine.row_adapters import RowScoreMixin
from scheduler.framework import CycleState
from scheduler.model import TaskRequest
from scheduler.plugin_registry import register


def min_max_rows(scores: np.ndarray) -> np.ndarray:
    """Map onto 0..100 linearly; all equal -> all 100."""
    if scores.size == 0:
        return scores
    lo, hi = float(scores.min()), float(scores.max())
    if hi == lo:
        return np.full(scores.shape, 100.0)
    return 100.0 * (scores - lo) / (hi - lo)


@register("best_fit")
class BestFit(RowScoreMixin):
    name = "best_fit"
    cacheable = True

    def __init__(self, cpu_scale: float = 128_000.0, gpu_scale: float = 8_000.0) -> None:
        self.cpu_scale = cpu_scale
        self.gpu_scale = gpu_scale

    def score_rows(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> np.ndarray:
        arrays: ClusterArrays = state.arrays
        cpu_left = (arrays.cpu_free[rows] - task.cpu_milli) / self.cpu_scale
        gpu_left = (arrays.gpu_free[rows].sum(axis=1) - task.total_gpu_milli) / self.gpu_scale
        return np.floor(100.0 * (1.0 - (0.5 * cpu_left + 0.5 * gpu_left)))

    def normalize_rows(self, scores: np.ndarray) -> np.ndarray:
        return min_max_rows(scores)

    def normalize(self, scores: list[float]) -> list[float]:
        return [float(x) for x in min_max_rows(np.asarray(scores, dtype=float))]
