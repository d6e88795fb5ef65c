"""Score, GpuClustering baseline: keep GPU tasks of one kind together.

Each node carries the kinds (shared, 1, 2, 4, 8 GPUs) of GPU tasks running on it. With
``fill = floor(25 * (gpu_scale - free milli-GPU) / gpu_scale)`` (fuller nodes first):

    75 + fill  node runs only tasks of this task's kind
    50 + fill  node runs this kind and others
    25 + fill  node runs no GPU task
         fill  node runs only other kinds
    0          the task asks for no GPU
"""

from __future__ import annotations

import numpy as np

from scheduler.engine.arrays import ClusterArrays, task_tag
from scheduler.engine.row_adapters import RowScoreMixin
from scheduler.framework import CycleState
from scheduler.model import TaskRequest
from scheduler.plugin_registry import register


@register("gpu_clustering")
class GpuClustering(RowScoreMixin):
    name = "gpu_clustering"
    cacheable = True

    def __init__(self, gpu_scale: int = 8_000) -> None:
        self.gpu_scale = gpu_scale

    def score_rows(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> np.ndarray:
        arrays: ClusterArrays = state.arrays
        tag = task_tag(task)
        if tag < 0:
            return np.zeros(len(rows))
        left = arrays.gpu_free[rows].sum(axis=1)
        fill = 25 * (self.gpu_scale - left) // self.gpu_scale
        present = arrays.tags[rows] > 0
        kinds = present.sum(axis=1)
        mine = present[:, tag]
        band = np.where(mine, np.where(kinds == 1, 75, 50), np.where(kinds == 0, 25, 0))
        return (band + fill).astype(float)
