"""GPU chooser, best fit: a shared task takes the fitting GPU with the least free milli-GPU (lowest
index on ties), so partly used GPUs fill up before idle ones are broken; a whole-GPU task takes the
lowest-indexed idle GPUs. This is the GPU choice of every FGD-paper baseline except Random."""

from __future__ import annotations

import numpy as np

from scheduler.engine.fit import fitting_gpu_mask
from scheduler.engine.row_adapters import RowChooserMixin
from scheduler.framework import CycleState
from scheduler.model import TaskRequest
from scheduler.plugin_registry import register


@register("best_fit_gpus")
class BestFitGpus(RowChooserMixin):
    name = "best_fit_gpus"

    def choose_gpus_row(self, state: CycleState, task: TaskRequest, row: int) -> tuple[int, ...] | None:
        mask = fitting_gpu_mask(state.arrays, task, np.array([row]))[0]
        candidates = np.flatnonzero(mask)
        needed = max(task.gpus, 1)
        if candidates.size < needed:
            return None
        if task.gpus:
            return tuple(int(i) for i in candidates[:needed])
        free = state.arrays.gpu_free[row, candidates]
        return (int(candidates[int(np.argmin(free))]),)
