"""Score, the seed strategy: use every dimension of a node in balance, and do not stack look-alikes.

For node n with capacities (C, M, G) and the task's request r = (cpu, mem, k * milli):

    u' = used fractions of (CPU, memory, GPU) after placing the task      (nodes without GPUs: CPU, memory)
    imbalance  = std(u')                                                  in 0..0.5
    similarity = cos(r / cap, u / cap)  with u the usage before (0 on an empty node)
    score      = 100 * (1 - imbalance - 0.5 * similarity)  clipped to 0..100

Low imbalance keeps no dimension exhausted while others idle (a node out of CPU strands its GPUs);
low similarity puts a CPU-heavy task next to GPU-heavy ones rather than next to more CPU-heavy work.

With ``yield_to_multi_gpu`` the score is multiplied by ``max(0, 1 - 2m)^2``, m = the share of the target
workload's GPU request that comes from tasks of 2+ GPUs (``TargetWorkload.multi_gpu_share``):
balancing spreads work over nodes, and multi-GPU tasks need nodes kept whole, so the more of the
workload they are, the more the balance term yields to fragmentation-driven packing.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from scheduler.engine.row_adapters import RowScoreMixin
from scheduler.frag.balance_terms import balance_terms
from scheduler.frag.fgd_scores import target_workload
from scheduler.framework import CycleState
from scheduler.model import TaskRequest
from scheduler.plugin_registry import register


@register("balance")
class Balance(RowScoreMixin):
    name = "balance"
    cacheable = True

    def __init__(self, similarity_weight: float = 0.5, yield_to_multi_gpu: bool = False) -> None:
        self.similarity_weight = similarity_weight
        self.yield_to_multi_gpu = yield_to_multi_gpu

    def cache_token(self, state: CycleState) -> Hashable:
        return self._scale(state)

    def _scale(self, state: CycleState) -> float:
        """max(0, 1 - 2m)^2 with m the multi-GPU share of the workload's GPU request, when yielding."""
        if not self.yield_to_multi_gpu:
            return 1.0
        return max(0.0, 1.0 - 2.0 * target_workload(state).multi_gpu_share) ** 2

    def score_rows(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> np.ndarray:
        imbalance, similarity = balance_terms(state.arrays, task, rows)
        raw = np.clip(100.0 * (1.0 - imbalance - self.similarity_weight * similarity), 0.0, 100.0)
        return self._scale(state) * raw
