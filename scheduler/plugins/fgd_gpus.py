"""GPU chooser ``fgd_gpus``: a shared task takes the first GPU with FGD's best score
(``scheduler.frag.fgd_scores``), whole GPUs the first k idle ones."""

from __future__ import annotations

import numpy as np

from scheduler.engine.row_adapters import SharedGpuRowChooser
from scheduler.frag.fgd_scores import fgd_scores, target_workload
from scheduler.framework import CycleState
from scheduler.model import TaskRequest
from scheduler.plugin_registry import register


@register("fgd_gpus")
class FgdGpus(SharedGpuRowChooser):
    name = "fgd_gpus"

    def choose_shared_row(
        self, state: CycleState, task: TaskRequest, row: int, fitting: np.ndarray
    ) -> tuple[int, ...] | None:
        best = int(fgd_scores(state, task, np.array([row]), target_workload(state))[1][0])
        return None if best < 0 else (best,)
