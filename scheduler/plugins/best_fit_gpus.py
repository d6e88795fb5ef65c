"""GPU chooser, best fit: a shared task takes the fitting GPU with the least free milli-GPU (lowest
index on ties), so partly used GPUs fill up before idle ones are broken; a whole-GPU task takes the
lowest-indexed idle GPUs. This is the GPU choice of every FGD-paper baseline except Random."""

from __future__ import annotations

import numpy as np

from scheduler.engine.row_adapters import SharedGpuRowChooser
from scheduler.framework import CycleState
from scheduler.model import TaskRequest
from scheduler.plugin_registry import register


@register("best_fit_gpus")
class BestFitGpus(SharedGpuRowChooser):
    name = "best_fit_gpus"

    def choose_shared_row(
        self, state: CycleState, task: TaskRequest, row: int, fitting: np.ndarray
    ) -> tuple[int, ...] | None:
        free = state.arrays.gpu_free[row, fitting]
        return (int(fitting[int(np.argmin(free))]),)
