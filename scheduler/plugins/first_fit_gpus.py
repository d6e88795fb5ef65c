"""GPU chooser: the lowest-indexed GPUs that fit (the foundation's placement)."""

from __future__ import annotations

import numpy as np

from scheduler.engine.row_adapters import SharedGpuRowChooser
from scheduler.framework import CycleState
from scheduler.model import TaskRequest
from scheduler.plugin_registry import register


@register("first_fit_gpus")
class FirstFitGpus(SharedGpuRowChooser):
    name = "first_fit_gpus"

    def choose_shared_row(
        self, state: CycleState, task: TaskRequest, row: int, fitting: np.ndarray
    ) -> tuple[int, ...] | None:
        return (int(fitting[0]),)
