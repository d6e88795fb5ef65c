"""GPU chooser ``fgd_gpus``: a shared task takes the first GPU with FGD's best score
(``scheduler.frag.fgd_scores``), whole GPUs the first k idle ones."""

from __future__ import annotations

import numpy as np

from scheduler.engine.fit import fitting_gpu_mask
from scheduler.engine.row_adapters import RowChooserMixin
from scheduler.frag.fgd_scores import fgd_scores, target_workload
from scheduler.framework import CycleState
from scheduler.model import TaskRequest
from scheduler.plugin_registry import register


@register("fgd_gpus")
class FgdGpus(RowChooserMixin):
    name = "fgd_gpus"

    def choose_gpus_row(self, state: CycleState, task: TaskRequest, row: int) -> tuple[int, ...] | None:
        rows = np.array([row])
        mask = fitting_gpu_mask(state.arrays, task, rows)[0]
        needed = max(task.gpus, 1)
        if int(mask.sum()) < needed:
            return None
        if task.gpus:
            return tuple(int(i) for i in np.flatnonzero(mask)[:needed])
        best = int(fgd_scores(state, task, rows, target_workload(state))[1][0])
        return None if best < 0 else (best,)
