"""Score ``fgd_fine``: FGD with an unfloored score and a one-task gap look-ahead for shared tasks
(``scheduler.frag.lookahead.fine_scores``).
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from scheduler.engine.row_adapters import RowScoreMixin
from scheduler.frag.fgd_scores import target_workload
from scheduler.frag.lookahead import GAP_LOOKAHEAD, fine_scores
from scheduler.framework import CycleState
from scheduler.model import TaskRequest
from scheduler.plugin_registry import register


@register("fgd_fine")
class FgdFine(RowScoreMixin):
    """FGD, but a shared task's score is not floored (whole-GPU and CPU-only tasks keep FGD's)."""

    name = "fgd_fine"
    cacheable = True

    def __init__(self, lookahead: float = GAP_LOOKAHEAD) -> None:
        self.lookahead = lookahead

    def cache_token(self, state: CycleState) -> Hashable:
        wl = target_workload(state)
        return (id(wl), wl.version)

    def score_rows(self, state: CycleState, task: TaskRequest, rows: np.ndarray) -> np.ndarray:
        return fine_scores(state, task, rows, self.lookahead)[0]
