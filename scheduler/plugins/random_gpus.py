"""GPU chooser of the Random baseline: uniformly random fitting GPU(s), from ``CycleState.rng``."""

from __future__ import annotations

import numpy as np

from scheduler.engine.fit import fitting_gpu_mask
from scheduler.engine.row_adapters import RowChooserMixin
from scheduler.framework import CycleState
from scheduler.model import TaskRequest
from scheduler.plugin_registry import register


@register("random_gpus")
class RandomGpus(RowChooserMixin):
    name = "random_gpus"

    def choose_gpus_row(self, state: CycleState, task: TaskRequest, row: int) -> tuple[int, ...] | None:
        candidates = np.flatnonzero(fitting_gpu_mask(state.arrays, task, np.array([row]))[0])
        needed = max(task.gpus, 1)
        if candidates.size < needed:
            return None
        picked = state.rng.choice(candidates, size=needed, replace=False)
        return tuple(sorted(int(i) for i in picked))
