"""Score, Random baseline of the FGD paper: one feasible node, drawn uniformly from ``CycleState.rng``,
scores 100 and every other node 0 (the reference draws it in PreScore)."""

from __future__ import annotations

import numpy as np

from scheduler.engine.row_adapters import RowScoreMixin
from scheduler.framework import CycleState
from scheduler.model import TaskRequest
from scheduler.plugin_registry import register


@register("random")
class RandomScore(RowScoreMixin):
    name = "random"
    cacheable = False

    def score_rows(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> np.ndarray:
        scores = np.zeros(len(rows))
        if len(rows):
            scores[int(state.rng.integers(len(rows)))] = 100.0
        return scores
