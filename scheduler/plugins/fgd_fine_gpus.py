"""GPU chooser ``fgd_fine_gpus``, matching ``fgd_fine``: a shared task takes the GPU with the best
unfloored score (``scheduler.frag.lookahead.fine_scores``), whole GPUs the first k idle ones.
"""

from __future__ import annotations

import numpy as np

from scheduler.engine.row_adapters import SharedGpuRowChooser
from scheduler.frag.lookahead import GAP_LOOKAHEAD_GPU, fine_scores
from scheduler.framework import CycleState
from scheduler.model import TaskRequest
from scheduler.plugin_registry import register


@register("fgd_fine_gpus")
class FgdFineGpus(SharedGpuRowChooser):
    """GPU chooser matching ``fgd_fine``: a shared task takes the GPU with the best unfloored score,
    whole GPUs the first k idle ones."""

    name = "fgd_fine_gpus"

    def __init__(self, lookahead: float = GAP_LOOKAHEAD_GPU) -> None:
        self.lookahead = lookahead

    def choose_shared_row(
        self, state: CycleState, task: TaskRequest, row: int, fitting: np.ndarray
    ) -> tuple[int, ...] | None:
        free = state.arrays.gpu_free[row, fitting]
        if (free == free[0]).all():
            # A shared task's score depends on its GPU only through the GPU's free milli-GPU, so
            # equally free GPUs tie, and ties go to the first (e.g. only idle GPUs admitted).
            return (int(fitting[0]),)
        best = int(fine_scores(state, task, np.array([row]), self.lookahead)[1][0])
        return None if best < 0 else (best,)
